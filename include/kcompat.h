/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compatibility shims between the supported kernels (6.1 LTS and 6.12 LTS).
 * Every version test of the project lives in this header.
 */
#ifndef _VHOST_BLK_KCOMPAT_H
#define _VHOST_BLK_KCOMPAT_H

#include <linux/version.h>

/* ---- vhost_blk: vhost core shims (owner: vhost_blk) ---- */
#ifdef KCOMPAT_VHOST_BLK
#include <linux/blk_types.h>
#include <linux/fs.h>
#include <linux/vhost.h>
#include "vhost.h"

/*
 * 6.5 brought per-virtqueue workers together with the multi-worker ioctls,
 * so the uapi VHOST_NEW_WORKER tells the two vhost cores apart.
 */
#ifdef VHOST_NEW_WORKER
/*
 * Queue a work on the worker serving @vq.  Returns false once the worker
 * was killed together with its owner.
 */
static inline bool vhost_blk_vq_work_queue(struct vhost_virtqueue *vq,
					   struct vhost_work *work)
{
	return vhost_vq_work_queue(vq, work);
}

/* Anything queued on the worker serving @vq, this queue's or another's. */
static inline bool vhost_blk_vq_has_work(struct vhost_virtqueue *vq)
{
	return vhost_vq_has_work(vq);
}

static inline bool vhost_blk_is_worker_ioctl(unsigned int ioctl)
{
	return ioctl == VHOST_NEW_WORKER || ioctl == VHOST_FREE_WORKER ||
	       ioctl == VHOST_ATTACH_VRING_WORKER ||
	       ioctl == VHOST_GET_VRING_WORKER;
}

static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	return vhost_worker_ioctl(dev, ioctl, argp);
}
#else
/* One device-wide kthread, alive until vhost_dev_cleanup(). */
static inline bool vhost_blk_vq_work_queue(struct vhost_virtqueue *vq,
					   struct vhost_work *work)
{
	vhost_work_queue(vq->dev, work);
	return true;
}

/* The device's one worker serves every queue. */
static inline bool vhost_blk_vq_has_work(struct vhost_virtqueue *vq)
{
	return vhost_has_work(vq->dev);
}

static inline bool vhost_blk_is_worker_ioctl(unsigned int ioctl)
{
	return false;
}

static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	return -ENOIOCTLCMD;
}
#endif

/*
 * Bios carry the inode's write hint again since 6.9, which moved the hints
 * to a header of their own (<linux/rw_hint.h>, included by blk_types.h).
 */
#ifdef _LINUX_RW_HINT_H
static inline void vhost_blk_bio_write_hint(struct bio *bio,
					    struct inode *inode)
{
	bio->bi_write_hint = inode->i_write_hint;
}
#else
static inline void vhost_blk_bio_write_hint(struct bio *bio,
					    struct inode *inode)
{
}
#endif
#endif /* KCOMPAT_VHOST_BLK */
/* ---- end vhost_blk ---- */

/* ---- virtio_blk_bio: block layer / virtio shims (owner: virtio_blk_bio) ---- */
#ifdef KCOMPAT_VIRTIO_BLK_BIO
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/slab.h>
#include <linux/virtio_config.h>

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
