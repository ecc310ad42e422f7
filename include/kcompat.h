/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compatibility shims of the supported kernels: 7.3, 6.12 LTS and 6.1 LTS.
 * The code is written against the newest kernel's API; what an older kernel
 * lacks or spells differently is provided here, in its newer form, as the
 * kernel's backports project does.  Every version test of the project lives
 * in this header, but for two feature tests in vhost_blk that no shim can
 * carry (a struct field and case labels that older kernels lack):
 * _LINUX_RW_HINT_H (bio write hints, 6.9) and VHOST_NEW_WORKER (6.5).
 * scripts/upstream.sh resolves those with unifdef, as 7.3 has them, and
 * drops this header.  Kernels between 6.12 and 7.3 are not supported: a shim's
 * version is where the change went upstream, tested on 6.1, 6.12 and 7.3.
 */
#ifndef _VHOST_BLK_KCOMPAT_H
#define _VHOST_BLK_KCOMPAT_H

#include <linux/hrtimer.h>
#include <linux/version.h>

/*
 * True when the kernel built for is older than MAJOR.MINOR: the version
 * LINUX_VERSION_CODE carries, from the parts <linux/version.h> gives.
 */
#define KCOMPAT_BEFORE(major, minor)					\
	(KERNEL_VERSION(LINUX_VERSION_MAJOR, LINUX_VERSION_PATCHLEVEL, 0) < \
	 KERNEL_VERSION(major, minor, 0))

/*
 * 6.13 added hrtimer_setup(), which takes the callback with the clock and
 * the mode; hrtimer_init() and assigning ->function went later.
 */
#if KCOMPAT_BEFORE(6, 13)
static inline void
kcompat_hrtimer_setup(struct hrtimer *timer,
		      enum hrtimer_restart (*function)(struct hrtimer *),
		      clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}

#define hrtimer_setup kcompat_hrtimer_setup
#endif

/* ---- both modules ---- */
/*
 * Newer kernels have kzalloc_obj() and friends, which size the allocation
 * from the object they are given; elsewhere, the same from sizeof().
 */
#include <linux/slab.h>

#ifndef kzalloc_obj
#define kzalloc_obj(obj, gfp)	kzalloc(sizeof(obj), gfp)
#endif
#ifndef kvzalloc_obj
#define kvzalloc_obj(obj, gfp)	kvzalloc(sizeof(obj), gfp)
#endif

/*
 * 6.17 named the unbound system workqueue system_dfl_wq; 7.2 warns when work
 * is queued on it under its old name.
 */
#if KCOMPAT_BEFORE(6, 17)
#include <linux/workqueue.h>
#define system_dfl_wq system_unbound_wq
#endif

/* ---- vhost_blk: vhost core shims (owner: vhost_blk) ---- */
#ifdef KCOMPAT_VHOST_BLK
#include <linux/bio.h>
#include <linux/blk_types.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <linux/vhost.h>
#include <linux/virtio_ring.h>
#include "vhost.h"

/*
 * 6.17 (in-order virtqueues) gave vhost_add_used_n() @nheads, the number of
 * descriptors of each used head; NULL, the only value vhost_blk passes (it
 * does not offer VIRTIO_F_IN_ORDER), writes the used ring as before.
 */
#if KCOMPAT_BEFORE(6, 17)
static inline int kcompat_vhost_add_used_n(struct vhost_virtqueue *vq,
					   struct vring_used_elem *heads,
					   u16 *nheads, unsigned int count)
{
	WARN_ON_ONCE(nheads);
	return vhost_add_used_n(vq, heads, count);
}

#define vhost_add_used_n kcompat_vhost_add_used_n
#endif

/*
 * bio_iov_iter_get_pages() checks the alignment of the buffer itself since
 * 6.18, which removed bdev_iter_is_aligned() (and iov_iter_is_aligned()); in
 * 7.3 it takes the memory alignment mask (each segment's address and length)
 * and the length alignment mask (the total), and fails a misaligned buffer
 * with -EINVAL.  Before, the caller checked the buffer with
 * iov_iter_is_aligned(), the length mask applying to each segment.
 *
 * 7.3 no longer exports it to modules: the same, for a user buffer, from
 * what it does export (iov_iter_extract_bvecs(), which checks the memory
 * alignment).  What the module does not need is left out: kernel (bvec)
 * iterators, P2P DMA pages.  A total off the length mask is refused, not
 * trimmed: vhost_blk takes all of a buffer or none of it.
 */
#if KCOMPAT_BEFORE(6, 18)
static inline int kcompat_bio_iov_iter_get_pages(struct bio *bio,
						 struct iov_iter *iter,
						 unsigned int mem_align_mask,
						 unsigned int len_align_mask)
{
	if (!iov_iter_is_aligned(iter, mem_align_mask, len_align_mask))
		return -EINVAL;
	return bio_iov_iter_get_pages(bio, iter);
}
#else
static inline int kcompat_bio_iov_iter_get_pages(struct bio *bio,
						 struct iov_iter *iter,
						 unsigned int mem_align_mask,
						 unsigned int len_align_mask)
{
	ssize_t ret;

	if (WARN_ON_ONCE(iov_iter_is_bvec(iter)))
		return -EINVAL;
	if (iov_iter_extract_will_pin(iter))
		bio_set_flag(bio, BIO_PAGE_PINNED);
	do {
		ret = iov_iter_extract_bvecs(iter, bio->bi_io_vec,
					     UINT_MAX - bio->bi_iter.bi_size,
					     &bio->bi_vcnt, bio->bi_max_vecs,
					     mem_align_mask, 0);
		if (ret < 0)
			return ret;	/* the caller releases what was taken */
		if (!ret)
			break;
		bio->bi_iter.bi_size += ret;
	} while (iov_iter_count(iter) && bio->bi_vcnt < bio->bi_max_vecs);
	if (!bio->bi_vcnt)
		return -EFAULT;
	return bio->bi_iter.bi_size & len_align_mask ? -EINVAL : 0;
}
#endif
#define bio_iov_iter_get_pages kcompat_bio_iov_iter_get_pages

/*
 * 6.5 brought per-virtqueue workers together with the multi-worker ioctls,
 * so the uapi VHOST_NEW_WORKER tells the two vhost cores apart.  vhost_blk
 * calls the per-virtqueue functions; before 6.5 they go to the device's one
 * kthread, alive until vhost_dev_cleanup().  (The worker ioctls themselves
 * are only handled where VHOST_NEW_WORKER is defined.)
 */
#ifndef VHOST_NEW_WORKER
static inline bool kcompat_vhost_vq_work_queue(struct vhost_virtqueue *vq,
					       struct vhost_work *work)
{
	vhost_work_queue(vq->dev, work);
	return true;
}

#define vhost_vq_work_queue kcompat_vhost_vq_work_queue

/* The device's one worker serves every queue. */
static inline bool kcompat_vhost_vq_has_work(struct vhost_virtqueue *vq)
{
	return vhost_has_work(vq->dev);
}

#define vhost_vq_has_work kcompat_vhost_vq_has_work
#endif

/*
 * vhost_vq_wants_signal(): whether vhost_signal() would interrupt the guest
 * now, without its barrier and without recording a signal. The vhost core
 * of no released kernel has it (the upstream series adds it): the same,
 * from the ring at the owner's address (no IOTLB: vhost_blk does not offer
 * VIRTIO_F_ACCESS_PLATFORM). A wrong guess only decides whether a queue
 * holds the interrupt or sends it now.
 */
static inline bool kcompat_vhost_vq_wants_signal(struct vhost_virtqueue *vq)
{
	__virtio16 raw;

	if (!vhost_has_feature(vq, VIRTIO_RING_F_EVENT_IDX)) {
		if (get_user(raw, &vq->avail->flags))
			return true;
		return !(vhost16_to_cpu(vq, raw) & VRING_AVAIL_F_NO_INTERRUPT);
	}
	if (!vq->signalled_used_valid)
		return true;
	/* used_event follows the avail ring's last entry. */
	if (get_user(raw, &vq->avail->ring[vq->num]))
		return true;
	return vring_need_event(vhost16_to_cpu(vq, raw), vq->last_used_idx,
				vq->signalled_used);
}

#define vhost_vq_wants_signal kcompat_vhost_vq_wants_signal

#endif /* KCOMPAT_VHOST_BLK */
/* ---- end vhost_blk ---- */

/* ---- virtio_blk_bio: block layer / virtio shims (owner: virtio_blk_bio) ---- */
#ifdef KCOMPAT_VIRTIO_BLK_BIO
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/slab.h>
#include <linux/virtio_config.h>

/*
 * 6.17 added WQ_PERCPU, and 7.x warns about a workqueue that names neither
 * it nor WQ_UNBOUND; before, per-CPU was what no flag meant.
 */
#if KCOMPAT_BEFORE(6, 17)
#define WQ_PERCPU	0
#endif

/*
 * 6.14 mapped CPUs to hardware queues by the bus's interrupt affinity for
 * every bus, blk_mq_map_hw_queues(), and removed the per-bus helpers, among
 * them <linux/blk-mq-virtio.h>.  Only a virtio device reaches this one.
 */
#if KCOMPAT_BEFORE(6, 14)
#include <linux/blk-mq-virtio.h>

static inline void kcompat_blk_mq_map_hw_queues(struct blk_mq_queue_map *qmap,
						struct device *dev,
						unsigned int offset)
{
	blk_mq_virtio_map_queues(qmap, dev_to_virtio(dev), offset);
}

#define blk_mq_map_hw_queues kcompat_blk_mq_map_hw_queues
#endif

/*
 * 6.14: blk_mq_freeze_queue() saves the task's memory allocation flags and
 * returns them, blk_mq_unfreeze_queue() restores them; and merging became
 * what every queue does, BLK_MQ_F_SHOULD_MERGE went.
 */
#if KCOMPAT_BEFORE(6, 14)
static inline unsigned int __must_check
kcompat_blk_mq_freeze_queue(struct request_queue *q)
{
	blk_mq_freeze_queue(q);
	return 0;
}

#define blk_mq_freeze_queue kcompat_blk_mq_freeze_queue

static inline void kcompat_blk_mq_unfreeze_queue(struct request_queue *q,
						 unsigned int memflags)
{
	blk_mq_unfreeze_queue(q);
}

#define blk_mq_unfreeze_queue kcompat_blk_mq_unfreeze_queue

static inline int kcompat_blk_mq_alloc_tag_set(struct blk_mq_tag_set *set)
{
	set->flags |= BLK_MQ_F_SHOULD_MERGE;
	return blk_mq_alloc_tag_set(set);
}

#define blk_mq_alloc_tag_set kcompat_blk_mq_alloc_tag_set
#endif

/* 6.15: blk_rq_map_sg() takes the queue from the request. */
#if KCOMPAT_BEFORE(6, 15)
static inline int kcompat_blk_rq_map_sg(struct request *rq,
					struct scatterlist *sglist)
{
	return blk_rq_map_sg(rq->q, rq, sglist);
}

#define blk_rq_map_sg kcompat_blk_rq_map_sg
#endif

/* 6.16: blk_rq_map_kern() takes the queue from the request. */
#if KCOMPAT_BEFORE(6, 16)
static inline int kcompat_blk_rq_map_kern(struct request *rq, void *kbuf,
					  unsigned int len, gfp_t gfp)
{
	return blk_rq_map_kern(rq->q, rq, kbuf, len, gfp);
}

#define blk_rq_map_kern kcompat_blk_rq_map_kern
#endif

/*
 * 6.18: ->getgeo() is given the gendisk instead of a block device.  The
 * driver's method takes the gendisk; KCOMPAT_GETGEO() names what goes into
 * block_device_operations, and on older kernels KCOMPAT_DEFINE_GETGEO()
 * defines that, a wrapper taking the block device.  Both check the method's
 * prototype.
 */
#if KCOMPAT_BEFORE(6, 18)
#define KCOMPAT_GETGEO(fn)	fn##_bdev
#define KCOMPAT_DEFINE_GETGEO(fn)					\
	static int fn##_bdev(struct block_device *bdev,			\
			     struct hd_geometry *geo)			\
	{								\
		return fn(bdev->bd_disk, geo);				\
	}								\
	static_assert(__same_type(&(fn), int (*)(struct gendisk *,	\
						 struct hd_geometry *)))
#else
#define KCOMPAT_GETGEO(fn)	fn
#define KCOMPAT_DEFINE_GETGEO(fn)					\
	static_assert(__same_type(&(fn), int (*)(struct gendisk *,	\
						 struct hd_geometry *)))
#endif

/* Queue features, translated to BLK_FEAT_* (6.11+) or queue flags (6.1). */
#define VBB_FEAT_WRITE_CACHE	BIT(0)
#define VBB_FEAT_FUA		BIT(1)
#define VBB_FEAT_NOWAIT		BIT(2)
#define VBB_FEAT_IO_STAT	BIT(3)
/*
 * REQ_POLLED bios reach ->submit_bio and bio_poll() calls ->poll_bio. 6.1
 * clears REQ_POLLED on a queue without QUEUE_FLAG_POLL and 6.12 fails such
 * bios with BLK_STS_NOTSUPP: the flag makes both take them.
 */
#define VBB_FEAT_POLL		BIT(4)

/*
 * BLK_FEAT_* (queue_limits.features) and struct virtqueue_info both arrived
 * in 6.11, struct rq_list in 6.12; of the supported kernels only 6.12 has
 * them. The feature macro is tested instead of the version number.
 */
#ifdef BLK_FEAT_WRITE_CACHE
#define VBB_BLK_API_6_12	1
#else
#define VBB_BLK_API_6_12	0
#endif

#if VBB_BLK_API_6_12
static inline int vbb_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
			       struct virtqueue *vqs[],
			       vq_callback_t *callbacks[],
			       const char * const names[],
			       struct irq_affinity *desc)
{
	struct virtqueue_info *info;
	unsigned int i;
	int err;

	info = kcalloc(nvqs, sizeof(*info), GFP_KERNEL);
	if (!info)
		return -ENOMEM;
	for (i = 0; i < nvqs; i++) {
		info[i].callback = callbacks[i];
		info[i].name = names[i];
	}
	err = virtio_find_vqs(vdev, nvqs, vqs, info, desc);
	kfree(info);
	return err;
}
#else
static inline int vbb_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
			       struct virtqueue *vqs[],
			       vq_callback_t *callbacks[],
			       const char * const names[],
			       struct irq_affinity *desc)
{
	return virtio_find_vqs(vdev, nvqs, vqs, callbacks, names, desc);
}
#endif

#if VBB_BLK_API_6_12
static inline void vbb_lim_set_features(struct queue_limits *lim,
					unsigned int feat)
{
	if (feat & VBB_FEAT_WRITE_CACHE)
		lim->features |= BLK_FEAT_WRITE_CACHE;
	if (feat & VBB_FEAT_FUA)
		lim->features |= BLK_FEAT_FUA;
	if (feat & VBB_FEAT_NOWAIT)
		lim->features |= BLK_FEAT_NOWAIT;
	if (feat & VBB_FEAT_IO_STAT)
		lim->features |= BLK_FEAT_IO_STAT;
	if (feat & VBB_FEAT_POLL)
		lim->features |= BLK_FEAT_POLL;
}

static inline struct gendisk *vbb_alloc_mq_disk(struct blk_mq_tag_set *set,
						struct queue_limits *lim,
						unsigned int feat, void *qd)
{
	vbb_lim_set_features(lim, feat);
	return blk_mq_alloc_disk(set, lim, qd);
}

static inline struct gendisk *vbb_alloc_bio_disk(struct queue_limits *lim,
						 unsigned int feat, int node)
{
	vbb_lim_set_features(lim, feat);
	return blk_alloc_disk(lim, node);
}

static inline int vbb_set_write_cache(struct request_queue *q, bool wc,
				      bool fua)
{
	struct queue_limits lim = queue_limits_start_update(q);

	lim.features &= ~(BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA);
	if (wc)
		lim.features |= BLK_FEAT_WRITE_CACHE;
	if (wc && fua)
		lim.features |= BLK_FEAT_FUA;
	return queue_limits_commit_update_frozen(q, &lim);
}

/* 6.12 frees a bio of the per-CPU cache in interrupt context too. */
static inline void vbb_bio_polled(struct bio *bio)
{
}

/* Nothing to do: blk_mq_start_request() records the request in its tags. */
static inline void vbb_rq_claim_tag(struct request *rq)
{
}

/* ->queue_rqs() list: struct rq_list since 6.12. */
#define vbb_queue_rqs_arg_t struct rq_list
struct vbb_rq_list {
	struct rq_list l;
};

static inline void vbb_rq_list_take(struct vbb_rq_list *dst,
				    vbb_queue_rqs_arg_t *arg)
{
	dst->l = *arg;
	rq_list_init(arg);
}

static inline void vbb_rq_list_give(vbb_queue_rqs_arg_t *arg,
				    struct vbb_rq_list *src)
{
	*arg = src->l;
}

static inline struct request *vbb_rq_list_pop(struct vbb_rq_list *rl)
{
	return rq_list_pop(&rl->l);
}

static inline void vbb_rq_list_add_tail(struct vbb_rq_list *rl,
					struct request *rq)
{
	rq_list_add_tail(&rl->l, rq);
}
#else
static inline void vbb_apply_limits(struct request_queue *q,
				    const struct queue_limits *lim,
				    unsigned int feat)
{
	blk_queue_logical_block_size(q, lim->logical_block_size);
	if (lim->physical_block_size)
		blk_queue_physical_block_size(q, lim->physical_block_size);
	if (lim->alignment_offset)
		blk_queue_alignment_offset(q, lim->alignment_offset);
	if (lim->io_min)
		blk_queue_io_min(q, lim->io_min);
	if (lim->io_opt)
		blk_queue_io_opt(q, lim->io_opt);
	blk_queue_max_segments(q, lim->max_segments);
	blk_queue_max_segment_size(q, lim->max_segment_size);
	blk_queue_max_hw_sectors(q, lim->max_hw_sectors);
	if (lim->max_hw_discard_sectors) {
		blk_queue_max_discard_sectors(q, lim->max_hw_discard_sectors);
		blk_queue_max_discard_segments(q, lim->max_discard_segments);
		q->limits.discard_granularity = lim->discard_granularity;
	}
	if (lim->max_write_zeroes_sectors)
		blk_queue_max_write_zeroes_sectors(q,
						   lim->max_write_zeroes_sectors);
	blk_queue_write_cache(q, feat & VBB_FEAT_WRITE_CACHE,
			      feat & VBB_FEAT_FUA);
	if (feat & VBB_FEAT_NOWAIT)
		blk_queue_flag_set(QUEUE_FLAG_NOWAIT, q);
	if (feat & VBB_FEAT_IO_STAT)
		blk_queue_flag_set(QUEUE_FLAG_IO_STAT, q);
	if (feat & VBB_FEAT_POLL)
		blk_queue_flag_set(QUEUE_FLAG_POLL, q);
	blk_queue_flag_set(QUEUE_FLAG_NONROT, q);
}

static inline struct gendisk *vbb_alloc_mq_disk(struct blk_mq_tag_set *set,
						struct queue_limits *lim,
						unsigned int feat, void *qd)
{
	struct gendisk *disk = blk_mq_alloc_disk(set, qd);

	if (!IS_ERR(disk))
		vbb_apply_limits(disk->queue, lim, feat);
	return disk;
}

static inline struct gendisk *vbb_alloc_bio_disk(struct queue_limits *lim,
						 unsigned int feat, int node)
{
	struct gendisk *disk = blk_alloc_disk(node);

	if (!disk)
		return ERR_PTR(-ENOMEM);
	vbb_apply_limits(disk->queue, lim, feat);
	return disk;
}

static inline int vbb_set_write_cache(struct request_queue *q, bool wc,
				      bool fua)
{
	blk_queue_write_cache(q, wc, wc && fua);
	return 0;
}

/*
 * A REQ_POLLED bio may come from the per-CPU bio cache (REQ_ALLOC_CACHE),
 * whose bios 6.1 frees in task context only (bio_put() warns otherwise); this
 * path completes them from the interrupt as well as from ->poll_bio: the bio
 * is freed to its bio_set instead, as the core does when it turns polling
 * off.
 */
static inline void vbb_bio_polled(struct bio *bio)
{
	bio->bi_opf &= ~REQ_ALLOC_CACHE;
}

/*
 * A request that ->queue_rqs() issues has not been through the core's
 * dispatch, which records each request in its tags (tags->rqs[]): until 6.12
 * the driver does it, or the tag iterators, blk-mq's timeout handling among
 * them, do not see the request.
 */
static inline void vbb_rq_claim_tag(struct request *rq)
{
	rq->mq_hctx->tags->rqs[rq->tag] = rq;
}

/* ->queue_rqs() list: a bare rq_next chain before 6.12. */
#define vbb_queue_rqs_arg_t struct request *
struct vbb_rq_list {
	struct request *head;
	struct request *tail;
};

static inline void vbb_rq_list_take(struct vbb_rq_list *dst,
				    vbb_queue_rqs_arg_t *arg)
{
	dst->head = *arg;
	dst->tail = NULL;
	*arg = NULL;
}

static inline void vbb_rq_list_give(vbb_queue_rqs_arg_t *arg,
				    struct vbb_rq_list *src)
{
	*arg = src->head;
}

static inline struct request *vbb_rq_list_pop(struct vbb_rq_list *rl)
{
	struct request *rq = rl->head;

	if (rq) {
		rl->head = rq->rq_next;
		if (!rl->head)
			rl->tail = NULL;
		rq->rq_next = NULL;
	}
	return rq;
}

static inline void vbb_rq_list_add_tail(struct vbb_rq_list *rl,
					struct request *rq)
{
	rq->rq_next = NULL;
	if (rl->tail)
		rl->tail->rq_next = rq;
	else
		rl->head = rq;
	rl->tail = rq;
}
#endif
#endif /* KCOMPAT_VIRTIO_BLK_BIO */
/* ---- end virtio_blk_bio ---- */

#endif /* _VHOST_BLK_KCOMPAT_H */
