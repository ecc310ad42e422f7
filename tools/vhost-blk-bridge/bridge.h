/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: vhost-user front for /dev/vhost-blk.
 *
 * Shared declarations of the bridge: options, the backing disk, the guest
 * memory table, the /dev/vhost-blk wrapper and one vhost-user session.
 */
#ifndef VHOST_BLK_BRIDGE_H
#define VHOST_BLK_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/vhost_blk.h>

#define BRIDGE_NAME		"vhost-blk-bridge"
/* The project's version (dkms.conf), given by the Makefile. */
#ifndef BRIDGE_VERSION
#define BRIDGE_VERSION		"unknown"
#endif

/* vhost-user allows at most 8 regions in SET_MEM_TABLE (and 8 fds). */
#define MEM_MAX_REGIONS		8
/*
 * Regions the table holds when the front-end adds them one at a time
 * (CONFIGURE_MEM_SLOTS): vhost's default max_mem_regions.
 */
#define MEM_MAX_SLOTS		64
/* Bytes of config space a vhost-user GET/SET_CONFIG can address. */
#define VU_CONFIG_SPACE		256

/* ---- options (main.c) ------------------------------------------------ */

struct bridge_opts {
	const char *socket_path;	/* socket the bridge creates */
	int socket_mode;		/* its mode; -1: default */
	const char *socket_group;	/* its group (name or number) */
	int listen_fd;			/* --fd: a listening socket passed in */
	const char *user;		/* drop to this user after setup */
	unsigned int timeout;		/* seconds, see --timeout */
	unsigned int lock_timeout;	/* seconds, see --lock-timeout; 0: none */
	const char *backend_path;
	const char *vhost_path;		/* default /dev/vhost-blk */
	const char *serial;
	unsigned int queues;
	int batch_delay_us;		/* -1: the module's default */
	int poll_us;			/* -1: the module's default */
	int irq_delay_us;		/* -1: the module's default */
	bool readonly;
	bool buffered;
	bool no_kernel;			/* testing: protocol only, no device */
	bool once;			/* serve one session, then exit */
	int verbose;
};

extern int bridge_verbose;
/* A SIGINT/SIGTERM arrived: end the session and exit. */
bool bridge_stopping(void);

/* CLOCK_MONOTONIC in milliseconds. */
long long bridge_now_ms(void);
/*
 * Wait until @fd is ready for @events (POLLIN/POLLOUT) or the monotonic
 * time @deadline_ms (-1: no deadline) has passed.  SIGINT and SIGTERM are
 * blocked everywhere else and only delivered here, so a stop request is
 * never lost.  Returns 1 when ready, 0 on timeout, -EINTR when the bridge
 * is stopping, another -errno on failure.
 */
int bridge_wait(int fd, short events, long long deadline_ms);
/*
 * As bridge_wait(fd, POLLIN, deadline_ms), between two messages of a
 * session: also returns -EAGAIN when a SIGHUP (re-read the backend's size)
 * is pending; bridge_take_resize() then takes it.
 */
int bridge_wait_idle(int fd, long long deadline_ms);
/* A SIGHUP arrived since the last call: true once, then false. */
bool bridge_take_resize(void);

void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * From here on only the system calls serving sessions needs (sandbox.c);
 * any other kills the process.
 */
int sandbox_enter(void);

/* ---- backing disk (backend.c) ---------------------------------------- */

/*
 * The backend is opened once, at startup, and never again by path: one fd
 * for write-back mode and one, on the same open inode, with O_DSYNC for
 * write-through mode (none when read-only).
 */
struct backend {
	const char *path;
	int fd_wb;		/* write-back: no O_DSYNC */
	int fd_wt;		/* write-through: O_DSYNC; -1 when read-only */
	bool readonly;
	bool buffered;
	bool is_bdev;
	uint64_t size;		/* bytes */
};

int backend_open(struct backend *be, const char *path, bool readonly,
		 bool buffered);
/* The size in bytes of the file or block device open at @fd; -errno. */
int fd_size(int fd, uint64_t *bytes);
/* Read the backend's size again (it may have grown or shrunk) into size. */
int backend_refresh_size(struct backend *be);
/* The fd for write-back (@wce) or write-through mode. */
int backend_fd(const struct backend *be, bool wce);
void backend_close(struct backend *be);

/* ---- guest memory table (mem.c) -------------------------------------- */

struct mem_region {
	uint64_t gpa;		/* guest physical address */
	uint64_t size;
	uint64_t qva;		/* the front-end's (QEMU's) virtual address */
	uint64_t mmap_offset;	/* offset of the region in its fd */
	void *map;		/* our mapping of the fd from offset 0 */
	size_t map_len;
	uint8_t *host;		/* our address of the region's first byte */
	int fd;			/* our copy of the fd; -1: none */
};

struct mem_table {
	unsigned int nregions;
	struct mem_region r[MEM_MAX_SLOTS];
};

/*
 * Map the regions described in @src (gpa/size/qva/mmap_offset filled in)
 * from @fds into @dst.  Each fd must be a memfd or a regular file at least
 * mmap_offset + size bytes long.  On failure nothing stays mapped.  The
 * fds are not closed.
 */
int mem_map(struct mem_table *dst, const struct mem_table *src,
	    const int *fds);
void mem_unmap(struct mem_table *mt);
/*
 * Map one more region (gpa/size/qva/mmap_offset of @s) from @fd into @mt,
 * checked as mem_map() checks each; on failure @mt is unchanged.
 */
int mem_add(struct mem_table *mt, const struct mem_region *s, int fd);
/*
 * Take the region at @which's gpa, size and qva out of @mt into @out,
 * still mapped (mem_region_unmap() it once nothing uses it); -ENOENT if
 * there is none.
 */
int mem_take(struct mem_table *mt, const struct mem_region *which,
	     struct mem_region *out);
void mem_region_unmap(struct mem_region *r);
/* Our address of [qva, qva + len), which must lie in a single region. */
void *mem_qva_to_host(const struct mem_table *mt, uint64_t qva, uint64_t len);
/*
 * Copy [qva, qva + len) of guest memory into @buf through the region's fd,
 * never through the mapping: a front-end that shrank the fd since makes
 * this fail (-EFAULT), where a load from the mapping would raise SIGBUS.
 */
int mem_read(const struct mem_table *mt, uint64_t qva, void *buf, size_t len);
/*
 * The dirty log's size for this table: one bit per 4 KiB page up to the
 * highest guest-physical address, in bytes.
 */
uint64_t mem_log_bytes(const struct mem_table *mt);
/* @fd is a memfd or a regular file of at least @end bytes (else logged). */
bool fd_is_memory(const char *what, int fd, uint64_t end);

/* ---- /dev/vhost-blk (vhost_dev.c) ------------------------------------ */

struct vdev {
	int fd;			/* -1 in no-kernel mode */
	bool no_kernel;
	uint64_t dry_capacity;	/* no-kernel mode: sectors */
	unsigned int dry_queues;
	bool dry_ro;
	unsigned int dry_base[VHOST_BLK_MAX_QUEUES];	/* rings' positions */
	bool workers_tried;
};

int vdev_open(struct vdev *d, const char *path, bool no_kernel);
void vdev_close(struct vdev *d);
int vdev_set_delay(struct vdev *d, unsigned long req, const char *what, int us);
int vdev_set_backend(struct vdev *d, int fd, bool ro, unsigned int queues,
		     const char *serial);
int vdev_get_config(struct vdev *d, struct vhost_blk_config *cfg);
/* The backend was resized: the capacity requests are checked against. */
int vdev_set_capacity(struct vdev *d, uint64_t sectors);
int vdev_set_features(struct vdev *d, uint64_t features);
int vdev_set_mem_table(struct vdev *d, const struct mem_table *mt);
/* How many regions the kernel's memory table takes (at most MEM_MAX_SLOTS). */
unsigned int vdev_max_mem_regions(struct vdev *d);
int vdev_set_vring_num(struct vdev *d, unsigned int idx, unsigned int num);
int vdev_set_vring_busyloop(struct vdev *d, unsigned int idx, unsigned int us);
int vdev_set_vring_base(struct vdev *d, unsigned int idx, unsigned int base);
int vdev_get_vring_base(struct vdev *d, unsigned int idx,
			unsigned int *base);
/* log_gpa: the used ring's guest-physical address, with VHOST_VRING_F_LOG. */
int vdev_set_vring_addr(struct vdev *d, unsigned int idx, void *desc,
			void *avail, void *used, unsigned int flags,
			uint64_t log_gpa);
/* Live migration: the dirty log the kernel marks, and its eventfd. */
int vdev_set_log_base(struct vdev *d, void *log);
int vdev_set_log_fd(struct vdev *d, int fd);
int vdev_set_vring_fd(struct vdev *d, unsigned long req, unsigned int idx,
		      int fd);
/* Best effort: one vhost worker per queue (kernels with VHOST_NEW_WORKER). */
void vdev_spread_workers(struct vdev *d, unsigned int queues);

/* ---- vhost-user session (vhost_user.c) ------------------------------- */

struct bridge {
	struct bridge_opts *opts;
	struct backend be;
};

/*
 * Serve one connected front-end until it disconnects or sends something
 * malformed.  Returns 0 when the session ended normally (EOF), -1 when it
 * was ended because of a protocol error or a failure.
 */
int vu_serve(struct bridge *br, int sock);

#endif /* VHOST_BLK_BRIDGE_H */
