/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost_blk_test: a userspace virtio-blk driver for /dev/vhost-blk.
 * Shared definitions of the driver core (virtio.c), the test modes
 * (tests.c, hostile.c, fuzz.c, load.c) and main.c.
 */
#ifndef VBT_H
#define VBT_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <linux/vhost_blk.h>
#include "vhost_workers.h"

#define VBT_MAX_QUEUES	VHOST_BLK_MAX_QUEUES
#define VBT_INDIR_MAX	264	/* descriptors per indirect table */
#define VBT_INDIR_RING	1024	/* larger rings get no indirect tables */
#define VBT_CHUNK	(16UL << 20)
#define VBT_MEM_SIZE	(4 * VBT_CHUNK)

/*
 * Guest memory: 4 chunks of 16 MiB, one anonymous mapping.  Guest-physical
 * addresses differ from user addresses, and chunks 0 and 1 are contiguous
 * in guest-physical space in the opposite order of their user addresses:
 *   chunk 1 (hva base+16M) -> gpa GPA_LOW
 *   chunk 0 (hva base+0)   -> gpa GPA_LOW + 16M
 *   chunk 2 (hva base+32M) -> gpa GPA_HIGH
 *   chunk 3 (hva base+48M) -> gpa GPA_HIGH + 64M (a hole in between)
 * Rings live in chunk 3, data buffers come from chunk 2.
 */
#define VBT_GPA_LOW	0x40000000ULL
#define VBT_GPA_HIGH	0x300000000ULL
#define VBT_GPA_HOLE	(VBT_GPA_HIGH + VBT_CHUNK + 4096)

struct vbt_mem {
	uint8_t *base;
	uint64_t gpa[4];
	size_t data_brk;	/* offset in chunk 2 */
	size_t ring_brk;	/* offset in chunk 3 */
};

struct vbt_vq {
	unsigned int num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t avail_idx;
	uint16_t last_used;
	uint16_t free_head;
	unsigned int nfree;
	int kick, call, err;
	bool event_idx;
	void **cookie;			/* per head */
	struct vring_desc **indir;	/* per head, VBT_INDIR_MAX entries */
	uint64_t indir_gpa;		/* gpa of head 0's table */
	uint16_t *chain_len;		/* per head: descriptors used */
	uint64_t kicks, irqs;
};

struct vbt_dev {
	int fd;
	struct vbt_mem *mem;
	unsigned int nq;
	uint64_t features;
	struct vbt_vq vq[VBT_MAX_QUEUES];
};

struct vbt_opts {
	unsigned int nq;
	unsigned int qsize;
	uint64_t features;	/* 0: all offered (but VHOST_F_LOG_ALL) */
	uint32_t be_flags;
	int backend_fd;		/* -2: open the configured backend, -1: none */
	bool workers;		/* one vhost worker per queue (6.5+) */
	const char *serial;
	bool no_rings;		/* only owner + mem table */
	bool have_dev_fd;	/* use dev_fd, an open /dev/vhost-blk */
	int dev_fd;
};

/* A buffer segment of a chain. */
struct vbt_seg {
	uint64_t gpa;
	uint32_t len;
	bool write;		/* device-writable */
};

/* Global configuration from the command line. */
struct vbt_cfg {
	const char *path;	/* backend path */
	bool direct;
	bool bdev;
	bool nodata;		/* backend does not keep data (null_blk) */
	uint64_t size;		/* bytes */
	int verbose;
};

extern struct vbt_cfg cfg;

/* virtio.c */
void vbt_mem_init(struct vbt_mem *m);
void vbt_mem_init_shared(struct vbt_mem *m);
void vbt_mem_reset(struct vbt_mem *m);
void *vbt_alloc(struct vbt_mem *m, size_t size, size_t align);
uint64_t vbt_gpa(struct vbt_mem *m, const void *hva);
void *vbt_hva(struct vbt_mem *m, uint64_t gpa);
int vbt_set_mem_table(struct vbt_dev *d, struct vbt_mem *m);
int vbt_open_backend(bool ro);
int vbt_attach(struct vbt_dev *d, int fd, uint32_t flags, unsigned int nq,
	       const char *serial);
int vbt_dev_open(struct vbt_dev *d, struct vbt_mem *m,
		 const struct vbt_opts *o);
int vbt_vq_setup(struct vbt_dev *d, unsigned int i, unsigned int num);
void vbt_dev_close(struct vbt_dev *d);
int vbt_vq_add(struct vbt_vq *vq, const struct vbt_seg *segs, unsigned int n,
	       bool indirect, void *cookie);
void vbt_vq_publish(struct vbt_vq *vq, uint16_t head);
void vbt_vq_kick(struct vbt_vq *vq, uint16_t old_idx);
void vbt_vq_kick_force(struct vbt_vq *vq);
int vbt_vq_poll(struct vbt_vq *vq, uint32_t *len, void **cookie);
int vbt_vq_wait(struct vbt_vq *vq, uint32_t *len, void **cookie,
		int timeout_ms);
bool vbt_vq_errored(struct vbt_vq *vq);
bool vbt_vq_wait_err(struct vbt_vq *vq, int timeout_ms);

/* A whole request in guest memory, synchronous. */
struct vbt_io {
	uint32_t type;
	uint64_t sector;
	void *data;		/* in guest memory */
	uint32_t len;
	bool indirect;
	/* results */
	int status;		/* -1: no completion */
	uint32_t used_len;
};

int vbt_io(struct vbt_dev *d, unsigned int q, struct vbt_io *io);

/*
 * A burst of 4 KiB reads (sectors 0, 8, ...) on queue 0, all in flight at
 * once: vbt_burst_start() publishes and kicks them, the caller acts while
 * they run, vbt_burst_wait() collects them.
 */
#define VBT_BURST_MAX	64
struct vbt_burst {
	unsigned int n;
	uint8_t *buf[VBT_BURST_MAX];
	uint8_t *status[VBT_BURST_MAX];
	/* results */
	unsigned int done;	/* completions seen */
	unsigned int bad;	/* ... with a status other than OK */
	unsigned int dup;	/* unknown or completed twice */
};

void vbt_burst_start(struct vbt_dev *d, struct vbt_burst *b, unsigned int n);
void vbt_burst_wait(struct vbt_dev *d, struct vbt_burst *b);
int vbt_rw(struct vbt_dev *d, unsigned int q, uint32_t type, uint64_t sector,
	   void *buf, uint32_t len);
uint64_t vbt_now_ns(void);
void vbt_fill(void *buf, size_t len, uint64_t seed);
int vbt_backend_pread(void *buf, size_t len, uint64_t off);
int vbt_backend_pwrite(const void *buf, size_t len, uint64_t off);
unsigned long vbt_tainted(void);
/* A debugfs stats counter summed over the devices there (tests.c). */
unsigned long long vbt_stat_total(const char *name);

/* The guest's used_event index: after the avail ring's last entry. */
static inline uint16_t *vbt_used_event(struct vbt_vq *vq)
{
	return &vq->avail->ring[vq->num];
}

/* TAP */
void tap_result(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tap_skip(const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int tap_done(void);

/* Test modes */
void vbt_functional(struct vbt_mem *m);
void vbt_resize(struct vbt_mem *m);
void vbt_migrate(struct vbt_mem *m);
void vbt_hostile(struct vbt_mem *m);
void vbt_flood(struct vbt_mem *m, unsigned int seconds);
void vbt_context(struct vbt_mem *m);
void vbt_owner_killed(void);
void vbt_irq_moderation(struct vbt_mem *m);
void vbt_fuzz(struct vbt_mem *m, uint64_t seed, unsigned long count);
int vbt_load(struct vbt_mem *m, int argc, char **argv);
int vbt_review(struct vbt_mem *m, const char *what);

/* A cheap deterministic PRNG (xorshift64*). */
static inline uint64_t vbt_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif /* VBT_H */
