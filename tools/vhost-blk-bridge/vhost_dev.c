// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the /dev/vhost-blk instance of one session.
 *
 * Thin wrappers around the generic VHOST_* ioctls and the device's own
 * VHOST_BLK_SET_BACKEND / VHOST_BLK_GET_CONFIG / VHOST_BLK_SET_CAPACITY.  In no-kernel (testing)
 * mode every call succeeds without a device and GET_CONFIG is synthesized,
 * so the vhost-user side can be exercised against QEMU anywhere.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bridge.h"
#include "vhost_workers.h"

static int xioctl(struct vdev *d, unsigned long req, void *arg,
		  const char *what)
{
	if (d->no_kernel)
		return 0;
	if (ioctl(d->fd, req, arg) < 0) {
		int err = errno;

		log_msg("%s: %s", what, strerror(err));
		return -err;
	}
	return 0;
}

int vdev_open(struct vdev *d, const char *path, bool no_kernel)
{
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	d->no_kernel = no_kernel;
	if (no_kernel)
		return 0;
	d->fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->fd < 0) {
		int err = errno;

		log_msg("cannot open %s: %s%s", path, strerror(err),
			err == ENOENT ? " (is vhost_blk loaded? modprobe vhost_blk)" : "");
		return -err;
	}
	if (xioctl(d, VHOST_SET_OWNER, NULL, "VHOST_SET_OWNER")) {
		close(d->fd);
		d->fd = -1;
		return -EIO;
	}
	return 0;
}

void vdev_close(struct vdev *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/*
 * One of the device's delays (VHOST_BLK_SET_BATCH_DELAY, _SET_IRQ_DELAY),
 * named @what in the log; a negative @us leaves the module's default.
 */
int vdev_set_delay(struct vdev *d, unsigned long req, const char *what, int us)
{
	__u32 v = us;

	if (d->no_kernel || us < 0)
		return 0;
	log_dbg("%s %d us", what, us);
	return xioctl(d, req, &v, what);
}

int vdev_set_capacity(struct vdev *d, uint64_t sectors)
{
	__u64 v = sectors;

	log_dbg("VHOST_BLK_SET_CAPACITY %llu sectors",
		(unsigned long long)sectors);
	if (d->no_kernel) {
		d->dry_capacity = sectors;
		return 0;
	}
	return xioctl(d, VHOST_BLK_SET_CAPACITY, &v, "VHOST_BLK_SET_CAPACITY");
}

int vdev_set_backend(struct vdev *d, int fd, bool ro, unsigned int queues,
		     const char *serial)
{
	struct vhost_blk_backend b;

	memset(&b, 0, sizeof(b));
	b.size = sizeof(b);
	b.fd = fd;
	b.flags = ro ? VHOST_BLK_BACKEND_F_RO : 0;
	b.num_queues = queues;
	if (serial)
		memcpy(b.serial, serial, strnlen(serial, sizeof(b.serial)));
	log_dbg("VHOST_BLK_SET_BACKEND fd %d%s", fd, ro ? " ro" : "");
	/* As the device does, the size of the backend as it is now. */
	if (d->no_kernel && fd >= 0) {
		uint64_t bytes;

		if (!fd_size(fd, &bytes))
			d->dry_capacity = bytes / 512;
	}
	return xioctl(d, VHOST_BLK_SET_BACKEND, &b,
		      fd < 0 ? "VHOST_BLK_SET_BACKEND (detach)" :
		      "VHOST_BLK_SET_BACKEND");
}

static void dry_config(struct vdev *d, struct vhost_blk_config *cfg)
{
	struct virtio_blk_config *c = &cfg->blk;

	cfg->flags = VHOST_BLK_CONFIG_F_BACKEND |
		     (d->dry_ro ? VHOST_BLK_CONFIG_F_RO : 0);
	cfg->features = VHOST_BLK_FEATURES |
			(d->dry_ro ? 1ULL << VIRTIO_BLK_F_RO : 0);
	cfg->config_len = offsetof(struct virtio_blk_config, unused1);
	c->capacity = htole64(d->dry_capacity);
	c->seg_max = htole32(126);
	c->blk_size = htole32(512);
	c->num_queues = htole16(d->dry_queues);
	c->max_discard_sectors = htole32(0x3fffff);
	c->max_discard_seg = htole32(1);
	c->discard_sector_alignment = htole32(1);
	c->max_write_zeroes_sectors = htole32(0x3fffff);
	c->max_write_zeroes_seg = htole32(1);
}

int vdev_get_config(struct vdev *d, struct vhost_blk_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	if (d->no_kernel) {
		dry_config(d, cfg);
		return 0;
	}
	return xioctl(d, VHOST_BLK_GET_CONFIG, cfg, "VHOST_BLK_GET_CONFIG");
}

int vdev_set_features(struct vdev *d, uint64_t features)
{
	return xioctl(d, VHOST_SET_FEATURES, &features, "VHOST_SET_FEATURES");
}

unsigned int vdev_max_mem_regions(struct vdev *d)
{
	unsigned int n = MEM_MAX_SLOTS;
	FILE *f;

	/* vhost.ko's own limit (VHOST_SET_MEM_TABLE fails with E2BIG past it). */
	if (d->no_kernel)
		return n;
	f = fopen("/sys/module/vhost/parameters/max_mem_regions", "re");
	if (f) {
		if (fscanf(f, "%u", &n) != 1)
			n = MEM_MAX_SLOTS;
		fclose(f);
	}
	return n < MEM_MAX_SLOTS ? n : MEM_MAX_SLOTS;
}

int vdev_set_mem_table(struct vdev *d, const struct mem_table *mt)
{
	struct vhost_memory *m;
	unsigned int i;
	int ret;

	m = calloc(1, sizeof(*m) + mt->nregions * sizeof(m->regions[0]));
	if (!m)
		return -ENOMEM;
	m->nregions = mt->nregions;
	for (i = 0; i < mt->nregions; i++) {
		m->regions[i].guest_phys_addr = mt->r[i].gpa;
		m->regions[i].memory_size = mt->r[i].size;
		m->regions[i].userspace_addr = (uintptr_t)mt->r[i].host;
	}
	ret = xioctl(d, VHOST_SET_MEM_TABLE, m, "VHOST_SET_MEM_TABLE");
	free(m);
	return ret;
}

int vdev_set_vring_num(struct vdev *d, unsigned int idx, unsigned int num)
{
	struct vhost_vring_state s = { .index = idx, .num = num };

	return xioctl(d, VHOST_SET_VRING_NUM, &s, "VHOST_SET_VRING_NUM");
}

int vdev_set_vring_busyloop(struct vdev *d, unsigned int idx, unsigned int us)
{
	struct vhost_vring_state s = { .index = idx, .num = us };

	log_dbg("VHOST_SET_VRING_BUSYLOOP_TIMEOUT ring %u: %u us", idx, us);
	return xioctl(d, VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &s,
		      "VHOST_SET_VRING_BUSYLOOP_TIMEOUT");
}

int vdev_set_vring_base(struct vdev *d, unsigned int idx, unsigned int base)
{
	struct vhost_vring_state s = { .index = idx, .num = base };

	/* No-kernel mode keeps the position, as the device would. */
	if (d->no_kernel && idx < VHOST_BLK_MAX_QUEUES)
		d->dry_base[idx] = base;
	return xioctl(d, VHOST_SET_VRING_BASE, &s, "VHOST_SET_VRING_BASE");
}

int vdev_get_vring_base(struct vdev *d, unsigned int idx, unsigned int *base)
{
	struct vhost_vring_state s = { .index = idx };
	int ret = xioctl(d, VHOST_GET_VRING_BASE, &s, "VHOST_GET_VRING_BASE");

	*base = s.num;
	if (d->no_kernel && idx < VHOST_BLK_MAX_QUEUES)
		*base = d->dry_base[idx];
	return ret;
}

int vdev_set_vring_addr(struct vdev *d, unsigned int idx, void *desc,
			void *avail, void *used, unsigned int flags,
			uint64_t log_gpa)
{
	struct vhost_vring_addr a = {
		.index = idx,
		.flags = flags,
		.desc_user_addr = (uintptr_t)desc,
		.avail_user_addr = (uintptr_t)avail,
		.used_user_addr = (uintptr_t)used,
		.log_guest_addr = log_gpa,
	};

	return xioctl(d, VHOST_SET_VRING_ADDR, &a, "VHOST_SET_VRING_ADDR");
}

int vdev_set_log_base(struct vdev *d, void *log)
{
	__u64 base = (uintptr_t)log;

	return xioctl(d, VHOST_SET_LOG_BASE, &base, "VHOST_SET_LOG_BASE");
}

int vdev_set_log_fd(struct vdev *d, int fd)
{
	return xioctl(d, VHOST_SET_LOG_FD, &fd, "VHOST_SET_LOG_FD");
}

int vdev_set_vring_fd(struct vdev *d, unsigned long req, unsigned int idx,
		      int fd)
{
	struct vhost_vring_file f = { .index = idx, .fd = fd };

	return xioctl(d, req, &f,
		      req == VHOST_SET_VRING_KICK ? "VHOST_SET_VRING_KICK" :
		      req == VHOST_SET_VRING_CALL ? "VHOST_SET_VRING_CALL" :
		      "VHOST_SET_VRING_ERR");
}

void vdev_spread_workers(struct vdev *d, unsigned int queues)
{
	unsigned int i;

	if (d->no_kernel || d->workers_tried)
		return;
	d->workers_tried = true;
	for (i = 1; i < queues; i++) {
		struct vhost_worker_state w = { 0 };
		struct vhost_vring_worker vw;

		if (ioctl(d->fd, VHOST_NEW_WORKER, &w) < 0) {
			log_dbg("VHOST_NEW_WORKER: %s (queues share one worker)",
				strerror(errno));
			return;
		}
		vw.index = i;
		vw.worker_id = w.worker_id;
		if (ioctl(d->fd, VHOST_ATTACH_VRING_WORKER, &vw) < 0) {
			log_dbg("VHOST_ATTACH_VRING_WORKER %u: %s", i,
				strerror(errno));
			ioctl(d->fd, VHOST_FREE_WORKER, &w);
			return;
		}
		log_dbg("queue %u: own vhost worker %u", i, w.worker_id);
	}
}
