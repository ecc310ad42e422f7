// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_blk_bio: the bio path (use_bio=Y).
 *
 * ->submit_bio turns each bio into one virtio-blk request on the virtqueue
 * of the submitting CPU. While the task holds a plug the kick is deferred to
 * the plug's unplug callback, so a batch of bios costs one notification.
 * Submitters that find a ring full wait for space in arrival order, and a new
 * submitter queues behind them.
 *
 * With a write-back cache, REQ_PREFLUSH and REQ_FUA are emulated with
 * VIRTIO_BLK_T_FLUSH: a preflush completes before the data is issued, and a
 * FUA write completes only after a flush issued behind it has completed. The
 * device has one flush request: everything that needs a flush while one is
 * in flight waits for the next, which covers them all. A PREFLUSH/FUA write
 * that is split is flushed once, before its first part and after its last.
 * The stages after a flush or a write are issued from the completion; if the
 * ring is full then, they wait on a per-queue deferred list that the next
 * completion drains before it wakes a waiting submitter.
 */
#include <linux/bio.h>
#include <linux/completion.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "vbb.h"

enum vbb_stage {
	VBB_STAGE_DATA,		/* read/write/discard/write zeroes on a ring */
	VBB_STAGE_PREFLUSH,	/* waiting for a flush before the data */
	VBB_STAGE_POSTFLUSH,	/* waiting for a flush after a FUA write */
	VBB_STAGE_FLUSH,	/* the device's flush request (vb->flush_br) */
	VBB_STAGE_GET_ID,	/* internal: device serial */
};

struct vbb_breq {
	struct virtio_blk_outhdr out_hdr;
	u8 status;
	u8 stage;
	/* bio_start_io_acct() done, at the first add of the data */
	bool acct;
	struct vbb_breq *next;
	/* on vbb_vq.busy while the device holds it, added at issued */
	struct list_head busy;
	unsigned long issued;
	struct bio *bio;
	unsigned long start;
	/* waiting for a flush */
	struct vbb_fwait fw;
	/* GET_ID */
	void *buf;
	struct completion *wait;
	blk_status_t result;
	struct virtio_blk_discard_write_zeroes range;
	struct scatterlist sg[VBB_BIO_MAX_SEGS];
};

/*
 * Request contexts a queue keeps when its completions retire them, for the
 * next bios submitted on its CPUs: a context is 2 KiB, and the slab (which
 * zeroes it on Debian's kernels) cost more per I/O than the rest of the
 * driver's own submission.  Beyond this many per queue they go back to
 * the mempool, and so do all while the mempool's reserve is short (a
 * submitter may be waiting for it).  Emptied when the queue is drained.
 * At most 128 KiB per queue, in the range of what blk-mq preallocates for
 * a hardware queue of the request path.
 */
#define VBB_SPARE_MAX	64

/* What one pass over a queue's completions retired (vbb_bio_process()). */
struct vbb_reaped {
	struct vbb_breq *spare;
	/* references on vb->ref of the finished bios, put after the pass */
	unsigned int refs;
};

/*
 * A PREFLUSH and/or FUA write that bio_split_to_limits() split: its flags
 * are taken off it and off its parts, which go to the device as plain
 * writes, after one flush for the whole bio (PREFLUSH) and with one flush
 * after the last part has completed (FUA). Its completion is ours until then
 * (bi_end_io is vbb_split_end()): the block layer calls it once every part
 * has completed.
 */
struct vbb_split {
	struct vbb_fwait fw;
	struct vbb_dev *vb;
	struct bio *bio;
	bio_end_io_t *end_io;
	void *private;
	blk_opf_t flags;
	spinlock_t lock;
	/* the preflush is done (or none is needed), with pre_status */
	bool preflushed;
	blk_status_t pre_status;
	/* parts waiting for the preflush, in arrival order */
	struct vbb_breq *waiting;
	struct vbb_breq **waiting_tail;
};

/* A submitter waiting for ring space (vbb_vq.waiters). */
struct vbb_waiter {
	struct list_head node;
	struct task_struct *task;
};

static struct kmem_cache *vbb_breq_cache;

int vbb_bio_cache_init(void)
{
	vbb_breq_cache = kmem_cache_create("virtio_blk_bio_req",
					   sizeof(struct vbb_breq), 0, 0,
					   NULL);
	return vbb_breq_cache ? 0 : -ENOMEM;
}

void vbb_bio_cache_exit(void)
{
	kmem_cache_destroy(vbb_breq_cache);
}

/*
 * The last reference dropped after vbb_bio_drain() killed the count: the
 * drain's wait ends. Nothing touches vb after the complete(): the waiter may
 * free it as soon as it returns.
 */
static void vbb_ref_release(struct percpu_ref *ref)
{
	struct vbb_dev *vb = container_of(ref, struct vbb_dev, ref);

	complete(&vb->drained);
}

void vbb_bio_set_state(struct vbb_dev *vb, enum vbb_state state)
{
	unsigned long flags;

	spin_lock_irqsave(&vb->state_lock, flags);
	vb->state = state;
	spin_unlock_irqrestore(&vb->state_lock, flags);
	wake_up_all(&vb->state_wq);
}

static enum vbb_state vbb_bio_state(struct vbb_dev *vb)
{
	unsigned long flags;
	enum vbb_state state;

	spin_lock_irqsave(&vb->state_lock, flags);
	state = vb->state;
	spin_unlock_irqrestore(&vb->state_lock, flags);
	return state;
}

/*
 * Take a reference for a new bio or GET_ID: the way past ->freeze, which
 * kills the count and takes the rings away. While suspended, a submitter
 * waits for ->restore (or fails with -EAGAIN if it may not sleep); once the
 * device is removed or could not be restored, it fails with -EIO. The state
 * is read under its lock only when the count is not live: ->freeze sets
 * VBB_SUSPENDED before it kills the count, ->restore revives the count
 * before it sets VBB_LIVE.
 */
static int vbb_enter(struct vbb_dev *vb, bool nowait)
{
	for (;;) {
		if (percpu_ref_tryget_live(&vb->ref))
			return 0;
		switch (vbb_bio_state(vb)) {
		case VBB_LIVE:
			/* a given-up device's count stays dead: never spin */
			if (READ_ONCE(vb->killed))
				return -EIO;
			continue;	/* restored meanwhile */
		case VBB_SUSPENDED:
			break;
		default:
			return -EIO;
		}
		if (nowait)
			return -EAGAIN;
		wait_event(vb->state_wq,
			   READ_ONCE(vb->state) != VBB_SUSPENDED);
	}
}

static struct vbb_vq *vbb_cpu_vq(struct vbb_dev *vb)
{
	return &vb->vqs[vb->cpu_vq[raw_smp_processor_id()]];
}

/* Map the bio's data into br->sg; returns the entry count or -EIO. */
static int vbb_map_bio(struct vbb_dev *vb, struct vbb_breq *br,
		       struct bio *bio)
{
	unsigned int max_seg = queue_max_segment_size(vb->disk->queue);
	struct bvec_iter iter;
	struct bio_vec bv;
	int n = 0, i = 0;

	/* max_seg may be UINT_MAX: no DIV_ROUND_UP */
	bio_for_each_bvec(bv, bio, iter)
		if (bv.bv_len)
			n += (bv.bv_len - 1) / max_seg + 1;
	if (n > VBB_BIO_MAX_SEGS)
		return -EIO;
	if (!n)
		return 0;

	sg_init_table(br->sg, n);
	bio_for_each_bvec(bv, bio, iter) {
		unsigned int off = bv.bv_offset, left = bv.bv_len;

		while (left) {
			unsigned int len = min(left, max_seg);

			sg_set_page(&br->sg[i++], bv.bv_page + (off >> PAGE_SHIFT),
				    len, off & ~PAGE_MASK);
			off += len;
			left -= len;
		}
	}
	return n;
}

/* Fill the header and the scatterlists of @br's current stage. */
static int vbb_prep(struct vbb_dev *vb, struct vbb_breq *br,
		    struct scatterlist *hdr, struct scatterlist *status,
		    struct scatterlist **sgs, unsigned int *out,
		    unsigned int *in)
{
	struct virtio_device *vdev = vb->vdev;
	struct bio *bio = br->bio;
	bool write = false;
	u64 sector = 0;
	int n = 0;
	u32 type;

	*out = 0;
	*in = 0;
	sg_init_one(hdr, &br->out_hdr, sizeof(br->out_hdr));
	sgs[(*out)++] = hdr;

	switch (br->stage) {
	case VBB_STAGE_FLUSH:
		type = VIRTIO_BLK_T_FLUSH;
		break;
	case VBB_STAGE_GET_ID:
		type = VIRTIO_BLK_T_GET_ID;
		sg_init_one(&br->sg[0], br->buf, VIRTIO_BLK_ID_BYTES);
		sgs[(*in)++ + *out] = &br->sg[0];
		break;
	case VBB_STAGE_DATA:
		switch (bio_op(bio)) {
		case REQ_OP_READ:
			type = VIRTIO_BLK_T_IN;
			sector = bio->bi_iter.bi_sector;
			n = vbb_map_bio(vb, br, bio);
			break;
		case REQ_OP_WRITE:
			type = VIRTIO_BLK_T_OUT;
			sector = bio->bi_iter.bi_sector;
			write = true;
			n = vbb_map_bio(vb, br, bio);
			break;
		case REQ_OP_DISCARD:
		case REQ_OP_WRITE_ZEROES:
			/*
			 * The range is in the segment; the spec has the
			 * header's sector 0 for these types.
			 */
			if (bio_op(bio) == REQ_OP_DISCARD) {
				type = VIRTIO_BLK_T_DISCARD;
				br->range.flags = 0;
			} else {
				type = VIRTIO_BLK_T_WRITE_ZEROES;
				br->range.flags = cpu_to_le32(bio->bi_opf & REQ_NOUNMAP ?
					0 : VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
			}
			br->range.sector = cpu_to_le64(bio->bi_iter.bi_sector);
			br->range.num_sectors = cpu_to_le32(bio_sectors(bio));
			sg_init_one(&br->sg[0], &br->range, sizeof(br->range));
			sgs[(*out)++] = &br->sg[0];
			break;
		default:
			return -EOPNOTSUPP;
		}
		if (n < 0)
			return n;
		if (n && write)
			sgs[(*out)++] = br->sg;
		else if (n)
			sgs[(*in)++ + *out] = br->sg;
		break;
	default:
		return -EINVAL;	/* a stage that waits for a flush */
	}

	br->out_hdr.type = cpu_to_virtio32(vdev, type);
	br->out_hdr.sector = cpu_to_virtio64(vdev, sector);
	br->out_hdr.ioprio = cpu_to_virtio32(vdev, bio ? bio->bi_ioprio : 0);
	br->status = VIRTIO_BLK_S_IOERR;
	sg_init_one(status, &br->status, sizeof(br->status));
	sgs[*out + (*in)++] = status;
	return 0;
}

/*
 * Under q->lock: put @br's stage on the ring. The data of a bio is accounted
 * from its first add on (the block layer's I/O statistics then count the
 * time the device holds it, not the time spent waiting for ring space).
 */
static int vbb_add(struct vbb_dev *vb, struct vbb_vq *q, struct vbb_breq *br)
{
	struct scatterlist hdr, status, *sgs[3];
	unsigned int out, in;
	int err;

	err = vbb_prep(vb, br, &hdr, &status, sgs, &out, &in);
	if (err)
		return err;
	err = virtqueue_add_sgs(q->vq, sgs, out, in, br, GFP_ATOMIC);
	if (err)
		return err;
	q->added++;
	br->issued = jiffies;
	/* the oldest request of a queue is at its head: arm for it */
	if (list_empty(&q->busy) && vb->timeout)
		queue_delayed_work(vbb_wq, &vb->watchdog, vb->timeout);
	list_add_tail(&br->busy, &q->busy);
	if (br->stage == VBB_STAGE_DATA) {
		if (!br->acct) {
			br->start = bio_start_io_acct(br->bio);
			br->acct = true;
		}
		/* bio_poll() polls the queue this names */
		if (br->bio->bi_opf & REQ_POLLED)
			WRITE_ONCE(br->bio->bi_cookie, q - vb->vqs);
	}
	return 0;
}

/*
 * -ENOSPC from a ring that holds nothing: with indirect descriptors this is
 * an indirect table that could not be allocated (the request then needs as
 * many ring entries as it has segments); it fits once memory is found, but
 * no completion will come to say so: retry on a timer. Without indirect
 * descriptors, a request too large for the ring never fits.
 */
static bool vbb_never_fits(struct vbb_dev *vb, struct vbb_vq *q)
{
	return vbb_ring_empty(q) &&
	       !virtio_has_feature(vb->vdev, VIRTIO_RING_F_INDIRECT_DESC);
}

static bool vbb_kick_prepare(struct vbb_vq *q)
{
	bool kick;

	q->kick_pending = false;
	q->kick_tries++;
	kick = virtqueue_kick_prepare(q->vq);
	if (kick)
		q->notifies++;
	return kick;
}

/* Under q->lock: let the first waiting submitter try (it wakes the next). */
static void vbb_wake_first(struct vbb_vq *q)
{
	struct vbb_waiter *w;

	w = list_first_entry_or_null(&q->waiters, struct vbb_waiter, node);
	if (w)
		wake_up_process(w->task);
}

/*
 * Plug callbacks come from the device's own set (vb->plug_cbs, the bits
 * of vb->plug_map say which are in use), one per plug that queued on the
 * device and has not been flushed yet: since 6.12 every bio is submitted
 * under a plug of its own, and taking the callback from the slab
 * (blk_check_plugged()) was an allocation and a free per bio.
 */
static struct blk_plug_cb *vbb_plug_cb_get(struct vbb_dev *vb)
{
	int nr = sbitmap_get(&vb->plug_map);

	return nr < 0 ? NULL : &vb->plug_cbs[nr];
}

static void vbb_plug_cb_put(struct vbb_dev *vb, struct blk_plug_cb *cb)
{
	/* our reads of *cb are done before another plug may take it */
	smp_mb__before_atomic();
	sbitmap_put(&vb->plug_map, cb - vb->plug_cbs);
}

static void vbb_unplug(struct blk_plug_cb *cb, bool from_schedule)
{
	struct vbb_dev *vb = cb->data;
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++) {
		struct vbb_vq *q = &vb->vqs[i];
		unsigned long flags;
		bool kick = false;

		if (!READ_ONCE(q->kick_pending))
			continue;
		spin_lock_irqsave(&q->lock, flags);
		if (q->kick_pending)
			kick = vbb_kick_prepare(q);
		spin_unlock_irqrestore(&q->lock, flags);
		vbb_notify_prepared(q, kick);
	}
	vbb_plug_cb_put(vb, cb);
	/* the plug held a reference so that removal waits for us */
	percpu_ref_put(&vb->ref);
}

/*
 * True if the caller holds a plug and the kick can wait for the unplug:
 * the plug has our callback, or now gets one.  With every callback of the
 * device in use the caller kicks at once.
 */
static bool vbb_plugged(struct vbb_dev *vb)
{
	struct blk_plug *plug = current->plug;
	struct blk_plug_cb *cb;

	if (!plug)
		return false;
	list_for_each_entry(cb, &plug->cb_list, list)
		if (cb->callback == vbb_unplug && cb->data == vb)
			return true;
	cb = vbb_plug_cb_get(vb);
	if (!cb)
		return false;
	cb->callback = vbb_unplug;
	cb->data = vb;
	/* our caller holds a reference: the count is not zero */
	percpu_ref_get(&vb->ref);
	list_add(&cb->list, &plug->cb_list);
	return true;
}

static void vbb_flush_done(struct vbb_dev *vb, blk_status_t st);

/*
 * The end of a request: a bio's (the I/O counted as completed only if it
 * reached the ring), GET_ID's (its caller waits), the flush's (its waiters).
 */
static void __vbb_finish(struct vbb_dev *vb, struct vbb_breq *br,
			 blk_status_t st, struct vbb_reaped *r)
{
	mempool_t *pool = vb->breq_pool;
	struct bio *bio = br->bio;

	switch (br->stage) {
	case VBB_STAGE_GET_ID:
		br->result = st;
		complete(br->wait);
		return;
	case VBB_STAGE_FLUSH:
		vbb_flush_done(vb, st);
		return;
	default:
		break;
	}
	if (st)
		bio->bi_status = st;
	if (br->acct)
		bio_end_io_acct(bio, br->start);
	if (!r) {
		mempool_free(br, pool);
	} else if (READ_ONCE(pool->curr_nr) < pool->min_nr) {
		/* the reserve first: mempool_alloc() waits on it, not on ours */
		mempool_free(br, pool);
		r->refs++;
	} else {
		/* the pass keeps it, and our reference until it has */
		br->next = r->spare;
		r->spare = br;
		r->refs++;
	}
	/* the last part of a split write may end in vbb_split_end() */
	bio_endio(bio);
	if (!r)
		percpu_ref_put(&vb->ref);
}

static void vbb_finish(struct vbb_dev *vb, struct vbb_breq *br,
		       blk_status_t st)
{
	__vbb_finish(vb, br, st, NULL);
}

/* A context for a new bio: one the CPU's queue kept, or the mempool's. */
static struct vbb_breq *vbb_breq_get(struct vbb_dev *vb, bool nowait)
{
	struct vbb_vq *q = vbb_cpu_vq(vb);
	struct vbb_breq *br = NULL;
	unsigned long flags;

	if (READ_ONCE(q->nr_spare)) {
		spin_lock_irqsave(&q->lock, flags);
		br = q->spare;
		if (br) {
			q->spare = br->next;
			WRITE_ONCE(q->nr_spare, q->nr_spare - 1);
		}
		spin_unlock_irqrestore(&q->lock, flags);
	}
	if (!br)
		br = mempool_alloc(vb->breq_pool, nowait ? GFP_NOWAIT : GFP_NOIO);
	return br;
}

/*
 * Under q->lock: keep what a pass over @q retired, up to VBB_SPARE_MAX;
 * what is left in @r goes back to the mempool.
 */
static void vbb_keep_spares(struct vbb_vq *q, struct vbb_reaped *r)
{
	struct vbb_breq *br;

	while (q->nr_spare < VBB_SPARE_MAX && (br = r->spare)) {
		r->spare = br->next;
		br->next = q->spare;
		q->spare = br;
		WRITE_ONCE(q->nr_spare, q->nr_spare + 1);
	}
}

/* @q is drained, or never ran: its spares go back to the mempool. */
static void vbb_drop_spares(struct vbb_dev *vb, struct vbb_vq *q)
{
	struct vbb_breq *br, *list;
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	list = q->spare;
	q->spare = NULL;
	WRITE_ONCE(q->nr_spare, 0);
	spin_unlock_irqrestore(&q->lock, flags);
	while ((br = list)) {
		list = br->next;
		mempool_free(br, vb->breq_pool);
	}
}

/* Under q->lock: @br goes behind the deferred stages of @q. */
static void vbb_defer(struct vbb_vq *q, struct vbb_breq *br)
{
	br->next = NULL;
	if (q->deferred_tail)
		q->deferred_tail->next = br;
	else
		q->deferred_head = br;
	q->deferred_tail = br;
	q->full++;
}

/*
 * Queue a stage from completion context (or on behalf of a bio that may not
 * sleep): never sleeps; if the ring is full, or other stages already wait,
 * the request joins the deferred list.
 */
static void vbb_queue_atomic(struct vbb_dev *vb, struct vbb_vq *q,
			     struct vbb_breq *br)
{
	unsigned long flags;
	bool kick = false, retry = false;
	int err = -ENOSPC;

	spin_lock_irqsave(&q->lock, flags);
	/* keep the order of earlier deferred stages */
	if (!q->deferred_head) {
		err = vbb_add(vb, q, br);
		if (err == -ENOSPC && vbb_never_fits(vb, q))
			err = -EIO;
	}
	if (err == -ENOSPC) {
		vbb_defer(q, br);
		retry = vbb_ring_empty(q);
		err = 0;
	} else if (!err) {
		kick = vbb_kick_prepare(q);
	}
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_notify_prepared(q, kick);
	if (retry)
		queue_delayed_work(vbb_wq, &vb->retry, 1);
	if (err)
		vbb_finish(vb, br, BLK_STS_IOERR);
}

/* Move deferred stages onto the ring while it has room. */
static void vbb_drain_deferred(struct vbb_dev *vb, struct vbb_vq *q)
{
	struct vbb_breq *failed = NULL, *br;
	unsigned long flags;
	bool kick = false, added = false, retry = false;
	int err;

	spin_lock_irqsave(&q->lock, flags);
	while ((br = q->deferred_head)) {
		err = vbb_add(vb, q, br);
		if (err == -ENOSPC && !vbb_never_fits(vb, q)) {
			retry = vbb_ring_empty(q);
			break;
		}
		q->deferred_head = br->next;
		if (!q->deferred_head)
			q->deferred_tail = NULL;
		if (err) {
			br->next = failed;
			failed = br;
		} else {
			added = true;
		}
	}
	if (added)
		kick = vbb_kick_prepare(q);
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_notify_prepared(q, kick);
	if (retry)
		queue_delayed_work(vbb_wq, &vb->retry, 1);

	while ((br = failed)) {
		failed = br->next;
		vbb_finish(vb, br, BLK_STS_IOERR);
	}
}

/*
 * The device's flush request is shared: @fw waits for a flush that is
 * issued after this call. If none is in flight, one is issued now for it;
 * otherwise it waits for the next, which is issued when the one in flight
 * completes and covers everything that waits by then. A flush covers the
 * writes completed before it was issued, so every waiter gets what it needs
 * (PREFLUSH: the writes completed before its bio was submitted; FUA: its own
 * write), at the cost of one flush per round instead of one per waiter.
 * Never sleeps.
 */
static void vbb_flush_join(struct vbb_dev *vb, struct vbb_fwait *fw,
			   void (*done)(struct vbb_dev *vb,
					struct vbb_fwait *fw,
					blk_status_t st))
{
	unsigned long flags;
	bool issue = false;

	fw->done = done;
	fw->next = NULL;
	spin_lock_irqsave(&vb->flush_lock, flags);
	*vb->flush_pending_tail = fw;
	vb->flush_pending_tail = &fw->next;
	if (!vb->flush_running) {
		vb->flush_running = true;
		vb->flush_covered = vb->flush_pending;
		vb->flush_pending = NULL;
		vb->flush_pending_tail = &vb->flush_pending;
		issue = true;
	}
	spin_unlock_irqrestore(&vb->flush_lock, flags);
	if (issue) {
		atomic64_inc(&vb->flushes);
		vb->flush_br->stage = VBB_STAGE_FLUSH;
		vbb_queue_atomic(vb, vbb_cpu_vq(vb), vb->flush_br);
	}
}

/* The flush in flight ended with @st: its waiters go on, the next starts. */
static void vbb_flush_done(struct vbb_dev *vb, blk_status_t st)
{
	struct vbb_fwait *covered, *fw;
	unsigned long flags;
	bool again;

	spin_lock_irqsave(&vb->flush_lock, flags);
	covered = vb->flush_covered;
	again = vb->flush_pending;
	vb->flush_covered = vb->flush_pending;
	vb->flush_pending = NULL;
	vb->flush_pending_tail = &vb->flush_pending;
	vb->flush_running = again;
	spin_unlock_irqrestore(&vb->flush_lock, flags);
	if (again) {
		atomic64_inc(&vb->flushes);
		vbb_queue_atomic(vb, vbb_cpu_vq(vb), vb->flush_br);
	}
	while ((fw = covered)) {
		covered = fw->next;
		fw->done(vb, fw, st);
	}
}

/* The flush ahead of a bio's data: then the data goes to a ring. */
static void vbb_preflushed(struct vbb_dev *vb, struct vbb_fwait *fw,
			   blk_status_t st)
{
	struct vbb_breq *br = container_of(fw, struct vbb_breq, fw);

	if (st || !bio_sectors(br->bio)) {
		vbb_finish(vb, br, st);	/* failed, or an empty flush */
		return;
	}
	br->stage = VBB_STAGE_DATA;
	vbb_queue_atomic(vb, vbb_cpu_vq(vb), br);
}

/* The flush behind a FUA write: the bio is done. */
static void vbb_postflushed(struct vbb_dev *vb, struct vbb_fwait *fw,
			    blk_status_t st)
{
	vbb_finish(vb, container_of(fw, struct vbb_breq, fw), st);
}

/* A data stage has completed: a FUA write flushes, the rest finishes. */
static void vbb_stage_done(struct vbb_dev *vb, struct vbb_breq *br,
			   struct vbb_reaped *r)
{
	blk_status_t st = vbb_status_to_blk(br->status);

	if (br->stage == VBB_STAGE_DATA && !st &&
	    (br->bio->bi_opf & REQ_FUA)) {
		atomic64_inc(&vb->fua_flushes);
		br->stage = VBB_STAGE_POSTFLUSH;
		vbb_flush_join(vb, &br->fw, vbb_postflushed);
		return;
	}
	__vbb_finish(vb, br, st, r);
}

/* Under q->lock: take what the device has returned, in order. */
static struct vbb_breq *vbb_bio_collect(struct vbb_vq *q, int *count)
{
	struct vbb_breq *head = NULL, **tail = &head, *br;
	unsigned int len;

	while ((br = virtqueue_get_buf(q->vq, &len))) {
		list_del(&br->busy);
		br->next = NULL;
		*tail = br;
		tail = &br->next;
		(*count)++;
	}
	return head;
}

/*
 * Finish or continue what vbb_bio_collect() took, then refill the ring:
 * deferred stages first, then the first waiting submitter.
 */
static void vbb_bio_process(struct vbb_dev *vb, struct vbb_vq *q,
			    struct vbb_breq *head)
{
	struct vbb_reaped r = { };
	struct vbb_breq *br;
	unsigned long flags;

	if (!head)
		return;
	while ((br = head)) {
		head = br->next;
		vbb_stage_done(vb, br, &r);
	}
	if (READ_ONCE(q->deferred_head))
		vbb_drain_deferred(vb, q);
	spin_lock_irqsave(&q->lock, flags);
	vbb_keep_spares(q, &r);
	vbb_wake_first(q);
	spin_unlock_irqrestore(&q->lock, flags);
	while ((br = r.spare)) {
		r.spare = br->next;
		mempool_free(br, vb->breq_pool);
	}
	/* the last one lets a drain go on: q is not touched after it */
	if (r.refs)
		percpu_ref_put_many(&vb->ref, r.refs);
}

void vbb_bio_done(struct virtqueue *vq)
{
	struct vbb_dev *vb = vq->vdev->priv;
	struct vbb_vq *q = &vb->vqs[vq->index];
	struct vbb_breq *head = NULL, **tail = &head;
	unsigned long flags;
	unsigned int seen;
	int n = 0;

	spin_lock_irqsave(&q->lock, flags);
	do {
		virtqueue_disable_cb(vq);
		*tail = vbb_bio_collect(q, &n);
		while (*tail)
			tail = &(*tail)->next;
		seen = virtqueue_enable_cb_prepare(vq);
	} while (unlikely(virtqueue_poll(vq, seen)));
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_bio_process(vb, q, head);
}

/* Reap @q outside its interrupt (poll, watchdog); the count taken. */
static int vbb_bio_reap(struct vbb_dev *vb, struct vbb_vq *q)
{
	struct vbb_breq *done;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&q->lock, flags);
	done = vbb_bio_collect(q, &n);
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_bio_process(vb, q, done);
	return n;
}

/*
 * ->poll_bio: a REQ_POLLED bio's completion is looked for on the queue it
 * went to (bi_cookie, set when its data was added); the interrupt may take
 * it first, which is fine.
 */
int vbb_bio_poll(struct bio *bio, struct io_comp_batch *iob,
		 unsigned int flags)
{
	struct vbb_dev *vb = bio->bi_bdev->bd_disk->private_data;
	unsigned int i = READ_ONCE(bio->bi_cookie);
	int n = 0;

	if (!percpu_ref_tryget_live(&vb->ref))
		return 0;
	if (i < vb->num_vqs && !READ_ONCE(vb->killed))
		n = vbb_bio_reap(vb, &vb->vqs[i]);
	percpu_ref_put(&vb->ref);
	return n;
}

/*
 * The device holds a request for longer than the timeout. What it returned
 * meanwhile is completed first (a lost interrupt is no reason to give up);
 * then vbb_timed_out() gives up a device that is gone (or any, in the
 * give_up_on_timeout mode), or notifies it again, and the watchdog looks
 * again one timeout later.
 */
static void vbb_watchdog(struct work_struct *work)
{
	struct vbb_dev *vb = container_of(to_delayed_work(work),
					  struct vbb_dev, watchdog);
	unsigned long oldest = 0;
	bool busy = false;
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++) {
		struct vbb_vq *q = &vb->vqs[i];
		struct vbb_breq *br;
		unsigned long flags;

		vbb_bio_reap(vb, q);
		spin_lock_irqsave(&q->lock, flags);
		br = list_first_entry_or_null(&q->busy, struct vbb_breq, busy);
		if (br && (!busy || time_before(br->issued, oldest))) {
			oldest = br->issued;
			busy = true;
		}
		spin_unlock_irqrestore(&q->lock, flags);
	}
	if (!busy)
		return;
	if (time_after_eq(jiffies, oldest + vb->timeout)) {
		if (!vbb_timed_out(vb))
			queue_delayed_work(vbb_wq, &vb->watchdog, vb->timeout);
		return;
	}
	queue_delayed_work(vbb_wq, &vb->watchdog,
			   oldest + vb->timeout - jiffies);
}

/*
 * Deferred stages on a ring that holds nothing (an indirect table could not
 * be allocated): no completion comes to add them, this does.
 */
static void vbb_retry(struct work_struct *work)
{
	struct vbb_dev *vb = container_of(to_delayed_work(work),
					  struct vbb_dev, retry);
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++) {
		struct vbb_vq *q = &vb->vqs[i];
		unsigned long flags;

		if (READ_ONCE(q->deferred_head))
			vbb_drain_deferred(vb, q);
		spin_lock_irqsave(&q->lock, flags);
		vbb_wake_first(q);
		spin_unlock_irqrestore(&q->lock, flags);
	}
}

/*
 * vbb_kill(), with vdev_mutex held, the device broken and reset: take every
 * request from the rings and the deferred lists, wake every submitter that
 * waits for space (they see vb->killed and fail).
 */
struct vbb_breq *vbb_bio_take_all(struct vbb_dev *vb)
{
	struct vbb_breq *chain = NULL, *br;
	struct vbb_waiter *w;
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++) {
		struct vbb_vq *q = &vb->vqs[i];

		spin_lock_irq(&q->lock);
		while ((br = virtqueue_detach_unused_buf(q->vq))) {
			list_del(&br->busy);
			br->next = chain;
			chain = br;
		}
		while ((br = q->deferred_head)) {
			q->deferred_head = br->next;
			br->next = chain;
			chain = br;
		}
		q->deferred_tail = NULL;
		list_for_each_entry(w, &q->waiters, node)
			wake_up_process(w->task);
		spin_unlock_irq(&q->lock);
	}
	return chain;
}

void vbb_bio_fail_all(struct vbb_dev *vb, struct vbb_breq *chain)
{
	struct vbb_breq *br;

	while ((br = chain)) {
		chain = br->next;
		vbb_finish(vb, br, BLK_STS_IOERR);
	}
}

/*
 * First stage from ->submit_bio or GET_ID: sleeps for ring space unless
 * @nowait. Submitters that find no space wait in arrival order; only the
 * first of them tries to add, and a new submitter does not add while any
 * wait (nor while stages are deferred): it queues behind them. The first
 * one, once added, lets the next try. Returns 0, -EAGAIN (would block) or
 * another error.
 */
static int vbb_queue_first(struct vbb_dev *vb, struct vbb_breq *br,
			   bool nowait)
{
	struct vbb_vq *q = vbb_cpu_vq(vb);
	struct vbb_waiter w = { .task = current };
	bool kick = false, plugged, waiting = false, empty;
	unsigned long flags;
	int err;

	for (;;) {
		/*
		 * Asked on every try: sleeping below flushes the plug, and
		 * with it the callback that would have kicked for us.
		 */
		plugged = br->stage != VBB_STAGE_GET_ID && vbb_plugged(vb);
		spin_lock_irqsave(&q->lock, flags);
		if (READ_ONCE(vb->killed)) {
			err = -EIO;
			break;
		}
		err = -ENOSPC;
		if (!q->deferred_head &&
		    (waiting ? list_first_entry(&q->waiters, struct vbb_waiter,
						node) == &w :
			       list_empty(&q->waiters))) {
			err = vbb_add(vb, q, br);
			if (err == -ENOSPC && vbb_never_fits(vb, q))
				err = -EIO;
		}
		if (!err) {
			if (plugged)
				q->kick_pending = true;
			else
				kick = vbb_kick_prepare(q);
			break;
		}
		if (err != -ENOSPC)
			break;
		/* no room: make sure the device works on what is queued */
		q->full++;
		kick = vbb_kick_prepare(q);
		if (nowait) {
			err = -EAGAIN;
			break;
		}
		if (!waiting) {
			list_add_tail(&w.node, &q->waiters);
			waiting = true;
		}
		empty = vbb_ring_empty(q);
		set_current_state(TASK_UNINTERRUPTIBLE);
		spin_unlock_irqrestore(&q->lock, flags);
		vbb_notify_prepared(q, kick);
		kick = false;
		/* nothing in flight to wake us: an indirect table failed */
		if (empty)
			io_schedule_timeout(1);
		else
			io_schedule();
	}
	if (waiting) {
		list_del(&w.node);
		/* the next may fit too, or must see that the device is gone */
		vbb_wake_first(q);
	}
	spin_unlock_irqrestore(&q->lock, flags);
	vbb_notify_prepared(q, kick);
	return err;
}

static void vbb_split_finish(struct vbb_split *sp, blk_status_t st);

/* The preflush of a split write: its parts may go to the rings now. */
static void vbb_split_preflushed(struct vbb_dev *vb, struct vbb_fwait *fw,
				 blk_status_t st)
{
	struct vbb_split *sp = container_of(fw, struct vbb_split, fw);
	struct vbb_breq *br, *next;
	unsigned long flags;

	spin_lock_irqsave(&sp->lock, flags);
	sp->preflushed = true;
	sp->pre_status = st;
	br = sp->waiting;
	sp->waiting = NULL;
	sp->waiting_tail = &sp->waiting;
	spin_unlock_irqrestore(&sp->lock, flags);
	/* sp may be gone once its last part has completed */
	for (; br; br = next) {
		next = br->next;
		if (st) {
			vbb_finish(vb, br, st);
		} else {
			br->stage = VBB_STAGE_DATA;
			vbb_queue_atomic(vb, vbb_cpu_vq(vb), br);
		}
	}
}

/* The flush after the last part of a split FUA write. */
static void vbb_split_postflushed(struct vbb_dev *vb, struct vbb_fwait *fw,
				  blk_status_t st)
{
	vbb_split_finish(container_of(fw, struct vbb_split, fw), st);
}

/* bi_end_io of a split write: every part has completed. */
static void vbb_split_end(struct bio *bio)
{
	struct vbb_split *sp = bio->bi_private;

	if (!bio->bi_status && (sp->flags & REQ_FUA)) {
		atomic64_inc(&sp->vb->fua_flushes);
		/* sp->fw served the preflush, which is long done */
		vbb_flush_join(sp->vb, &sp->fw, vbb_split_postflushed);
		return;
	}
	vbb_split_finish(sp, BLK_STS_OK);
}

/* Give the bio its completion and flags back and complete it. */
static void vbb_split_finish(struct vbb_split *sp, blk_status_t st)
{
	struct vbb_dev *vb = sp->vb;
	struct bio *bio = sp->bio;

	bio->bi_end_io = sp->end_io;
	bio->bi_private = sp->private;
	bio->bi_opf |= sp->flags;
	if (st && !bio->bi_status)
		bio->bi_status = st;
	mempool_free(sp, vb->split_pool);
	bio_endio(bio);
	percpu_ref_put(&vb->ref);
}

static struct vbb_split *vbb_split_of(struct bio *bio)
{
	return bio->bi_end_io == vbb_split_end ? bio->bi_private : NULL;
}

/*
 * bio_split_to_limits() split @bio, a PREFLUSH/FUA write, and returned its
 * first part @part (@bio, the rest, is queued to come back here): take the
 * flags off both and the completion of @bio over, start the preflush.
 */
static struct vbb_split *vbb_split_start(struct vbb_dev *vb, struct bio *bio,
					 struct bio *part)
{
	struct vbb_split *sp = mempool_alloc(vb->split_pool, GFP_NOIO);

	sp->vb = vb;
	sp->bio = bio;
	sp->end_io = bio->bi_end_io;
	sp->private = bio->bi_private;
	sp->flags = bio->bi_opf & (REQ_PREFLUSH | REQ_FUA);
	spin_lock_init(&sp->lock);
	sp->waiting = NULL;
	sp->waiting_tail = &sp->waiting;
	sp->pre_status = BLK_STS_OK;
	sp->preflushed = !(sp->flags & REQ_PREFLUSH);
	bio->bi_opf &= ~(REQ_PREFLUSH | REQ_FUA);
	part->bi_opf &= ~(REQ_PREFLUSH | REQ_FUA);
	bio->bi_end_io = vbb_split_end;
	bio->bi_private = sp;
	/* our caller holds a reference; this one lasts until the end */
	percpu_ref_get(&vb->ref);
	if (!sp->preflushed) {
		atomic64_inc(&vb->preflushes);
		vbb_flush_join(vb, &sp->fw, vbb_split_preflushed);
	}
	return sp;
}

/*
 * May this part of a split write go to a ring now? If the preflush is not
 * done, it waits for it (and false is returned); @st says how it went.
 */
static bool vbb_split_ready(struct vbb_split *sp, struct vbb_breq *br,
			    blk_status_t *st)
{
	unsigned long flags;
	bool ready;

	spin_lock_irqsave(&sp->lock, flags);
	ready = sp->preflushed;
	if (ready) {
		*st = sp->pre_status;
	} else {
		br->next = NULL;
		*sp->waiting_tail = br;
		sp->waiting_tail = &br->next;
	}
	spin_unlock_irqrestore(&sp->lock, flags);
	return ready;
}

void vbb_bio_submit(struct bio *bio)
{
	struct vbb_dev *vb = bio->bi_bdev->bd_disk->private_data;
	struct bio *whole = bio;
	blk_status_t st = BLK_STS_OK;
	struct vbb_split *sp;
	struct vbb_breq *br;
	bool nowait;
	int err;

	bio = bio_split_to_limits(bio);
	if (!bio)
		return;
	nowait = bio->bi_opf & REQ_NOWAIT;
	/* completed by the interrupt or ->poll_bio, whichever comes first */
	if (bio->bi_opf & REQ_POLLED)
		vbb_bio_polled(bio);

	switch (bio_op(bio)) {
	case REQ_OP_READ:
	case REQ_OP_WRITE:
	case REQ_OP_DISCARD:
	case REQ_OP_WRITE_ZEROES:
		break;
	default:
		bio->bi_status = BLK_STS_NOTSUPP;
		bio_endio(bio);
		return;
	}

	/* a later part of a split write: the split keeps the device up */
	sp = vbb_split_of(whole);
	if (sp) {
		percpu_ref_get(&vb->ref);
	} else {
		err = vbb_enter(vb, nowait);
		if (err) {
			if (err == -EAGAIN)
				bio_wouldblock_error(bio);
			else
				bio_io_error(bio);
			return;
		}
	}
	if (unlikely(READ_ONCE(vb->killed))) {
		bio_io_error(bio);
		percpu_ref_put(&vb->ref);
		return;
	}
	if (!sp && bio != whole && op_is_write(bio_op(bio)) &&
	    (whole->bi_opf & (REQ_PREFLUSH | REQ_FUA)))
		sp = vbb_split_start(vb, whole, bio);

	br = vbb_breq_get(vb, nowait);
	if (!br) {
		bio_wouldblock_error(bio);
		percpu_ref_put(&vb->ref);
		return;
	}
	br->bio = bio;
	br->acct = false;
	br->wait = NULL;
	br->buf = NULL;
	if (bio->bi_opf & REQ_PREFLUSH) {
		atomic64_inc(&vb->preflushes);
		br->stage = VBB_STAGE_PREFLUSH;
		vbb_flush_join(vb, &br->fw, vbb_preflushed);
		return;
	}
	if (bio_op(bio) == REQ_OP_WRITE && !bio_sectors(bio)) {
		/* an empty write without a flush has nothing to do */
		mempool_free(br, vb->breq_pool);
		bio_endio(bio);
		percpu_ref_put(&vb->ref);
		return;
	}
	br->stage = VBB_STAGE_DATA;
	if (sp && !vbb_split_ready(sp, br, &st))
		return;	/* added when the preflush completes */
	if (st) {
		vbb_finish(vb, br, st);
		return;
	}

	err = vbb_queue_first(vb, br, nowait);
	if (!err)
		return;
	/* never reached the device: not accounted, ended here */
	mempool_free(br, vb->breq_pool);
	if (err == -EAGAIN) {
		bio_wouldblock_error(bio);
	} else {
		bio->bi_status = err == -EOPNOTSUPP ? BLK_STS_NOTSUPP :
			BLK_STS_IOERR;
		bio_endio(bio);
	}
	percpu_ref_put(&vb->ref);
}

int vbb_bio_get_id(struct vbb_dev *vb, char *buf)
{
	DECLARE_COMPLETION_ONSTACK(done);
	struct vbb_breq *br;
	int err;

	/* the rings may be gone (suspended, not restored): enter first */
	err = vbb_enter(vb, false);
	if (err)
		return err;
	if (READ_ONCE(vb->killed)) {
		err = -EIO;
		goto out;
	}
	br = kzalloc(sizeof(*br), GFP_KERNEL);
	if (!br) {
		err = -ENOMEM;
		goto out;
	}
	br->stage = VBB_STAGE_GET_ID;
	br->buf = buf;
	br->wait = &done;

	err = vbb_queue_first(vb, br, false);
	if (!err) {
		wait_for_completion(&done);
		err = blk_status_to_errno(br->result);
	}
	kfree(br);
out:
	percpu_ref_put(&vb->ref);
	return err;
}

struct gendisk *vbb_bio_create_disk(struct vbb_dev *vb,
				    struct queue_limits *lim)
{
	struct blk_mq_queue_map map = { };
	struct gendisk *disk;
	unsigned int cpu;

	vb->cpu_vq = kcalloc(nr_cpu_ids, sizeof(*vb->cpu_vq), GFP_KERNEL);
	if (!vb->cpu_vq)
		return ERR_PTR(-ENOMEM);
	/* the same CPU -> queue spread as the blk-mq path's default map */
	map.mq_map = vb->cpu_vq;
	map.nr_queues = vb->num_vqs;
	blk_mq_map_hw_queues(&map, &vb->vdev->dev, 0);
	for_each_possible_cpu(cpu)
		if (vb->cpu_vq[cpu] >= vb->num_vqs)
			vb->cpu_vq[cpu] = 0;

	init_completion(&vb->drained);
	INIT_DELAYED_WORK(&vb->watchdog, vbb_watchdog);
	INIT_DELAYED_WORK(&vb->retry, vbb_retry);
	spin_lock_init(&vb->state_lock);
	init_waitqueue_head(&vb->state_wq);
	vb->state = VBB_LIVE;
	spin_lock_init(&vb->flush_lock);
	vb->flush_pending_tail = &vb->flush_pending;
	/* ALLOW_REINIT: the per-CPU counters must survive a drain */
	if (percpu_ref_init(&vb->ref, vbb_ref_release, PERCPU_REF_ALLOW_REINIT,
			    GFP_KERNEL)) {
		kfree(vb->cpu_vq);
		vb->cpu_vq = NULL;
		return ERR_PTR(-ENOMEM);
	}
	vb->ref_live = true;
	vb->breq_pool = mempool_create_slab_pool(16, vbb_breq_cache);
	vb->split_pool = mempool_create_kmalloc_pool(4,
						     sizeof(struct vbb_split));
	vb->flush_br = kzalloc_obj(*vb->flush_br, GFP_KERNEL);
	/* two plugs in progress per CPU before one kicks without waiting */
	vb->nr_plug_cbs = 2 * nr_cpu_ids;
	vb->plug_cbs = kcalloc(vb->nr_plug_cbs, sizeof(*vb->plug_cbs),
			       GFP_KERNEL);
	if (vb->plug_cbs &&
	    !sbitmap_init_node(&vb->plug_map, vb->nr_plug_cbs, -1, GFP_KERNEL,
			       NUMA_NO_NODE, false, true))
		vb->plug_map_live = true;
	if (!vb->breq_pool || !vb->split_pool || !vb->flush_br ||
	    !vb->plug_map_live) {
		vbb_bio_destroy(vb);
		return ERR_PTR(-ENOMEM);
	}

	disk = vbb_alloc_bio_disk(lim, vbb_disk_features(vb), NUMA_NO_NODE);
	if (IS_ERR(disk))
		vbb_bio_destroy(vb);
	return disk;
}

/*
 * Wait until every bio, GET_ID and plug callback is done (->freeze, remove;
 * the state already keeps new ones out). The completion, not the count,
 * tells the waiter: the last put cannot touch vb after the waiter has seen
 * zero.
 */
void vbb_bio_drain(struct vbb_dev *vb)
{
	unsigned int i;

	if (!vb->ref_live)
		return;
	vb->ref_live = false;
	percpu_ref_kill(&vb->ref);
	wait_for_completion(&vb->drained);
	/* nothing in flight: these find nothing, and are not rearmed */
	cancel_delayed_work_sync(&vb->watchdog);
	cancel_delayed_work_sync(&vb->retry);
	/* every pass that kept spares held a reference until it had */
	for (i = 0; i < vb->num_vqs; i++)
		vbb_drop_spares(vb, &vb->vqs[i]);
}

/* After a drain: count again (->restore), before the state says live. */
void vbb_bio_reopen(struct vbb_dev *vb)
{
	if (vb->ref_live)
		return;
	reinit_completion(&vb->drained);
	percpu_ref_reinit(&vb->ref);
	vb->ref_live = true;
}

void vbb_bio_destroy(struct vbb_dev *vb)
{
	unsigned int i;

	/* a probe that failed after I/O had begun did not drain */
	if (vb->vqs && vb->breq_pool)
		for (i = 0; i < vb->num_vqs; i++)
			vbb_drop_spares(vb, &vb->vqs[i]);
	mempool_destroy(vb->breq_pool);
	vb->breq_pool = NULL;
	mempool_destroy(vb->split_pool);
	vb->split_pool = NULL;
	kfree(vb->flush_br);
	vb->flush_br = NULL;
	kfree(vb->plug_cbs);
	vb->plug_cbs = NULL;
	if (vb->plug_map_live)
		sbitmap_free(&vb->plug_map);
	vb->plug_map_live = false;
	percpu_ref_exit(&vb->ref);
	kfree(vb->cpu_vq);
	vb->cpu_vq = NULL;
}
