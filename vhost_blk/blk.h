/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost_blk: internal definitions shared by the device (blk.c), the request
 * path (req.c), direct bios (bio.c) and the statistics (stats.c).
 */
#ifndef _VHOST_BLK_BLK_H
#define _VHOST_BLK_BLK_H

#include <linux/bio.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/llist.h>
#include <linux/memcontrol.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/uio.h>
#include <linux/wait.h>
#include <linux/virtio_blk.h>

#include "vhost.h"
#define KCOMPAT_VHOST_BLK
#include "kcompat.h"
#include <linux/vhost_blk.h>

/* Descriptors the guest may use for data (config.seg_max). */
#define VHOST_BLK_SEG_MAX		126
/*
 * Bytes per data descriptor (config.size_max): a driver that keeps to
 * seg_max and size_max never asks for more than one kernel I/O takes
 * (MAX_RW_COUNT); 126 x 16 MiB is 2016 MiB.
 */
#define VHOST_BLK_SIZE_MAX		(16U << 20)
/* iovecs per request: data + header + status, with room for splits. */
#define VHOST_BLK_IOV_MAX		240
/* Discard / write-zeroes ranges per request. */
#define VHOST_BLK_MAX_DWZ_SEG		16
/* Sectors per discard / write-zeroes range: 2 GiB. */
#define VHOST_BLK_MAX_DWZ_SECTORS	(SZ_2G >> SECTOR_SHIFT)
/* Requests one queue handles before yielding its worker. */
#define VHOST_BLK_WEIGHT		256
/* Bytes one queue handles before yielding its worker. */
#define VHOST_BLK_BYTE_WEIGHT		(16 << 20)
/* No look at a filling ring comes sooner than this after the last. */
#define VHOST_BLK_BATCH_LOOK_MIN_NS	(2 * NSEC_PER_USEC)
/* The first look at a filling ring, in parts of batch_delay_us ... */
#define VHOST_BLK_BATCH_LOOKS		32
/* ... or in the guest's request gaps, once it has shown its pace ... */
#define VHOST_BLK_BATCH_TURNAROUND	4
/*
 * ... or, once a wait has seen its whole burst come, this much sooner than
 * that wait took (a part of it): a shorter first look each time it finds
 * the burst whole.
 */
#define VHOST_BLK_BATCH_SOONER		8
/*
 * A queue serving single requests waits once in this many passes, and
 * after each such wait that found no burst, half as often, down to once
 * in VHOST_BLK_BATCH_PROBE_MAX.
 */
#define VHOST_BLK_BATCH_PROBE		8
#define VHOST_BLK_BATCH_PROBE_MAX	1024
/* A slow guest's wait: this many times its time for the expected burst. */
#define VHOST_BLK_BATCH_PACE		2
/* Dirty-log ranges handed to vhost_log_write() at a time. */
#define VHOST_BLK_LOG_BATCH		16
/* Completions written to the used ring per vhost_add_used_n() call. */
#define VHOST_BLK_USED_BATCH		64
/* Busy polling spins this long at a time (then requeues its handler). */
#define VHOST_BLK_POLL_SLICE_NS		(50 * NSEC_PER_USEC)
/* Pages of a request submitted as a bio of its own (bio.c). */
#define VHOST_BLK_BIO_VECS		16
/* Retired requests a queue keeps for its next ones (about 4.5 KiB each). */
#define VHOST_BLK_SPARE_MAX		64

/* Request types, indexes of the statistics counters. */
enum vhost_blk_op {
	VHOST_BLK_OP_IN,
	VHOST_BLK_OP_OUT,
	VHOST_BLK_OP_FLUSH,
	VHOST_BLK_OP_GET_ID,
	VHOST_BLK_OP_DISCARD,
	VHOST_BLK_OP_WRITE_ZEROES,
	VHOST_BLK_OP_OTHER,
	VHOST_BLK_OP_NR,
};

/* Per-queue counters, written only by the queue's worker under vq->mutex. */
struct vhost_blk_qstats {
	u64 reqs[VHOST_BLK_OP_NR];
	u64 bytes[VHOST_BLK_OP_NR];
	u64 ioerr;
	u64 unsupp;
	u64 bad_chain;
	u64 batches;
	u64 throttled;
	u64 batch_waits;	/* delayed looks at the ring (batch_delay_us) */
	u64 batch_found;	/* ... that found requests */
	u64 batch_looks;	/* looks that found the guest still queuing */
	u64 batch_timeouts;	/* waits that ran to their bound */
	u64 poll_found;		/* requests found by busy polling */
	u64 bios;		/* reads and writes submitted as bios */
	u64 irq_held;		/* completion runs whose interrupt waited */
	u64 irq_timeouts;	/* ... interrupts sent when irq_delay_us passed */
};

/*
 * An attached backend file; immutable while queues use it (capacity changes
 * only with every queue drained: VHOST_BLK_SET_CAPACITY).
 */
struct vhost_blk_backend_file {
	struct file *file;
	/* Who attached it (the owner): the identity of kthread workers. */
	const struct cred *cred;
	struct mem_cgroup *memcg;
	u64 capacity;		/* 512-byte sectors */
	u32 blk_size;
	bool ro;
	bool direct;
	bool bdev;
	bool bio;		/* reads and writes may go as bios (bio.c) */
};

/*
 * A backend is a regular file or a block device; writes to a regular file
 * hold its file system's freeze protection (kiocb_start_write()).
 */
static inline bool
vhost_blk_be_regular(const struct vhost_blk_backend_file *be)
{
	return !be->bdev;
}

struct vhost_blk;

struct vhost_blk_vq {
	struct vhost_virtqueue vq;
	struct vhost_blk *blk;
	/* Backend requests use; under vq.mutex. */
	struct vhost_blk_backend_file *be;
	/*
	 * What a completion writes, on any CPU, on a line of its own: the
	 * completed requests, the count of requests submitted whose I/O has
	 * not completed yet, and the work that retires them.
	 */
	struct llist_head done ____cacheline_aligned_in_smp;
	atomic_t pending;
	struct vhost_work done_work;
	/* Requests fetched and not yet retired; under vq.mutex. */
	unsigned int inflight ____cacheline_aligned_in_smp;
	/* Retired requests kept for reuse, linked by node; under vq.mutex. */
	struct llist_node *spare;
	unsigned int nr_spare;
	bool throttled;
	/*
	 * The guest's notifications are off while the queue is busy, and
	 * batch_timer looks at the ring again (req.c, batching); under
	 * vq.mutex.
	 */
	bool batching;
	u16 batch_expect;	/* requests the burst should bring */
	u16 batch_singles;	/* passes of one request in a row, unwaited */
	u16 batch_probe_every;	/* ... before one waits all the same */
	bool batch_probing;	/* this wait began at such a pass */
	u16 batch_seen;		/* the avail index at the last look */
	ktime_t batch_deadline;	/* no longer than batch_bound_ns */
	u64 batch_bound_ns;	/* the longest this wait may take */
	ktime_t batch_grown;	/* the guest's pace is timed from here */
	bool batch_still;	/* the last look found it not grown */
	u64 batch_step_ns;	/* and for how long */
	u64 batch_gap_ns;	/* the guest's last time per request */
	ktime_t batch_begun;	/* this wait began */
	u64 batch_whole_ns;	/* a wait's time to its whole burst, or 0 */
	bool batch_first;	/* the next look is the wait's first, timed so */
	struct hrtimer batch_timer;
	/* Busy polling goes on until then (local_clock()); under vq.mutex. */
	u64 poll_end_ns;
	bool poll_resumed;	/* this pass goes on with a spin that gave way */
	/*
	 * Interrupt moderation (notify.c), under vq.mutex but irq_expired,
	 * which irq_timer sets: completions in the used ring the guest was
	 * not interrupted for, and whether the interrupt is held.
	 */
	unsigned int irq_unsent;
	bool irq_held;
	bool irq_expired;
	struct hrtimer irq_timer;
	u16 index;
	struct vhost_blk_qstats stats;
};

struct vhost_blk {
	struct vhost_dev dev;
	struct vhost_blk_vq vqs[VHOST_BLK_MAX_QUEUES];
	struct vhost_virtqueue *vqp[VHOST_BLK_MAX_QUEUES];
	/* The attached backend, under dev.mutex. */
	struct vhost_blk_backend_file *be;
	u16 num_queues;
	u8 serial[VHOST_BLK_SERIAL_LEN];
	/* Teardown waits here for every queue's pending to drop to zero. */
	wait_queue_head_t pending_wait;
	/*
	 * Syncs of the backend, one at a time (sync_mutex).  sync_gen counts
	 * those started: it changes under both locks and is read under
	 * sync_lock when a FLUSH arrives.  sync_err_gen: the last that failed.
	 */
	struct mutex sync_mutex;
	spinlock_t sync_lock;	/* sync_gen and sync_err_gen */
	u64 sync_gen;
	u64 sync_err_gen;
	unsigned int id;
	/* How long a busy queue waits for more requests (us); 0: never. */
	u32 batch_delay_us;
	/* How long an interrupt may wait for more completions (us); 0: never. */
	u32 irq_delay_us;
	struct dentry *debugfs;
};

/* Requests of every queue whose I/O has not completed yet. */
static inline unsigned int vhost_blk_pending(struct vhost_blk *blk)
{
	unsigned int n = 0;
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		n += atomic_read(&blk->vqs[i].pending);
	return n;
}

struct vhost_blk_req {
	struct llist_node node;
	struct vhost_blk_vq *bvq;
	struct vhost_blk_backend_file *be;
	struct kiocb iocb;
	u64 start_ns;
	/* FLUSH: sync_gen when it arrived; a later sync covers it. */
	u64 sync_seen;
	u64 sector;
	u8 __user *status_ptr;
	u32 type;
	u64 len;		/* data bytes requested */
	u32 used_len;		/* bytes written into the chain */
	u16 head;
	u8 status;
	u8 op;
	u8 nr_seg;
	/* The chain's device-writable part: iov[in_first .. + in_num). */
	u8 in_first;
	u8 in_num;
	/* VIRTIO_BLK_F_FLUSH not negotiated: stable before completion. */
	bool stable;
	/* Submitted as bio, whose pages stay pinned until it is retired. */
	bool bio_pinned;
	struct bio bio;
	struct bio_vec bvec[VHOST_BLK_BIO_VECS];
	struct virtio_blk_discard_write_zeroes seg[VHOST_BLK_MAX_DWZ_SEG];
	struct iovec iov[VHOST_BLK_IOV_MAX];
};

extern unsigned int vhost_blk_max_inflight;
extern unsigned int vhost_blk_batch_delay_us;
extern unsigned int vhost_blk_irq_delay_us;

/* bio.c */
bool vhost_blk_bio_usable(struct vhost_blk_backend_file *be);
bool vhost_blk_bio_submit(struct vhost_blk_req *req, struct iov_iter *iter);
void vhost_blk_bio_release(struct vhost_blk_req *req);

/* notify.c */
void vhost_blk_irq_init(struct vhost_blk_vq *bvq);
void vhost_blk_irq_stop(struct vhost_blk_vq *bvq);
bool vhost_blk_irq_hold(struct vhost_blk_vq *bvq, unsigned int n);

/* req.c */
int vhost_blk_req_init(void);
void vhost_blk_req_exit(void);
void vhost_blk_handle_kick(struct vhost_work *work);
void vhost_blk_done_work(struct vhost_work *work);
void vhost_blk_retire_orphans(struct vhost_blk *blk);
void vhost_blk_spare_free(struct vhost_blk_vq *bvq);
void vhost_blk_batch_init(struct vhost_blk_vq *bvq);
void vhost_blk_batch_stop(struct vhost_blk_vq *bvq);
void vhost_blk_poll_init(struct vhost_blk *blk);
void vhost_blk_rw_end(struct vhost_blk_req *req, long ret);

/* stats.c */
#ifdef VHOST_BLK_FAULT_INJECTION
/*
 * The flush-dropping fault of the durability test and the others, built
 * only into test modules (make VHOST_BLK_FAULT_INJECTION=y).  Each use is
 * under #ifdef VHOST_BLK_FAULT_INJECTION itself, so that the upstream
 * series (scripts/upstream.sh) drops them all with unifdef.
 */
#define VHOST_BLK_FAULT_DELAY_MAX_MS	5000
extern bool vhost_blk_fault_drop_flush;
extern u32 vhost_blk_fault_retire_delay_ms;
extern u32 vhost_blk_fault_irq_timer_orphaned;
extern u32 vhost_blk_fault_bio_delay_ms;

static inline bool vhost_blk_drop_flush(void)
{
	return READ_ONCE(vhost_blk_fault_drop_flush);
}

static inline void vhost_blk_fault_delay(u32 *knob)
{
	u32 ms = READ_ONCE(*knob);

	if (ms)
		msleep(min_t(u32, ms, VHOST_BLK_FAULT_DELAY_MAX_MS));
}

static inline void vhost_blk_fault_retire_delay(void)
{
	vhost_blk_fault_delay(&vhost_blk_fault_retire_delay_ms);
}

static inline void vhost_blk_fault_bio_delay(void)
{
	vhost_blk_fault_delay(&vhost_blk_fault_bio_delay_ms);
}

/*
 * Interrupt moderation was stopped for teardown: a timer still queued now
 * is one nobody cancels, and fires on the freed device.
 */
static inline void vhost_blk_fault_check_orphan(struct vhost_blk_vq *bvq)
{
	if (hrtimer_cancel(&bvq->irq_timer)) {
		WRITE_ONCE(vhost_blk_fault_irq_timer_orphaned,
			   vhost_blk_fault_irq_timer_orphaned + 1);
		pr_err("vhost-blk: queue %u: irq timer queued after teardown stopped it\n",
		       bvq->index);
	}
}
#endif

void vhost_blk_stats_init(void);
void vhost_blk_stats_exit(void);
void vhost_blk_stats_add(struct vhost_blk *blk);
void vhost_blk_stats_del(struct vhost_blk *blk);

#endif /* _VHOST_BLK_BLK_H */
