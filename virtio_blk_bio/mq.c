// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_blk_bio: the blk-mq request path (use_bio=N).
 *
 * One hardware context per virtqueue; ->queue_rqs adds a whole plug list
 * per virtqueue under one lock hold and kicks once; poll queues have no
 * interrupt and are reaped from ->poll.
 */
#include <linux/slab.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "vbb.h"

struct vbb_mq_req {
	struct virtio_blk_outhdr out_hdr;
	u8 status;
	/*
	 * The device returned it, but fail_io_timeout made the reap leave it
	 * in flight: vbb_mq_timeout() completes it with its result.
	 */
	bool faked;
	/* the result, set when the request leaves the ring */
	blk_status_t result;
	/* vbb_mq_take_all() chain */
	struct vbb_mq_req *next;
	struct virtio_blk_discard_write_zeroes *ranges;
	unsigned int nr_ranges;
	struct sg_table sgt;
	struct scatterlist sg[];
};

static inline struct vbb_vq *vbb_hctx_vq(struct blk_mq_hw_ctx *hctx)
{
	struct vbb_dev *vb = hctx->queue->queuedata;

	return &vb->vqs[hctx->queue_num];
}

static void vbb_mq_cleanup(struct request *req, struct vbb_mq_req *r)
{
	if (r->sgt.nents)
		sg_free_table_chained(&r->sgt, VBB_MQ_INLINE_SG);
	r->sgt.nents = 0;
	kfree(r->ranges);
	r->ranges = NULL;
	r->nr_ranges = 0;
}

/* Build the discard / write-zeroes range list of a request. */
static blk_status_t vbb_mq_setup_ranges(struct vbb_dev *vb,
					struct request *req,
					struct vbb_mq_req *r, bool unmap)
{
	struct virtio_blk_discard_write_zeroes *rng;
	u32 flags = unmap ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
	unsigned int n = 0, max = 0;
	struct bio *bio;

	if (req_op(req) == REQ_OP_DISCARD &&
	    queue_max_discard_segments(req->q) > 1) {
		__rq_for_each_bio(bio, req)
			max++;
	}
	if (!max)
		max = 1;

	rng = kmalloc_array(max, sizeof(*rng), GFP_ATOMIC);
	if (!rng)
		return BLK_STS_RESOURCE;

	if (max == 1) {
		/* contiguous merges only: the request is one range */
		rng[0].sector = cpu_to_le64(blk_rq_pos(req));
		rng[0].num_sectors = cpu_to_le32(blk_rq_sectors(req));
		rng[0].flags = cpu_to_le32(flags);
		n = 1;
	} else {
		__rq_for_each_bio(bio, req) {
			u64 sector = bio->bi_iter.bi_sector;
			u32 nr = bio_sectors(bio);

			/* coalesce bios that continue the previous range */
			if (n && le64_to_cpu(rng[n - 1].sector) +
			    le32_to_cpu(rng[n - 1].num_sectors) == sector &&
			    (u64)le32_to_cpu(rng[n - 1].num_sectors) + nr <=
			    U32_MAX) {
				le32_add_cpu(&rng[n - 1].num_sectors, nr);
				continue;
			}
			rng[n].sector = cpu_to_le64(sector);
			rng[n].num_sectors = cpu_to_le32(nr);
			rng[n].flags = cpu_to_le32(flags);
			n++;
		}
	}
	r->ranges = rng;
	r->nr_ranges = n;
	return BLK_STS_OK;
}

static blk_status_t vbb_mq_setup_cmd(struct vbb_dev *vb, struct request *req,
				     struct vbb_mq_req *r)
{
	struct virtio_device *vdev = vb->vdev;
	u64 sector = 0;
	u32 type;
	blk_status_t st;

	r->ranges = NULL;
	r->nr_ranges = 0;
	r->sgt.nents = 0;
	r->faked = false;

	switch (req_op(req)) {
	case REQ_OP_READ:
		type = VIRTIO_BLK_T_IN;
		sector = blk_rq_pos(req);
		break;
	case REQ_OP_WRITE:
		type = VIRTIO_BLK_T_OUT;
		sector = blk_rq_pos(req);
		break;
	case REQ_OP_FLUSH:
		type = VIRTIO_BLK_T_FLUSH;
		break;
	case REQ_OP_DISCARD:
		type = VIRTIO_BLK_T_DISCARD;
		st = vbb_mq_setup_ranges(vb, req, r, false);
		if (st)
			return st;
		break;
	case REQ_OP_WRITE_ZEROES:
		type = VIRTIO_BLK_T_WRITE_ZEROES;
		st = vbb_mq_setup_ranges(vb, req, r,
					 !(req->cmd_flags & REQ_NOUNMAP));
		if (st)
			return st;
		break;
	case REQ_OP_DRV_IN:
		type = VIRTIO_BLK_T_GET_ID;
		break;
	default:
		return BLK_STS_NOTSUPP;
	}

	r->out_hdr.type = cpu_to_virtio32(vdev, type);
	r->out_hdr.sector = cpu_to_virtio64(vdev, sector);
	r->out_hdr.ioprio = cpu_to_virtio32(vdev, req_get_ioprio(req));
	r->status = VIRTIO_BLK_S_IOERR;
	return BLK_STS_OK;
}

static int vbb_mq_map_data(struct request *req, struct vbb_mq_req *r)
{
	unsigned short nsegs = blk_rq_nr_phys_segments(req);
	int err;

	if (r->ranges || !nsegs || !blk_rq_bytes(req))
		return 0;

	r->sgt.sgl = r->sg;
	err = sg_alloc_table_chained(&r->sgt, nsegs, r->sg, VBB_MQ_INLINE_SG);
	if (err)
		return -ENOMEM;
	r->sgt.nents = blk_rq_map_sg(req, r->sgt.sgl);
	return r->sgt.nents;
}

static int vbb_mq_add(struct vbb_vq *q, struct request *req,
		      struct vbb_mq_req *r)
{
	struct scatterlist hdr, status, rng, *sgs[3];
	unsigned int out = 0, in = 0;
	int err;

	sg_init_one(&hdr, &r->out_hdr, sizeof(r->out_hdr));
	sgs[out++] = &hdr;
	if (r->ranges) {
		sg_init_one(&rng, r->ranges,
			    r->nr_ranges * sizeof(*r->ranges));
		sgs[out++] = &rng;
	} else if (r->sgt.nents) {
		if (rq_data_dir(req) == WRITE)
			sgs[out++] = r->sgt.sgl;
		else
			sgs[out + in++] = r->sgt.sgl;
	}
	sg_init_one(&status, &r->status, sizeof(r->status));
	sgs[out + in++] = &status;

	err = virtqueue_add_sgs(q->vq, sgs, out, in, r, GFP_ATOMIC);
	if (!err)
		q->added++;
	return err;
}

static bool vbb_mq_kick_prepare(struct vbb_vq *q)
{
	bool kick;

	q->kick_tries++;
	kick = virtqueue_kick_prepare(q->vq);
	if (kick)
		q->notifies++;
	return kick;
}

/* Build the command and map the data; the caller starts the request. */
static blk_status_t vbb_mq_prep(struct vbb_dev *vb, struct request *req,
				struct vbb_mq_req *r)
{
	blk_status_t st;
	int n;

	st = vbb_mq_setup_cmd(vb, req, r);
	if (st)
		return st;
	n = vbb_mq_map_data(req, r);
	if (n < 0) {
		vbb_mq_cleanup(req, r);
		return BLK_STS_RESOURCE;
	}
	return BLK_STS_OK;
}

static blk_status_t vbb_queue_rq(struct blk_mq_hw_ctx *hctx,
				 const struct blk_mq_queue_data *bd)
{
	struct vbb_dev *vb = hctx->queue->queuedata;
	struct vbb_vq *q = vbb_hctx_vq(hctx);
	struct request *req = bd->rq;
	struct vbb_mq_req *r = blk_mq_rq_to_pdu(req);
	unsigned long flags;
	blk_status_t st;
	bool kick = false;
	int err;

	/* not restored: the rings are gone */
	if (unlikely(READ_ONCE(vb->killed)))
		return BLK_STS_IOERR;
	st = vbb_mq_prep(vb, req, r);
	if (st)
		return st;

	spin_lock_irqsave(&q->lock, flags);
	err = vbb_mq_add(q, req, r);
	/*
	 * Started only once on the ring (under q->lock, so its completion
	 * cannot come first): a started request is one the device holds, and
	 * one that times out is one the device did not answer.
	 */
	if (!err)
		blk_mq_start_request(req);
	if (err) {
		/* let the device drain what is there */
		kick = vbb_mq_kick_prepare(q);
		if (err == -ENOSPC) {
			q->full++;
			/*
			 * A ring that holds nothing yet has no room: an
			 * indirect table could not be allocated. No completion
			 * will restart a stopped queue: blk-mq retries after a
			 * delay. Otherwise the next completion restarts it.
			 */
			if (vbb_ring_empty(q))
				st = BLK_STS_RESOURCE;
			else
				blk_mq_stop_hw_queue(hctx);
		}
		spin_unlock_irqrestore(&q->lock, flags);
		vbb_notify_prepared(q, kick);
		vbb_mq_cleanup(req, r);
		if (st)
			return st;
		if (err == -ENOSPC)
			return BLK_STS_DEV_RESOURCE;
		return err == -ENOMEM ? BLK_STS_RESOURCE : BLK_STS_IOERR;
	}
	if (bd->last)
		kick = vbb_mq_kick_prepare(q);
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_notify_prepared(q, kick);
	return BLK_STS_OK;
}

static void vbb_commit_rqs(struct blk_mq_hw_ctx *hctx)
{
	struct vbb_dev *vb = hctx->queue->queuedata;
	struct vbb_vq *q;
	bool kick;

	if (unlikely(READ_ONCE(vb->killed)))
		return;
	q = vbb_hctx_vq(hctx);

	spin_lock_irq(&q->lock);
	kick = vbb_mq_kick_prepare(q);
	spin_unlock_irq(&q->lock);
	vbb_notify_prepared(q, kick);
}

/*
 * Add a batch that all maps to @q, kick once. A request is started only once
 * it is on the ring (under q->lock, so its completion cannot run first).
 * Once an add fails, that request and the rest of the batch go to @requeue
 * unstarted and in order: ->queue_rqs hands them back, and blk-mq issues
 * them one by one through ->queue_rq, which stops the hardware queue and
 * returns BLK_STS_DEV_RESOURCE if the ring is still full.
 */
static void vbb_add_batch(struct vbb_vq *q, struct vbb_rq_list *batch,
			  struct vbb_rq_list *requeue)
{
	struct request *req;
	unsigned long flags;
	bool kick, failed = false;

	spin_lock_irqsave(&q->lock, flags);
	while ((req = vbb_rq_list_pop(batch))) {
		struct vbb_mq_req *r = blk_mq_rq_to_pdu(req);

		if (!failed && vbb_mq_add(q, req, r)) {
			q->full++;
			failed = true;
		}
		if (failed) {
			vbb_mq_cleanup(req, r);
			vbb_rq_list_add_tail(requeue, req);
			continue;
		}
		vbb_rq_claim_tag(req);
		blk_mq_start_request(req);
	}
	/* also lets the device drain a full ring */
	kick = vbb_mq_kick_prepare(q);
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_notify_prepared(q, kick);
}

static void vbb_queue_rqs(vbb_queue_rqs_arg_t *rqlist)
{
	struct vbb_rq_list in, batch = { }, requeue = { };
	struct vbb_vq *q = NULL;
	struct request *req;

	vbb_rq_list_take(&in, rqlist);
	while ((req = vbb_rq_list_pop(&in))) {
		struct vbb_dev *vb = req->q->queuedata;
		struct vbb_vq *this_q;

		/* not restored: ->queue_rq fails them */
		if (unlikely(READ_ONCE(vb->killed))) {
			vbb_rq_list_add_tail(&requeue, req);
			continue;
		}
		this_q = vbb_hctx_vq(req->mq_hctx);
		if (q && q != this_q)
			vbb_add_batch(q, &batch, &requeue);
		q = this_q;
		if (vbb_mq_prep(vb, req, blk_mq_rq_to_pdu(req)))
			vbb_rq_list_add_tail(&requeue, req);
		else
			vbb_rq_list_add_tail(&batch, req);
	}
	if (q)
		vbb_add_batch(q, &batch, &requeue);
	vbb_rq_list_give(rqlist, &requeue);
}

static void vbb_mq_complete(struct request *req)
{
	struct vbb_mq_req *r = blk_mq_rq_to_pdu(req);

	vbb_mq_cleanup(req, r);
	blk_mq_end_request(req, r->result);
}

/*
 * A request that succeeded joins the batch of the poller or the interrupt,
 * its scatterlist and range list freed now (blk_mq_end_request_batch() ends
 * it like blk_mq_end_request() would, but together with the others).
 */
static bool vbb_mq_to_batch(struct request *req, struct vbb_mq_req *r,
			    struct io_comp_batch *iob)
{
	if (r->result != BLK_STS_OK || blk_rq_is_passthrough(req))
		return false;
	vbb_mq_cleanup(req, r);
	return blk_mq_add_to_batch(req, iob, false, blk_mq_end_request_batch);
}

/*
 * Under q->lock: complete what the device has returned on @q, from the
 * interrupt or from ->poll; what succeeded goes to @iob, for the caller to
 * end once the lock is dropped. A hardware queue stopped on a full ring is
 * started again. Returns the number of requests taken.
 */
static int vbb_mq_reap(struct vbb_dev *vb, struct vbb_vq *q,
		       struct io_comp_batch *iob)
{
	struct vbb_mq_req *r;
	unsigned int len;
	int n = 0;

	while ((r = virtqueue_get_buf(q->vq, &len))) {
		struct request *req = blk_mq_rq_from_pdu(r);

		n++;
		r->result = vbb_status_to_blk(r->status);
		if (unlikely(blk_should_fake_timeout(req->q))) {
			/* read by vbb_mq_timeout() after it took q->lock */
			r->faked = true;
			continue;
		}
		/* true: another CPU completes it (the request is marked done) */
		if (blk_mq_complete_request_remote(req))
			continue;
		if (iob && vbb_mq_to_batch(req, r, iob))
			continue;
		vbb_mq_complete(req);
	}
	if (n)
		blk_mq_start_stopped_hw_queue(vb->hctx[q - vb->vqs], true);
	return n;
}

/*
 * Interrupt of a request queue (and the timeout handler's look at it). The
 * requests that succeeded are ended together once the lock is dropped: the
 * tags and the queue's usage count in one go for all of them, and no bio's
 * completion runs with the queue locked. The others end one by one.
 */
void vbb_mq_done(struct virtqueue *vq)
{
	struct vbb_dev *vb = vq->vdev->priv;
	struct vbb_vq *q = &vb->vqs[vq->index];
	DEFINE_IO_COMP_BATCH(iob);
	unsigned long flags;
	unsigned int seen;

	spin_lock_irqsave(&q->lock, flags);
	/* until no buffer came back between the last reap and re-enabling */
	do {
		virtqueue_disable_cb(vq);
		vbb_mq_reap(vb, q, &iob);
		seen = virtqueue_enable_cb_prepare(vq);
	} while (unlikely(virtqueue_poll(vq, seen)));
	spin_unlock_irqrestore(&q->lock, flags);
	/* set by the first request that joined the batch */
	if (iob.complete)
		iob.complete(&iob);
}

/*
 * ->poll of a poll queue (no interrupt): reap into the caller's batch.
 * Between ->freeze and ->restore the rings are gone (num_vqs 0, set before
 * an RCU grace period that precedes freeing them): nothing to reap.
 */
static int vbb_poll(struct blk_mq_hw_ctx *hctx, struct io_comp_batch *iob)
{
	struct vbb_dev *vb = hctx->queue->queuedata;
	struct vbb_vq *q;
	unsigned long flags;
	int n = 0;

	if (unlikely(READ_ONCE(vb->killed)))
		return 0;
	rcu_read_lock();
	/* pairs with vbb_init_vqs(): the rings are set before the count */
	if (smp_load_acquire(&vb->num_vqs)) {
		q = vbb_hctx_vq(hctx);
		spin_lock_irqsave(&q->lock, flags);
		n = vbb_mq_reap(vb, q, iob);
		spin_unlock_irqrestore(&q->lock, flags);
	}
	rcu_read_unlock();
	return n;
}

/*
 * CPU to hardware queue maps: the interrupt-driven queues first, spread as
 * their vectors' affinity is; the poll queues after them, which have no
 * vector, spread over the CPUs by blk-mq. No separate read queues.
 */
static void vbb_map_queues(struct blk_mq_tag_set *set)
{
	struct vbb_dev *vb = set->driver_data;
	struct blk_mq_queue_map *def = &set->map[HCTX_TYPE_DEFAULT];
	struct blk_mq_queue_map *poll;

	def->nr_queues = vb->io_queues[HCTX_TYPE_DEFAULT];
	def->queue_offset = 0;
	blk_mq_map_hw_queues(def, &vb->vdev->dev, 0);
	if (set->nr_maps <= HCTX_TYPE_POLL)
		return;
	set->map[HCTX_TYPE_READ].nr_queues = 0;
	set->map[HCTX_TYPE_READ].queue_offset = def->nr_queues;
	poll = &set->map[HCTX_TYPE_POLL];
	poll->nr_queues = vb->io_queues[HCTX_TYPE_POLL];
	poll->queue_offset = def->nr_queues;
	blk_mq_map_queues(poll);
}

/* Remember each virtqueue's hardware context: vbb_mq_reap() restarts it. */
static int vbb_init_hctx(struct blk_mq_hw_ctx *hctx, void *data,
			 unsigned int index)
{
	struct vbb_dev *vb = data;

	vb->hctx[index] = hctx;
	return 0;
}

/*
 * A request the device has held for longer than the timeout (the queue's
 * io_timeout). What the device returned meanwhile is completed first: a lost
 * interrupt is no reason to give up. Then vbb_timed_out() decides: a device
 * that is gone (or any, in the give_up_on_timeout mode) is given up, and
 * vbb_kill() fails this request and every other; a device still there is
 * notified again and the request waited for.
 */
static enum blk_eh_timer_return vbb_mq_timeout(struct request *req)
{
	struct vbb_dev *vb = req->q->queuedata;
	struct vbb_vq *q = vbb_hctx_vq(req->mq_hctx);
	struct vbb_mq_req *r = blk_mq_rq_to_pdu(req);

	vbb_mq_done(q->vq);
	if (blk_mq_rq_state(req) != MQ_RQ_IN_FLIGHT)
		return BLK_EH_DONE;
	/* a faked timeout: the device answered, the request ends with it */
	if (r->faked) {
		vbb_mq_complete(req);
		return BLK_EH_DONE;
	}
	if (!vb->timeout)
		return BLK_EH_RESET_TIMER;	/* io_timeout=0: wait */
	return vbb_timed_out(vb) ? BLK_EH_DONE : BLK_EH_RESET_TIMER;
}

/*
 * vbb_kill(), with vdev_mutex held, the device broken and reset: take every
 * request the rings hold.
 */
struct vbb_mq_req *vbb_mq_take_all(struct vbb_dev *vb)
{
	struct vbb_mq_req *chain = NULL, *r;
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++) {
		struct vbb_vq *q = &vb->vqs[i];

		spin_lock_irq(&q->lock);
		while ((r = virtqueue_detach_unused_buf(q->vq))) {
			r->next = chain;
			chain = r;
		}
		spin_unlock_irq(&q->lock);
	}
	return chain;
}

/* Fail what vbb_mq_take_all() took; what waits to be issued fails next. */
void vbb_mq_fail_all(struct vbb_dev *vb, struct vbb_mq_req *chain)
{
	struct vbb_mq_req *r;

	while ((r = chain)) {
		chain = r->next;
		r->result = BLK_STS_IOERR;
		blk_mq_complete_request(blk_mq_rq_from_pdu(r));
	}
	blk_mq_start_stopped_hw_queues(vb->disk->queue, true);
}

static const struct blk_mq_ops vbb_mq_ops = {
	.queue_rq	= vbb_queue_rq,
	.queue_rqs	= vbb_queue_rqs,
	.commit_rqs	= vbb_commit_rqs,
	.complete	= vbb_mq_complete,
	.map_queues	= vbb_map_queues,
	.poll		= vbb_poll,
	.timeout	= vbb_mq_timeout,
	.init_hctx	= vbb_init_hctx,
};

struct gendisk *vbb_mq_create_disk(struct vbb_dev *vb,
				   struct queue_limits *lim)
{
	struct blk_mq_tag_set *set = &vb->tag_set;
	unsigned int depth = vbb_queue_depth, ring = vbb_ring_size(vb);
	struct gendisk *disk;
	int err;

	if (!depth) {
		depth = ring;
		/* without indirect descriptors a request takes two or more */
		if (!virtio_has_feature(vb->vdev, VIRTIO_RING_F_INDIRECT_DESC))
			depth /= 2;
	} else if (depth > ring) {
		/* more tags than ring entries would only wait for the ring */
		dev_info(&vb->vdev->dev,
			 "queue_depth %u capped at the ring size %u\n",
			 depth, ring);
		depth = ring;
	}
	depth = max(depth, 1U);

	memset(set, 0, sizeof(*set));
	set->ops = &vbb_mq_ops;
	set->queue_depth = depth;
	set->numa_node = NUMA_NO_NODE;
	set->cmd_size = sizeof(struct vbb_mq_req) +
		sizeof(struct scatterlist) * VBB_MQ_INLINE_SG;
	set->driver_data = vb;
	/* 0: blk-mq's default; vbb_mq_timeout() then waits for ever */
	set->timeout = vb->timeout;
	set->nr_hw_queues = vb->num_vqs;
	set->nr_maps = vb->io_queues[HCTX_TYPE_POLL] ? HCTX_MAX_TYPES : 1;

	vb->hctx = kcalloc(vb->num_vqs, sizeof(*vb->hctx), GFP_KERNEL);
	if (!vb->hctx)
		return ERR_PTR(-ENOMEM);
	err = blk_mq_alloc_tag_set(set);
	if (err)
		return ERR_PTR(err);

	disk = vbb_alloc_mq_disk(set, lim, vbb_disk_features(vb), vb);
	if (IS_ERR(disk)) {
		blk_mq_free_tag_set(set);
		set->ops = NULL;
	}
	return disk;
}

void vbb_mq_destroy(struct vbb_dev *vb)
{
	if (vb->tag_set.ops) {
		blk_mq_free_tag_set(&vb->tag_set);
		vb->tag_set.ops = NULL;
	}
}

int vbb_mq_get_id(struct vbb_dev *vb, char *buf)
{
	struct request_queue *q = vb->disk->queue;
	struct request *req;
	blk_status_t st;
	int err;

	req = blk_mq_alloc_request(q, REQ_OP_DRV_IN, 0);
	if (IS_ERR(req))
		return PTR_ERR(req);
	err = blk_rq_map_kern(req, buf, VIRTIO_BLK_ID_BYTES, GFP_KERNEL);
	if (err)
		goto out;
	/* the status of vbb_mq_complete(): used length and status byte */
	st = blk_execute_rq(req, false);
	err = blk_status_to_errno(st);
out:
	blk_mq_free_request(req);
	return err;
}
