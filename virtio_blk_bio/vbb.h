/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio_blk_bio: definitions shared by the probe/config code (main.c), the
 * blk-mq request path (mq.c) and the ->submit_bio path (bio.c).
 */
#ifndef _VIRTIO_BLK_BIO_H
#define _VIRTIO_BLK_BIO_H

#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/completion.h>
#include <linux/mempool.h>
#include <linux/mutex.h>
#include <linux/percpu-refcount.h>
#include <linux/sbitmap.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/virtio.h>
#include <linux/virtio_blk.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "kcompat.h"

/* Most data segments of one bio on the bio path (bounds the request size). */
#define VBB_BIO_MAX_SEGS	64
/* Scatterlist entries embedded in a blk-mq request before chaining. */
#define VBB_MQ_INLINE_SG	2
#define VBB_MAX_DISCARD_SEGS	256u
/*
 * A virtqueue has at most 32768 entries (virtio spec, "Virtqueues"): no
 * request of more data segments, with its header and status, can be
 * described to any device.
 */
#define VBB_MAX_SEG_MAX		(32768u - 2)

struct vbb_breq;
struct vbb_mq_req;

/* Whom the bio path lets in (vbb_dev.state). */
enum vbb_state {
	VBB_LIVE,	/* the rings are up */
	VBB_SUSPENDED,	/* between ->freeze and ->restore: submitters wait */
	VBB_DEAD,	/* removed or not restored: submitters fail */
};

struct vbb_dev;

/* Work waiting for a flush (bio path). */
struct vbb_fwait {
	struct vbb_fwait *next;
	void (*done)(struct vbb_dev *vb, struct vbb_fwait *fw, blk_status_t st);
};

/* One virtqueue and everything serialised by its lock. */
struct vbb_vq {
	struct virtqueue *vq;
	spinlock_t lock;
	/* bio path: continuation stages that found the ring full */
	struct vbb_breq *deferred_head;
	struct vbb_breq *deferred_tail;
	/* bio path: requests added under a plug and not yet kicked */
	bool kick_pending;
	/* bio path: submitters waiting for ring space, in arrival order */
	struct list_head waiters;
	/* bio path: requests the device holds, oldest first */
	struct list_head busy;
	/* bio path: retired request contexts kept for reuse (VBB_SPARE_MAX) */
	struct vbb_breq *spare;
	unsigned int nr_spare;
	/* statistics, under lock */
	u64 added;
	u64 kick_tries;
	u64 notifies;
	u64 full;
	char name[16];
} ____cacheline_aligned_in_smp;

struct vbb_dev {
	struct virtio_device *vdev;
	/* serialises config access against removal; vdev is NULL once gone */
	struct mutex vdev_mutex;
	struct gendisk *disk;
	struct work_struct config_work;
	int index;
	bool bio_path;
	/* given up (vbb_kill()) or not restored: every request fails */
	bool killed;
	/* given up because the transport broke it: not there to be reset */
	bool gone;
	/* a request older than this (jiffies): vbb_timed_out(); 0: never */
	unsigned long timeout;

	unsigned int num_vqs;
	/* num_vqs while suspended (the rings are gone, num_vqs is 0) */
	unsigned int frozen_vqs;
	unsigned int io_queues[HCTX_MAX_TYPES];
	struct vbb_vq *vqs;

	/* blk-mq path */
	struct blk_mq_tag_set tag_set;
	/* the hardware context of each virtqueue (->init_hctx) */
	struct blk_mq_hw_ctx **hctx;

	/* bio path */
	unsigned int *cpu_vq;
	mempool_t *breq_pool;
	/* split PREFLUSH/FUA writes */
	mempool_t *split_pool;
	/* plug callbacks, in use where their bit in plug_map is set */
	struct blk_plug_cb *plug_cbs;
	struct sbitmap plug_map;
	bool plug_map_live;
	unsigned int nr_plug_cbs;
	/*
	 * One reference per bio in progress, GET_ID and armed plug callback;
	 * killed by vbb_bio_drain(), whose wait ends when the last one is
	 * dropped (drained completes).
	 */
	struct percpu_ref ref;
	bool ref_live;
	struct completion drained;
	/* enum vbb_state, changed under state_lock; waiters on state_wq */
	spinlock_t state_lock;
	unsigned int state;
	wait_queue_head_t state_wq;
	/* looks for a request older than timeout */
	struct delayed_work watchdog;
	/* adds deferred stages to a ring that holds nothing */
	struct delayed_work retry;
	/*
	 * The one flush request, shared: flush_covered wait for the flush in
	 * flight (flush_running), flush_pending for the next. Under flush_lock.
	 */
	spinlock_t flush_lock;
	struct vbb_breq *flush_br;
	bool flush_running;
	struct vbb_fwait *flush_covered;
	struct vbb_fwait *flush_pending;
	struct vbb_fwait **flush_pending_tail;
	atomic64_t preflushes;
	atomic64_t fua_flushes;
	atomic64_t flushes;
};

/* main.c */
extern unsigned int vbb_queue_depth;
extern struct workqueue_struct *vbb_wq;
blk_status_t vbb_status_to_blk(u8 status);
unsigned int vbb_ring_size(struct vbb_dev *vb);
bool vbb_ring_empty(struct vbb_vq *q);
void vbb_limits_default(struct vbb_dev *vb, struct queue_limits *lim);
int vbb_read_limits(struct vbb_dev *vb, struct queue_limits *lim);
unsigned int vbb_disk_features(struct vbb_dev *vb);
bool vbb_cache_writeback(struct virtio_device *vdev);
void vbb_notify_prepared(struct vbb_vq *vq, bool kick);
void vbb_kill(struct vbb_dev *vb, bool reset, const char *why);
bool vbb_timed_out(struct vbb_dev *vb);

/* mq.c */
void vbb_mq_done(struct virtqueue *vq);
struct gendisk *vbb_mq_create_disk(struct vbb_dev *vb,
				   struct queue_limits *lim);
void vbb_mq_destroy(struct vbb_dev *vb);
int vbb_mq_get_id(struct vbb_dev *vb, char *buf);
struct vbb_mq_req *vbb_mq_take_all(struct vbb_dev *vb);
void vbb_mq_fail_all(struct vbb_dev *vb, struct vbb_mq_req *chain);

/* bio.c */
int vbb_bio_cache_init(void);
void vbb_bio_cache_exit(void);
void vbb_bio_done(struct virtqueue *vq);
struct gendisk *vbb_bio_create_disk(struct vbb_dev *vb,
				    struct queue_limits *lim);
void vbb_bio_set_state(struct vbb_dev *vb, enum vbb_state state);
void vbb_bio_drain(struct vbb_dev *vb);
void vbb_bio_reopen(struct vbb_dev *vb);
void vbb_bio_destroy(struct vbb_dev *vb);
int vbb_bio_get_id(struct vbb_dev *vb, char *buf);
void vbb_bio_submit(struct bio *bio);
int vbb_bio_poll(struct bio *bio, struct io_comp_batch *iob,
		 unsigned int flags);
struct vbb_breq *vbb_bio_take_all(struct vbb_dev *vb);
void vbb_bio_fail_all(struct vbb_dev *vb, struct vbb_breq *chain);

#endif /* _VIRTIO_BLK_BIO_H */
