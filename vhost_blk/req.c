// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk request path: fetch a chain from the virtqueue, validate what the
 * guest wrote, turn it into an async kiocb (IN/OUT) or, for FLUSH, DISCARD
 * and WRITE_ZEROES, a call made on the queue's worker after the fetch loop,
 * and retire completions in batches.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/falloc.h>
#include <linux/kthread.h>
#include <linux/pagemap.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/virtio_byteorder.h>

#include "blk.h"

#define CREATE_TRACE_POINTS
#include "trace.h"

static struct kmem_cache *vhost_blk_req_cache;

int vhost_blk_req_init(void)
{
	/* Requests are charged to the memory cgroup of the worker's owner. */
	vhost_blk_req_cache = KMEM_CACHE(vhost_blk_req, SLAB_ACCOUNT);
	return vhost_blk_req_cache ? 0 : -ENOMEM;
}

void vhost_blk_req_exit(void)
{
	kmem_cache_destroy(vhost_blk_req_cache);
}

static u8 vhost_blk_op(u32 type)
{
	switch (type) {
	case VIRTIO_BLK_T_IN:
		return VHOST_BLK_OP_IN;
	case VIRTIO_BLK_T_OUT:
		return VHOST_BLK_OP_OUT;
	case VIRTIO_BLK_T_FLUSH:
		return VHOST_BLK_OP_FLUSH;
	case VIRTIO_BLK_T_GET_ID:
		return VHOST_BLK_OP_GET_ID;
	case VIRTIO_BLK_T_DISCARD:
		return VHOST_BLK_OP_DISCARD;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return VHOST_BLK_OP_WRITE_ZEROES;
	default:
		return VHOST_BLK_OP_OTHER;
	}
}

/* What the backend answered, as a virtio status. */
static u8 vhost_blk_errno_status(long err)
{
	if (!err)
		return VIRTIO_BLK_S_OK;
	return err == -EOPNOTSUPP ? VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR;
}

/*
 * A request is finished (from any context, including interrupts): hand it
 * to the queue's worker, which writes the status and the used ring.
 */
static void vhost_blk_req_done(struct vhost_blk_req *req)
{
	struct vhost_blk_vq *bvq = req->bvq;
	struct vhost_blk *blk = bvq->blk;

	/*
	 * The RCU read section keeps blk alive until wake_up() returned:
	 * teardown waits for every queue's pending to be zero and then for a
	 * grace period.  The count is the queue's, not the device's: queues
	 * complete on different CPUs.
	 */
	rcu_read_lock();
	llist_add(&req->node, &bvq->done);
	/* If the worker is gone, teardown drops the request. */
	vhost_vq_work_queue(&bvq->vq, &bvq->done_work);
	if (atomic_dec_and_test(&bvq->pending) &&
	    wq_has_sleeper(&blk->pending_wait))
		wake_up(&blk->pending_wait);
	rcu_read_unlock();
}

/* A read or write is done: @ret bytes moved, or an error. */
void vhost_blk_rw_end(struct vhost_blk_req *req, long ret)
{
	if (ret >= 0 && (u64)ret == req->len) {
		req->status = VIRTIO_BLK_S_OK;
	} else if (ret < 0) {
		req->status = vhost_blk_errno_status(ret);
		ret = 0;
	} else {
		req->status = VIRTIO_BLK_S_IOERR;
	}
	if (req->op == VHOST_BLK_OP_IN)
		req->used_len = ret + 1;
	vhost_blk_req_done(req);
}

static void vhost_blk_rw_complete(struct kiocb *iocb, long ret)
{
	struct vhost_blk_req *req = container_of(iocb, struct vhost_blk_req,
						 iocb);

	if (iocb->ki_flags & IOCB_WRITE && vhost_blk_be_regular(req->be))
		kiocb_end_write(iocb);
	vhost_blk_rw_end(req, ret);
}

static void vhost_blk_submit_rw(struct vhost_blk_req *req,
				struct iov_iter *iter)
{
	struct vhost_blk_backend_file *be = req->be;
	struct file *file = be->file;
	struct kiocb *iocb = &req->iocb;
	bool write = req->op == VHOST_BLK_OP_OUT;
	struct iov_iter saved = *iter;
	ssize_t ret;

	init_sync_kiocb(iocb, file);
	/*
	 * SET_BACKEND refuses O_APPEND, but fcntl() on another descriptor of
	 * the same file can set it later: the guest's sector is the position.
	 */
	iocb->ki_flags &= ~IOCB_APPEND;
	iocb->ki_pos = req->sector << SECTOR_SHIFT;
	iocb->ki_complete = vhost_blk_rw_complete;
	/* No cache the guest could flush: the write is stable when done. */
	if (write && req->stable)
		iocb->ki_flags |= IOCB_DSYNC;
	/* The file's permission and notification hooks, as for any I/O. */
	ret = rw_verify_area(write ? WRITE : READ, file, &iocb->ki_pos,
			     req->len);
	if (unlikely(ret)) {
		vhost_blk_rw_complete(iocb, ret);
		return;
	}
	if (be->bio && vhost_blk_bio_submit(req, iter))
		return;
	/* Direct I/O needs 512-byte aligned buffers; go buffered if not. */
	if (iocb->ki_flags & IOCB_DIRECT && iov_iter_alignment(iter) & 511)
		iocb->ki_flags &= ~IOCB_DIRECT;
again:
	if (write) {
		iocb->ki_flags |= IOCB_WRITE;
		if (vhost_blk_be_regular(be))
			kiocb_start_write(iocb);
		ret = file->f_op->write_iter(iocb, iter);
	} else {
		ret = file->f_op->read_iter(iocb, iter);
	}
	if (ret == -EIOCBQUEUED)
		return;
	/* A stricter alignment of the file system: retry through the cache. */
	if (ret == -EINVAL && iocb->ki_flags & IOCB_DIRECT) {
		if (write && vhost_blk_be_regular(be))
			kiocb_end_write(iocb);
		iocb->ki_flags &= ~(IOCB_DIRECT | IOCB_WRITE);
		*iter = saved;
		goto again;
	}
	vhost_blk_rw_complete(iocb, ret);
}

static int vhost_blk_fallocate(struct vhost_blk_backend_file *be, int mode,
			       loff_t pos, loff_t len)
{
	return vfs_fallocate(be->file, mode | FALLOC_FL_KEEP_SIZE, pos, len);
}

/*
 * Discard on a block device, keeping its page cache true to it as fallocate
 * does: nobody may read the range into the cache meanwhile, and what the
 * cache holds of it goes (written back first if dirty).
 */
static int vhost_blk_bdev_discard(struct vhost_blk_backend_file *be,
				  loff_t pos, loff_t len)
{
	struct address_space *mapping = be->file->f_mapping;
	loff_t end = pos + len - 1;
	int ret;

	filemap_invalidate_lock(mapping);
	ret = filemap_write_and_wait_range(mapping, pos, end);
	if (!ret)
		ret = invalidate_inode_pages2_range(mapping, pos >> PAGE_SHIFT,
						    end >> PAGE_SHIFT);
	if (!ret)
		ret = blkdev_issue_discard(I_BDEV(mapping->host),
					   pos >> SECTOR_SHIFT,
					   len >> SECTOR_SHIFT, GFP_KERNEL);
	filemap_invalidate_unlock(mapping);
	return ret;
}

static int vhost_blk_discard_range(struct vhost_blk_backend_file *be,
				   loff_t pos, loff_t len)
{
	int ret;

	if (be->bdev)
		ret = vhost_blk_bdev_discard(be, pos, len);
	else
		ret = vhost_blk_fallocate(be, FALLOC_FL_PUNCH_HOLE, pos, len);
	/* Discard is a hint: a backend without it is not an error. */
	if (ret == -EOPNOTSUPP)
		ret = 0;
	return ret;
}

/*
 * Both modes leave the range reading back as zeroes, but only UNMAP lets
 * the device deallocate it: without it, a backend that cannot zero in
 * place (tmpfs) answers -EOPNOTSUPP, an UNSUPP status, on which the guest
 * writes the zeroes itself.
 */
static int vhost_blk_zero_range(struct vhost_blk_backend_file *be,
				loff_t pos, loff_t len, bool unmap)
{
	int ret;

	if (!unmap)
		return vhost_blk_fallocate(be, FALLOC_FL_ZERO_RANGE, pos, len);
	ret = vhost_blk_fallocate(be, FALLOC_FL_PUNCH_HOLE, pos, len);
	if (ret == -EOPNOTSUPP)
		ret = vhost_blk_fallocate(be, FALLOC_FL_ZERO_RANGE, pos, len);
	return ret;
}

/* Syncs started so far: a sync numbered above it starts after this call. */
static u64 vhost_blk_sync_seen(struct vhost_blk *blk)
{
	u64 gen;

	spin_lock(&blk->sync_lock);
	gen = blk->sync_gen;
	spin_unlock(&blk->sync_lock);
	return gen;
}

/*
 * Make stable what completed before vhost_blk_sync_seen() returned @seen:
 * an fdatasync of the backend, unless one that started after that has
 * completed meanwhile, which covers the caller as well.  So any number of
 * FLUSHes that arrive while a sync runs share the next one.
 */
static int vhost_blk_sync(struct vhost_blk *blk,
			  struct vhost_blk_backend_file *be, u64 seen)
{
	int ret;
	u64 gen;

	mutex_lock(&blk->sync_mutex);
	if (blk->sync_gen > seen) {
		ret = blk->sync_err_gen > seen ? -EIO : 0;
		goto unlock;
	}
	spin_lock(&blk->sync_lock);
	gen = ++blk->sync_gen;
	spin_unlock(&blk->sync_lock);
	ret = vfs_fsync(be->file, 1);
	if (ret)
		blk->sync_err_gen = gen;
unlock:
	mutex_unlock(&blk->sync_mutex);
	return ret;
}

static int vhost_blk_dwz(struct vhost_blk_req *req)
{
	struct vhost_blk_backend_file *be = req->be;
	int ret = 0;
	int i;

	for (i = 0; i < req->nr_seg && !ret; i++) {
		loff_t pos = le64_to_cpu(req->seg[i].sector) << SECTOR_SHIFT;
		loff_t len = (loff_t)le32_to_cpu(req->seg[i].num_sectors) <<
			     SECTOR_SHIFT;
		bool unmap = le32_to_cpu(req->seg[i].flags) &
			     VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;

		if (!len)
			continue;
		if (req->op == VHOST_BLK_OP_DISCARD)
			ret = vhost_blk_discard_range(be, pos, len);
		else
			ret = vhost_blk_zero_range(be, pos, len, unmap);
	}
	if (!ret && req->stable) {
		struct vhost_blk *blk = req->bvq->blk;

		ret = vhost_blk_sync(blk, be, vhost_blk_sync_seen(blk));
	}
	return ret;
}

/*
 * FLUSH, DISCARD and WRITE_ZEROES block: they run on the queue's worker
 * after its fetch loop, one at a time, as the owner (see handle_kick).
 */
static void vhost_blk_run_sync(struct vhost_blk_req *req)
{
	int ret = 0;

	if (req->op != VHOST_BLK_OP_FLUSH)
		ret = vhost_blk_dwz(req);
#ifdef VHOST_BLK_FAULT_INJECTION
	else if (unlikely(vhost_blk_drop_flush()))
		pr_warn_once("fault injection: acknowledging flushes without syncing\n");
#endif
	else
		ret = vhost_blk_sync(req->bvq->blk, req->be, req->sync_seen);
	req->status = vhost_blk_errno_status(ret);
	vhost_blk_req_done(req);
}

static bool vhost_blk_range_ok(struct vhost_blk_backend_file *be, u64 sector,
			       u64 nr_sectors)
{
	return sector <= be->capacity && nr_sectors <= be->capacity - sector;
}

/*
 * Parse DISCARD / WRITE_ZEROES ranges from the data that follows the
 * header.  Returns a virtio status; OK means "submit".
 */
static u8 vhost_blk_parse_dwz(struct vhost_blk_req *req, struct iov_iter *from)
{
	struct virtio_blk_discard_write_zeroes seg[VHOST_BLK_MAX_DWZ_SEG];
	size_t len = iov_iter_count(from);
	u32 max_flags = 0;
	unsigned int i;

	if (!len || len % sizeof(seg[0]) || len > sizeof(seg))
		return VIRTIO_BLK_S_IOERR;
	/* Through the stack: the request cache is not a usercopy region. */
	if (copy_from_iter(seg, len, from) != len)
		return VIRTIO_BLK_S_IOERR;
	memcpy(req->seg, seg, len);
	req->nr_seg = len / sizeof(req->seg[0]);
	if (req->op == VHOST_BLK_OP_WRITE_ZEROES)
		max_flags = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
	for (i = 0; i < req->nr_seg; i++) {
		u64 sector = le64_to_cpu(req->seg[i].sector);
		u32 nr = le32_to_cpu(req->seg[i].num_sectors);

		if (le32_to_cpu(req->seg[i].flags) & ~max_flags)
			return VIRTIO_BLK_S_UNSUPP;
		if (nr > VHOST_BLK_MAX_DWZ_SECTORS ||
		    !vhost_blk_range_ok(req->be, sector, nr))
			return VIRTIO_BLK_S_IOERR;
		req->len += (u64)nr << SECTOR_SHIFT;
	}
	return VIRTIO_BLK_S_OK;
}

/* The status byte is the last byte the chain lets the device write. */
static u8 __user *vhost_blk_status_ptr(struct iovec *iov, unsigned int nr)
{
	while (nr--) {
		if (iov[nr].iov_len)
			return (u8 __user *)iov[nr].iov_base +
			       iov[nr].iov_len - 1;
	}
	return NULL;
}

/*
 * Parse one request, check it and submit it to the backend.  Requests that
 * finish here (errors, GET_ID, zero-length I/O) go through the same
 * completion path as the others.
 * Returns true for a request the caller runs with vhost_blk_run_sync().
 */
static bool vhost_blk_req_submit(struct vhost_blk_req *req,
				 unsigned int out, unsigned int in)
{
	struct vhost_virtqueue *vq = &req->bvq->vq;
	struct vhost_blk_backend_file *be = req->be;
	struct virtio_blk_outhdr hdr;
	struct iov_iter from, to;
	size_t out_len, in_len;
	u64 nr_sectors;

	out_len = iov_length(req->iov, out);
	in_len = iov_length(req->iov + out, in);
	iov_iter_init(&from, ITER_SOURCE, req->iov, out, out_len);
	iov_iter_init(&to, ITER_DEST, req->iov + out, in, in_len);
	/* Everything but the status byte. */
	iov_iter_truncate(&to, in_len - 1);
	req->used_len = 1;
	req->status = VIRTIO_BLK_S_IOERR;

	if (copy_from_iter(&hdr, sizeof(hdr), &from) != sizeof(hdr)) {
		req->op = VHOST_BLK_OP_OTHER;
		req->type = U32_MAX;
		goto done;
	}
	req->type = vhost32_to_cpu(vq, hdr.type);
	req->sector = vhost64_to_cpu(vq, hdr.sector);
	req->op = vhost_blk_op(req->type);
	trace_vhost_blk_submit(req->bvq->index, req->type, req->sector,
			       req->op == VHOST_BLK_OP_OUT ? iov_iter_count(&from) :
			       iov_iter_count(&to));

	switch (req->op) {
	case VHOST_BLK_OP_IN:
	case VHOST_BLK_OP_OUT:
		if (req->op == VHOST_BLK_OP_IN) {
			req->len = min_t(size_t, iov_iter_count(&to),
					 MAX_RW_COUNT);
			if (req->len != iov_iter_count(&to))
				goto done;
		} else {
			if (be->ro)
				goto done;
			req->len = min_t(size_t, iov_iter_count(&from),
					 MAX_RW_COUNT);
			if (req->len != iov_iter_count(&from))
				goto done;
		}
		if (req->len & (SECTOR_SIZE - 1))
			goto done;
		nr_sectors = req->len >> SECTOR_SHIFT;
		if (!vhost_blk_range_ok(be, req->sector, nr_sectors))
			goto done;
		if (!req->len) {
			req->status = VIRTIO_BLK_S_OK;
			goto done;
		}
		atomic_inc(&req->bvq->pending);
		vhost_blk_submit_rw(req, req->op == VHOST_BLK_OP_IN ? &to :
				    &from);
		return false;
	case VHOST_BLK_OP_GET_ID: {
		u8 serial[VHOST_BLK_SERIAL_LEN];
		size_t n = min_t(size_t, iov_iter_count(&to),
				 VHOST_BLK_SERIAL_LEN);

		memcpy(serial, req->bvq->blk->serial, sizeof(serial));
		if (copy_to_iter(serial, n, &to) != n)
			goto done;
		req->used_len += n;
		req->status = VIRTIO_BLK_S_OK;
		goto done;
	}
	case VHOST_BLK_OP_DISCARD:
	case VHOST_BLK_OP_WRITE_ZEROES:
		if (be->ro)
			goto done;
		req->status = vhost_blk_parse_dwz(req, &from);
		if (req->status != VIRTIO_BLK_S_OK) {
			req->len = 0;
			goto done;
		}
		break;
	case VHOST_BLK_OP_FLUSH:
		req->sync_seen = vhost_blk_sync_seen(req->bvq->blk);
		break;
	default:
		req->status = VIRTIO_BLK_S_UNSUPP;
		goto done;
	}
	atomic_inc(&req->bvq->pending);
	return true;
done:
	atomic_inc(&req->bvq->pending);
	vhost_blk_req_done(req);
	return false;
}

/*
 * A queue reuses the requests it retired, up to VHOST_BLK_SPARE_MAX of
 * them: a queue at a steady depth takes none from the slab.  They stay
 * charged to the owner's memory cgroup until the queues are drained
 * (backend change, owner reset, release).
 */
static struct vhost_blk_req *vhost_blk_req_alloc(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req;

	if (likely(bvq->spare)) {
		req = llist_entry(bvq->spare, struct vhost_blk_req, node);
		bvq->spare = req->node.next;
		bvq->nr_spare--;
		return req;
	}
	req = kmem_cache_alloc(vhost_blk_req_cache, GFP_KERNEL);
	/*
	 * With nothing in flight, no completion would restart the queue:
	 * this one request may not fail (and may exceed the memory limit).
	 */
	if (unlikely(!req) && !bvq->inflight)
		req = kmem_cache_alloc(vhost_blk_req_cache,
				       GFP_KERNEL | __GFP_NOFAIL);
	if (req) {
		req->bvq = bvq;
		req->bio_pinned = false;
	}
	return req;
}

/* Under vq.mutex. */
static void vhost_blk_req_free(struct vhost_blk_vq *bvq,
			       struct vhost_blk_req *req)
{
	if (bvq->nr_spare < VHOST_BLK_SPARE_MAX) {
		req->node.next = bvq->spare;
		bvq->spare = &req->node;
		bvq->nr_spare++;
		return;
	}
	kmem_cache_free(vhost_blk_req_cache, req);
}

/* Drain: the queue's kept requests go back to the slab; under vq.mutex. */
void vhost_blk_spare_free(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req;

	while (bvq->spare) {
		req = llist_entry(bvq->spare, struct vhost_blk_req, node);
		bvq->spare = req->node.next;
		kmem_cache_free(vhost_blk_req_cache, req);
	}
	bvq->nr_spare = 0;
}

/*
 * Work for the guest runs as its owner.  A vhost_task worker is a thread of
 * the owner already; a kthread worker (a device switched to kthreads with
 * VHOST_SET_FORK_FROM_OWNER, or any device of a vhost core older than
 * vhost_task) only shares the owner's cgroups, so for a handler run it
 * takes the owner's credentials and memory cgroup.
 */
struct vhost_blk_as_owner {
	const struct cred *cred;
	struct mem_cgroup *memcg;
	bool kthread;
};

static void vhost_blk_owner_enter(struct vhost_blk_backend_file *be,
				  struct vhost_blk_as_owner *saved)
{
	saved->kthread = current->flags & PF_KTHREAD;
	if (saved->kthread) {
		saved->cred = override_creds(be->cred);
		saved->memcg = set_active_memcg(be->memcg);
	}
}

static void vhost_blk_owner_leave(struct vhost_blk_as_owner *saved)
{
	if (saved->kthread) {
		set_active_memcg(saved->memcg);
		revert_creds(saved->cred);
	}
}

/* Start servicing a ring the first time it is kicked with a backend. */
static bool vhost_blk_vq_activate(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;

	if (vhost_vq_get_backend(vq))
		return true;
	if (!vhost_vq_is_setup(vq))
		return false;
	vhost_vq_set_backend(vq, bvq->be);
	if (vhost_vq_init_access(vq)) {
		vhost_vq_set_backend(vq, NULL);
		vq_err(vq, "vhost-blk: cannot access ring %u\n", bvq->index);
		return false;
	}
	/*
	 * The guest looks at its used ring once: a device before this one (a
	 * VMM that restarted) may have published completions whose
	 * notification went to a call eventfd the front-end had dropped.
	 */
	vhost_signal(vq->dev, vq);
	return true;
}

/*
 * Batching.  Answering each guest notification at once makes every pass
 * over a busy ring short, and every pass costs the guest a notification
 * and an interrupt: VM exits, which dominate what an I/O costs a guest.
 * So while the guest's recent bursts were more than one request (or more
 * than one is in flight), the queue leaves the guest's notifications off
 * when the ring runs empty and waits for the guest's next burst: it looks
 * at the ring without fetching until the burst is over (below) or the
 * wait's bound has passed, then takes all of it in one pass, whose
 * completions go back with one interrupt.  Each look is a timer interrupt
 * and a worker wakeup, so a queue that has seen a whole burst come makes
 * its next wait's first look a little sooner than that took, and takes the
 * burst there if it is whole.  The bound is batch_delay_us, or
 * for a guest too slow to send its burst in that time, twice the time it
 * takes at its last pace (VHOST_BLK_BATCH_DELAY_MAX at most).  A pass that
 * finds nothing turns notifications back on, and so does a pass of one
 * request with at most one in flight once the bursts before it have
 * dwindled to one, but for a probe now and then (one pass in
 * VHOST_BLK_BATCH_PROBE, backing off while probes find no burst), which
 * waits out its bound and looks once: a queue at depth one is answered at
 * once, nearly always.
 */
unsigned int vhost_blk_batch_delay_us = 1000;
module_param_named(batch_delay_us, vhost_blk_batch_delay_us, uint, 0644);
MODULE_PARM_DESC(batch_delay_us,
		 "Longest a busy queue waits for the guest's burst to end, with notifications off, unless the guest is slower (us, 0 = off, default 1000; new devices)");

static enum hrtimer_restart vhost_blk_batch_timeout(struct hrtimer *timer)
{
	struct vhost_blk_vq *bvq = container_of(timer, struct vhost_blk_vq,
						batch_timer);

	vhost_poll_queue(&bvq->vq.poll);
	return HRTIMER_NORESTART;
}

void vhost_blk_batch_init(struct vhost_blk_vq *bvq)
{
	hrtimer_setup(&bvq->batch_timer, vhost_blk_batch_timeout,
		      CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	bvq->batch_probe_every = VHOST_BLK_BATCH_PROBE;
}

/*
 * The queue stops (teardown, detach; its backend is gone, so no pass arms
 * the timer again): no timer left, nothing batching.  The state is the
 * completion work's too, which reads it under vq.mutex.
 */
void vhost_blk_batch_stop(struct vhost_blk_vq *bvq)
{
	hrtimer_cancel(&bvq->batch_timer);
	mutex_lock(&bvq->vq.mutex);
	bvq->batching = false;
	bvq->batch_whole_ns = 0;
	mutex_unlock(&bvq->vq.mutex);
}

/*
 * The longest step between two looks: an eighth of the wait's bound, or two
 * of the guest's request gaps if that is longer (a look sooner than the
 * guest's next request would find the ring not grown and end its burst),
 * within the bound.
 */
static u64 vhost_blk_batch_step_max(struct vhost_blk_vq *bvq)
{
	u64 step = max(bvq->batch_bound_ns / 8, 2 * bvq->batch_gap_ns);

	return max_t(u64, min(step, bvq->batch_bound_ns),
		     VHOST_BLK_BATCH_LOOK_MIN_NS);
}

/*
 * How long one wait may take: @delay_us, or VHOST_BLK_BATCH_PACE times
 * what the burst the queue expects takes the guest at its last pace, if
 * that is longer (a guest on a loaded or emulated CPU sends its requests
 * far apart); never above VHOST_BLK_BATCH_DELAY_MAX.
 */
static u64 vhost_blk_batch_bound(struct vhost_blk_vq *bvq, u32 delay_us)
{
	u64 least = (u64)delay_us * NSEC_PER_USEC;
	u64 pace = (u64)VHOST_BLK_BATCH_PACE * bvq->batch_expect *
		   bvq->batch_gap_ns;

	return clamp_t(u64, pace, least,
		       (u64)VHOST_BLK_BATCH_DELAY_MAX * NSEC_PER_USEC);
}

/* Look at the ring again in @step, held to [shortest look, @most]. */
static void vhost_blk_batch_arm(struct vhost_blk_vq *bvq, u64 step, u64 most)
{
	step = clamp_t(u64, step, VHOST_BLK_BATCH_LOOK_MIN_NS, most);
	bvq->batch_step_ns = step;
	hrtimer_start(&bvq->batch_timer, ns_to_ktime(step), HRTIMER_MODE_REL);
}

/*
 * A probe looks once, when its bound has passed.  Each look is a timer
 * interrupt and a worker wakeup; where the worker shares a CPU with the
 * guest's vCPU, each one holds the guest up, and a guest slow enough to
 * send its requests one at a time may send none while it is looked at every
 * few hundred microseconds: its probes would find no burst.
 */
static void vhost_blk_probe_arm(struct vhost_blk_vq *bvq)
{
	hrtimer_start(&bvq->batch_timer, bvq->batch_deadline, HRTIMER_MODE_ABS);
}

/*
 * The ring ran empty after a pass that found @found requests: true if the
 * queue waits for the guest's next burst with notifications off.  It
 * expects as many requests as the pass found (a guest at a steady queue
 * depth gives back what completes), or half what it expected last time if
 * that is more: one burst cut short (the guest's vCPU stopped for a while)
 * does not make the queue take the guest for one at depth one.  A queue
 * that serves single requests still waits once every batch_probe_every
 * passes (VHOST_BLK_BATCH_PROBE to VHOST_BLK_BATCH_PROBE_MAX): a guest
 * that has more on the way sends them then.  Under vq.mutex.
 */
static bool vhost_blk_batch_wait(struct vhost_blk_vq *bvq, int found)
{
	u32 delay = READ_ONCE(bvq->blk->batch_delay_us);
	u64 first;

	bvq->batch_expect = max_t(int, found, bvq->batch_expect / 2);
	/*
	 * A queue at depth one, or one whose guest sends its requests one at
	 * a time although more are on their way: waiting now and then tells
	 * them apart.  Each wait costs a guest at depth one a request that
	 * waits the wait's bound, so a wait that found no burst makes
	 * the next come half as often; a pass that finds one, often again.
	 */
	if (found >= 2)
		bvq->batch_probe_every = VHOST_BLK_BATCH_PROBE;
	else if (bvq->batch_probing)
		bvq->batch_probe_every = min_t(u16, 2 * bvq->batch_probe_every,
					       VHOST_BLK_BATCH_PROBE_MAX);
	bvq->batch_probing = false;
	if (!delay || !found) {
		bvq->batching = false;
		return false;
	}
	if (bvq->batch_expect < 2 && bvq->inflight < 2) {
		if (++bvq->batch_singles < bvq->batch_probe_every) {
			bvq->batching = false;
			return false;
		}
		bvq->batch_probing = true;
	}
	bvq->batch_singles = 0;
	bvq->batching = true;
	bvq->batch_expect = max_t(u16, bvq->batch_expect, 2);
	bvq->batch_seen = bvq->vq.last_avail_idx;
	bvq->batch_bound_ns = vhost_blk_batch_bound(bvq, delay);
	bvq->batch_grown = ktime_get();
	bvq->batch_begun = bvq->batch_grown;
	bvq->batch_deadline = ktime_add_ns(bvq->batch_grown, bvq->batch_bound_ns);
	bvq->batch_still = false;
	bvq->batch_first = false;
	bvq->stats.batch_waits++;
	if (bvq->batch_probing) {
		vhost_blk_probe_arm(bvq);
		return true;
	}
	/*
	 * A burst whole at the first look costs one timer interrupt.  Looks
	 * that find the burst whole keep moving that look sooner (never later
	 * than half the bound, so a short burst after one slow one is still
	 * seen to stop in time), until one comes too soon: then the looks
	 * below follow the guest's pace, and the time to the burst's last
	 * growth is the next wait's guide.
	 */
	if (bvq->batch_whole_ns) {
		first = bvq->batch_whole_ns -
			bvq->batch_whole_ns / VHOST_BLK_BATCH_SOONER;
		bvq->batch_first = true;
		vhost_blk_batch_arm(bvq, first, bvq->batch_bound_ns / 2);
		return true;
	}
	/*
	 * The guest takes a few of its request gaps to answer an interrupt;
	 * before it has shown its pace, a 32nd of batch_delay_us.
	 */
	first = bvq->batch_gap_ns ? VHOST_BLK_BATCH_TURNAROUND * bvq->batch_gap_ns :
				    (u64)delay * NSEC_PER_USEC / VHOST_BLK_BATCH_LOOKS;
	vhost_blk_batch_arm(bvq, first, vhost_blk_batch_step_max(bvq));
	return true;
}

/* The expected burst was all there at @seen: time the next first look. */
static void vhost_blk_batch_whole(struct vhost_blk_vq *bvq, ktime_t seen)
{
	bvq->batch_whole_ns = ktime_to_ns(ktime_sub(seen, bvq->batch_begun));
}

/*
 * The chain at the ring's head maps to more buffers than a request takes:
 * vhost_get_vq_desc() returned -ENOBUFS and left it there, where every
 * later pass would stop on it.  Fetch it again into the virtqueue's own
 * array (UIO_MAXIOV entries, which vhost_blk does not use otherwise) and
 * answer it with IOERR.  A chain that maps to more than that stops the
 * queue, reported with vq_err().  True if the chain was answered.  Under
 * vq.mutex.
 */
static bool vhost_blk_refuse_long(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	bool logging = vhost_has_feature(vq, VHOST_F_LOG_ALL);
	unsigned int out, in, log_num = 0;
	u8 __user *status;
	int head;

	bvq->stats.bad_chain++;
	head = vhost_get_vq_desc(vq, vq->iov, ARRAY_SIZE(vq->iov), &out, &in,
				 logging ? vq->log : NULL, &log_num);
	if (head < 0 || head == vq->num) {
		if (head == -ENOBUFS)
			vq_err(vq, "vhost-blk: a chain maps to more than %zu buffers: queue stopped\n",
			       ARRAY_SIZE(vq->iov));
		return false;
	}
	status = vhost_blk_status_ptr(vq->iov + out, in);
	if (!status || put_user(VIRTIO_BLK_S_IOERR, status)) {
		vq_err(vq, "vhost-blk: chain %d is too long and has no status byte\n",
		       head);
		vhost_add_used(vq, head, 0);
		return true;
	}
	if (logging && vhost_log_write(vq, vq->log, log_num,
				       iov_length(vq->iov + out, in), NULL, 0))
		vq_err(vq, "vhost-blk: cannot log the status of chain %d\n",
		       head);
	vhost_add_used(vq, head, 1);
	return true;
}

/*
 * The pass has had its share of the worker (VHOST_BLK_WEIGHT chains or
 * VHOST_BLK_BYTE_WEIGHT bytes): true, and the kick handler is queued
 * again.  It stopped with requests still in the ring, so the burst it was
 * batching on is over: the next pass fetches at once, with no look.
 * Under vq.mutex.
 */
static bool vhost_blk_weighed(struct vhost_blk_vq *bvq, int reqs,
			      size_t total)
{
	if (likely(!vhost_exceeds_weight(&bvq->vq, reqs,
					 min_t(size_t, total, INT_MAX))))
		return false;
	bvq->batching = false;
	return true;
}

/*
 * A look at a ring the queue is batching on: true if the guest is still
 * adding to it, so the queue looks again later instead of fetching now.
 * The burst is over, and the queue fetches, once the ring holds something
 * and did not grow since the last look, if it holds what the queue
 * expects, or else in two looks in a row (one may just have come too soon
 * for a slow guest); at once if the ring holds as much as the queue can
 * take; and once the wait's bound has passed since the queue began to
 * wait: no request waits longer.  A burst that holds what was expected is
 * still taken whole if it goes on growing, so the queue learns a guest's
 * burst is larger, or whole again after a cut.  The next look follows the
 * guest's pace: twice the time each request took to arrive since the ring
 * last grew, or twice the last step while nothing came, within
 * vhost_blk_batch_step_max().  Under vq.mutex.
 */
static bool vhost_blk_burst_grows(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	u64 max_step, step;
	ktime_t now = ktime_get();
	unsigned int room;
	__virtio16 raw;
	u16 idx, n, grew;

	if (!ktime_before(now, bvq->batch_deadline)) {
		bvq->stats.batch_timeouts++;
		return false;
	}
	/* No IOTLB here (no VIRTIO_F_ACCESS_PLATFORM): the owner's address. */
	if (unlikely(get_user(raw, &vq->avail->idx)))
		return false;
	idx = vhost16_to_cpu(vq, raw);
	n = idx - vq->last_avail_idx;
	grew = idx - bvq->batch_seen;
	room = min_t(unsigned int, vq->num, vhost_blk_max_inflight);
	if (n >= room - min(room, bvq->inflight))
		return false;
	if (bvq->batch_probing) {
		vhost_blk_probe_arm(bvq);
		return true;
	}
	max_step = vhost_blk_batch_step_max(bvq);
	if (bvq->batch_first) {
		bvq->batch_first = false;
		if (n >= bvq->batch_expect) {
			vhost_blk_batch_whole(bvq, now);
			return false;
		}
		/*
		 * Too soon.  Nothing yet: look again when the last burst was
		 * whole.  Some of it: at the guest's pace, so a burst shorter
		 * than expected is soon seen to stop.  The time since the wait
		 * began is the guest's turnaround, not its pace: its pace is
		 * timed from this look on.
		 */
		bvq->batch_grown = now;
		bvq->batch_seen = idx;
		step = n ? 2 * bvq->batch_gap_ns :
			   bvq->batch_whole_ns / VHOST_BLK_BATCH_SOONER;
		vhost_blk_batch_arm(bvq, step, max_step);
		return true;
	}
	if (n && !grew) {
		if (n >= bvq->batch_expect) {
			vhost_blk_batch_whole(bvq, bvq->batch_grown);
			return false;
		}
		if (bvq->batch_still)
			return false;
		bvq->batch_still = true;
	}
	if (grew) {
		s64 gap = ktime_to_ns(ktime_sub(now, bvq->batch_grown));

		bvq->batch_gap_ns = div_u64(gap, grew);
		bvq->batch_grown = now;
		bvq->batch_still = false;
		step = 2 * bvq->batch_gap_ns;
	} else {
		step = 2 * bvq->batch_step_ns;
	}
	bvq->batch_seen = idx;
	vhost_blk_batch_arm(bvq, step, max_step);
	return true;
}

/*
 * Busy polling, for hosts with a core to spare per worker: a queue about
 * to turn the guest's notifications back on (its ring empty, no batch to
 * wait for) spins on the avail ring instead, for up to the ring's
 * busyloop_timeout (us, VHOST_SET_VRING_BUSYLOOP_TIMEOUT, at most
 * VHOST_BLK_BUSYLOOP_MAX_US) since it last found a request.  A guest that
 * keeps sending within that time sends without notifications, so without
 * the VM exits they cost.  The spin goes in slices of at most
 * VHOST_BLK_POLL_SLICE_NS: between two, and as soon as work is queued on
 * the worker (a completion to retire, another queue's kick, a flush) or
 * the scheduler wants the CPU, the handler is queued again with
 * notifications still off, so the worker runs what it holds and vq.mutex
 * is released in between; it stops on a signal.  poll_us is the timeout
 * of new devices' queues.
 */
static unsigned int vhost_blk_poll_us;
module_param_named(poll_us, vhost_blk_poll_us, uint, 0644);
MODULE_PARM_DESC(poll_us,
		 "Busy poll timeout of new devices' queues, until the owner sets one (us, 0 = off, default 0)");

void vhost_blk_poll_init(struct vhost_blk *blk)
{
	unsigned int us = READ_ONCE(vhost_blk_poll_us);
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		WRITE_ONCE(blk->vqs[i].vq.busyloop_timeout, us);
}

enum vhost_blk_poll {
	VHOST_BLK_POLL_OFF,	/* not polling (any more): notifications on */
	VHOST_BLK_POLL_FOUND,	/* the guest added a request */
	VHOST_BLK_POLL_AGAIN,	/* gave way; the handler is queued again */
};

/*
 * Go on polling in a later run of the handler, after the work the worker
 * holds now (has_work sees only what was queued since it took its list)
 * and whoever waits for vq.mutex.  A request that run finds first was
 * found by polling too: the guest sent it while the spin gave way (always,
 * when the guest's vCPU shares the worker's CPU).  A worker that is gone
 * runs nothing more: notifications go back on.
 */
static enum vhost_blk_poll vhost_blk_poll_again(struct vhost_blk_vq *bvq)
{
	if (!vhost_vq_work_queue(&bvq->vq, &bvq->vq.poll.work))
		return VHOST_BLK_POLL_OFF;
	bvq->poll_resumed = true;
	return VHOST_BLK_POLL_AGAIN;
}

/*
 * The ring ran empty after a pass that found @found requests; @sync: some
 * of them run after the pass (FLUSH, DISCARD, WRITE_ZEROES).  What the
 * pass submitted goes to the backend first (@plug): the guest may wait for
 * it before it sends more.  Under vq.mutex.
 */
static enum vhost_blk_poll vhost_blk_busy_poll(struct vhost_blk_vq *bvq,
					       int found, bool sync,
					       struct blk_plug *plug)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	u32 us = READ_ONCE(vq->busyloop_timeout);
	u64 now, slice_end;

	if (!us)
		return VHOST_BLK_POLL_OFF;
	now = local_clock();
	if (found) {
		us = min_t(u32, us, VHOST_BLK_BUSYLOOP_MAX_US);
		bvq->poll_end_ns = now + (u64)us * NSEC_PER_USEC;
	}
	if (now >= bvq->poll_end_ns)
		return VHOST_BLK_POLL_OFF;
	if (sync)
		return vhost_blk_poll_again(bvq);
	blk_finish_plug(plug);
	blk_start_plug(plug);
	slice_end = min(bvq->poll_end_ns, now + VHOST_BLK_POLL_SLICE_NS);
	while (now < slice_end) {
		if (!vhost_vq_avail_empty(vq->dev, vq)) {
			bvq->stats.poll_found++;
			return VHOST_BLK_POLL_FOUND;
		}
		if (signal_pending(current))
			return VHOST_BLK_POLL_OFF;
		if (need_resched() || vhost_vq_has_work(vq))
			break;
		cpu_relax();
		now = local_clock();
	}
	if (now >= bvq->poll_end_ns)
		return VHOST_BLK_POLL_OFF;
	return vhost_blk_poll_again(bvq);
}

/*
 * vq->handle_kick: runs on the queue's worker.  Every chain fetched counts
 * against the vhost weight, whatever becomes of it, so a queue yields its
 * worker after VHOST_BLK_WEIGHT chains or VHOST_BLK_BYTE_WEIGHT bytes.
 * FLUSH, DISCARD and WRITE_ZEROES run after the fetch loop, outside
 * vq->mutex, before the worker moves on.
 */
void vhost_blk_handle_kick(struct vhost_work *work)
{
	struct vhost_virtqueue *vq = container_of(work, struct vhost_virtqueue,
						  poll.work);
	struct vhost_blk_vq *bvq = container_of(vq, struct vhost_blk_vq, vq);
	struct llist_node *sync = NULL, **sync_tail = &sync;
	struct vhost_blk_backend_file *be;
	struct vhost_blk_req *req = NULL, *next;
	struct vhost_blk_as_owner saved;
	unsigned int out, in;
	enum vhost_blk_poll poll;
	struct blk_plug plug;
	bool refused = false;
	size_t total = 0;
	bool stable, resumed;
	int reqs = 0, found = 0;
	int head;

	mutex_lock(&vq->mutex);
	resumed = bvq->poll_resumed;
	bvq->poll_resumed = false;
	be = bvq->be;
	if (!be || !vhost_blk_vq_activate(bvq)) {
		mutex_unlock(&vq->mutex);
		return;
	}
	if (bvq->batching) {
		hrtimer_try_to_cancel(&bvq->batch_timer);
		/* The guest is still queuing: look again later. */
		if (!bvq->throttled && vhost_blk_burst_grows(bvq)) {
			bvq->stats.batch_looks++;
			mutex_unlock(&vq->mutex);
			return;
		}
	}
	vhost_blk_owner_enter(be, &saved);
	stable = !vhost_has_feature(vq, VIRTIO_BLK_F_FLUSH);
	blk_start_plug(&plug);
	vhost_disable_notify(vq->dev, vq);
	do {
		if (bvq->inflight >= vhost_blk_max_inflight) {
			/* The completion work kicks us again. */
			bvq->throttled = true;
			bvq->stats.throttled++;
			break;
		}
		if (!req) {
			req = vhost_blk_req_alloc(bvq);
			if (unlikely(!req)) {
				/* Some are in flight: a completion restarts us. */
				bvq->throttled = true;
				break;
			}
		}
		head = vhost_get_vq_desc(vq, req->iov, ARRAY_SIZE(req->iov),
					 &out, &in, NULL, NULL);
		if (unlikely(head == -ENOBUFS)) {
			/* Answered with IOERR, or the queue stops. */
			if (!vhost_blk_refuse_long(bvq))
				break;
			refused = true;
			continue;
		}
		/* vhost already reported a malformed chain with vq_err. */
		if (unlikely(head < 0)) {
			bvq->stats.bad_chain++;
			break;
		}
		if (head == vq->num) {
			/* A spin from here counts its own finds. */
			resumed = false;
			if (bvq->batching && found)
				bvq->stats.batch_found++;
			if (vhost_blk_batch_wait(bvq, found))
				break;
			poll = vhost_blk_busy_poll(bvq, found, !!sync, &plug);
			if (poll == VHOST_BLK_POLL_FOUND)
				continue;
			if (poll == VHOST_BLK_POLL_AGAIN)
				break;
			if (unlikely(vhost_enable_notify(vq->dev, vq))) {
				vhost_disable_notify(vq->dev, vq);
				continue;
			}
			break;
		}
		total += iov_length(req->iov, out + in);
		req->status_ptr = vhost_blk_status_ptr(req->iov + out, in);
		if (unlikely(!req->status_ptr)) {
			/* Nowhere to put a status: return the chain unused. */
			vq_err(vq, "vhost-blk: chain %d has no status byte\n",
			       head);
			bvq->stats.bad_chain++;
			vhost_add_used(vq, head, 0);
			refused = true;
			continue;
		}
		if (unlikely(resumed) && !found)
			bvq->stats.poll_found++;
		req->head = head;
		req->in_first = out;
		req->in_num = in;
		req->be = be;
		/* The clock is read only for the completion's tracepoint. */
		req->start_ns = trace_vhost_blk_complete_enabled() ?
				local_clock() : 0;
		req->len = 0;
		req->nr_seg = 0;
		req->stable = stable;
		bvq->inflight++;
		found++;
		if (vhost_blk_req_submit(req, out, in)) {
			*sync_tail = &req->node;
			sync_tail = &req->node.next;
		}
		req = NULL;
	} while (likely(!vhost_blk_weighed(bvq, ++reqs, total)));
	if (refused)
		vhost_signal(vq->dev, vq);
	blk_finish_plug(&plug);
	if (req)
		vhost_blk_req_free(bvq, req);
	mutex_unlock(&vq->mutex);

	*sync_tail = NULL;
	llist_for_each_entry_safe(req, next, sync, node)
		vhost_blk_run_sync(req);
	vhost_blk_owner_leave(&saved);
}

static int vhost_blk_log_flush(struct vhost_virtqueue *vq,
			       struct vhost_log *log, unsigned int n, u64 len)
{
	return n ? vhost_log_write(vq, log, n, len, NULL, 0) : 0;
}

/*
 * Live migration: mark the guest pages the request may have written (the
 * whole device-writable part of its chain: data and status byte) in the
 * dirty log.  The request kept host addresses only; each range is looked up
 * in the memory table, in every guest-physical region that maps it.  Runs
 * after the writes and before the used entry is published.  Bounded: at
 * most VHOST_BLK_IOV_MAX ranges times the regions of the table.
 */
static int vhost_blk_log_req(struct vhost_blk_req *req)
{
	struct vhost_virtqueue *vq = &req->bvq->vq;
	struct vhost_log log[VHOST_BLK_LOG_BATCH];
	const struct iovec *iov = req->iov + req->in_first;
	struct vhost_iotlb_map *map;
	unsigned int i, n = 0;
	u64 len = 0;
	int ret = 0;

	if (!vq->umem)
		return -EFAULT;
	for (i = 0; i < req->in_num; i++) {
		u64 start = (u64)(uintptr_t)iov[i].iov_base;
		u64 last = start + iov[i].iov_len - 1;
		bool found = false;

		if (!iov[i].iov_len)
			continue;
		list_for_each_entry(map, &vq->umem->list, link) {
			u64 map_last = map->addr + map->size - 1;
			u64 from, to;

			if (map->addr > last || map_last < start)
				continue;
			found = true;
			from = max(map->addr, start);
			to = min(map_last, last);
			log[n].addr = map->start + (from - map->addr);
			log[n].len = to - from + 1;
			len += log[n].len;
			if (++n < ARRAY_SIZE(log))
				continue;
			if (vhost_blk_log_flush(vq, log, n, len))
				return -EFAULT;
			n = 0;
			len = 0;
		}
		/* The memory table changed under the request: say so. */
		if (unlikely(!found))
			ret = -EFAULT;
	}
	if (vhost_blk_log_flush(vq, log, n, len))
		return -EFAULT;
	return ret;
}

static void vhost_blk_retire(struct vhost_blk_req *req,
			     struct vring_used_elem *used)
{
	struct vhost_blk_vq *bvq = req->bvq;
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vhost_blk_qstats *st = &bvq->stats;

	if (req->bio_pinned)
		vhost_blk_bio_release(req);
	/* The status byte, then the used entry that publishes it. */
	if (put_user(req->status, req->status_ptr))
		vq_err(vq, "vhost-blk: cannot write status of chain %u\n",
		       req->head);
	if (unlikely(vhost_has_feature(vq, VHOST_F_LOG_ALL)) &&
	    vhost_blk_log_req(req))
		vq_err(vq, "vhost-blk: cannot log the writes of chain %u\n",
		       req->head);
	used->id = cpu_to_vhost32(vq, req->head);
	used->len = cpu_to_vhost32(vq, req->used_len);

	st->reqs[req->op]++;
	if (req->status == VIRTIO_BLK_S_OK)
		st->bytes[req->op] += req->len;
	else if (req->status == VIRTIO_BLK_S_UNSUPP)
		st->unsupp++;
	else
		st->ioerr++;
	if (trace_vhost_blk_complete_enabled())
		trace_vhost_blk_complete(bvq->index, req->type, req->sector,
					 req->len, req->status,
					 req->start_ns ?
					 local_clock() - req->start_ns : 0);
}

/*
 * Status bytes and used entries of every completed request, then one guest
 * notification unless it is held (notify.c).  Under vq->mutex, in the
 * owner's address space.
 */
static void vhost_blk_retire_done(struct vhost_blk_vq *bvq)
{
	struct vhost_virtqueue *vq = &bvq->vq;
	struct vring_used_elem used[VHOST_BLK_USED_BATCH];
	struct vhost_blk_req *req, *next;
	struct llist_node *list;
	unsigned int n = 0, total = 0;

	list = llist_reverse_order(llist_del_all(&bvq->done));
#ifdef VHOST_BLK_FAULT_INJECTION
	if (list)
		vhost_blk_fault_retire_delay();
#endif
	llist_for_each_entry_safe(req, next, list, node) {
		vhost_blk_retire(req, &used[n]);
		if (++n == VHOST_BLK_USED_BATCH) {
			vhost_add_used_n(vq, used, NULL, n);
			n = 0;
		}
		bvq->inflight--;
		total++;
		vhost_blk_req_free(bvq, req);
	}
	if (n)
		vhost_add_used_n(vq, used, NULL, n);
	if (total)
		bvq->stats.batches++;
	if (!vhost_blk_irq_hold(bvq, total))
		vhost_signal(vq->dev, vq);
}

/* Completion work: retire what completed, then look at the ring again. */
void vhost_blk_done_work(struct vhost_work *work)
{
	struct vhost_blk_vq *bvq = container_of(work, struct vhost_blk_vq,
						done_work);
	struct vhost_virtqueue *vq = &bvq->vq;
#ifdef VHOST_BLK_FAULT_INJECTION
	bool retired = !llist_empty(&bvq->done);
#endif

	mutex_lock(&vq->mutex);
	vhost_blk_retire_done(bvq);
	if (bvq->throttled && bvq->inflight < vhost_blk_max_inflight) {
		bvq->throttled = false;
		vhost_poll_queue(&vq->poll);
	} else if (bvq->batching && !bvq->batch_probing &&
		   !vhost_vq_avail_empty(vq->dev, vq)) {
		/* Batching: the kick handler looks whether the burst is over. */
		vhost_poll_queue(&vq->poll);
	}
	mutex_unlock(&vq->mutex);
#ifdef VHOST_BLK_FAULT_INJECTION
	if (retired)
		vhost_blk_fault_retire_delay();
#endif
}

struct vhost_blk_orphans {
	struct work_struct work;
	struct vhost_blk *blk;
};

static void vhost_blk_orphans_work(struct work_struct *work)
{
	struct vhost_blk_orphans *o = container_of(work,
						   struct vhost_blk_orphans,
						   work);
	struct vhost_blk *blk = o->blk;
	int i;

	kthread_use_mm(blk->dev.mm);
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_blk_vq *bvq = &blk->vqs[i];

		mutex_lock(&bvq->vq.mutex);
		vhost_blk_retire_done(bvq);
		mutex_unlock(&bvq->vq.mutex);
	}
	kthread_unuse_mm(blk->dev.mm);
}

/* Free finished requests without touching guest memory. */
static void vhost_blk_drop_done(struct vhost_blk_vq *bvq)
{
	struct vhost_blk_req *req, *next;
	struct llist_node *list;

	mutex_lock(&bvq->vq.mutex);
	list = llist_del_all(&bvq->done);
	llist_for_each_entry_safe(req, next, list, node) {
		if (req->bio_pinned)
			vhost_blk_bio_release(req);
		bvq->inflight--;
		vhost_blk_req_free(bvq, req);
	}
	mutex_unlock(&bvq->vq.mutex);
}

/*
 * Teardown, every request's I/O complete: retire what the workers did not.
 * That is nothing unless a worker died with its owner (since 6.4 a vhost
 * worker is a task of the VMM's process, and a SIGKILL ends it) while
 * requests were in flight.  Those are still retired into the used rings,
 * by a kernel thread in the owner's address space, so that a VMM started
 * again finds every request the device fetched completed and none half
 * done.  That address space is the vhost core's dev.mm: it holds a user
 * reference from VHOST_SET_OWNER until vhost_dev_cleanup(), and every drain
 * comes before that (release, VHOST_RESET_OWNER) or runs with an owner.
 */
void vhost_blk_retire_orphans(struct vhost_blk *blk)
{
	struct vhost_blk_orphans o = { .blk = blk };
	bool any = false;
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		any |= !llist_empty(&blk->vqs[i].done);
	if (!any)
		return;
	if (blk->dev.mm) {
		INIT_WORK_ONSTACK(&o.work, vhost_blk_orphans_work);
		queue_work(system_dfl_wq, &o.work);
		flush_work(&o.work);
		destroy_work_on_stack(&o.work);
	}
	/* Without an address space to write to, they are only freed. */
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		vhost_blk_drop_done(&blk->vqs[i]);
}

