// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test: online resize (VHOST_BLK_SET_CAPACITY) on a file of its
 * own, beside the configured backend file and opened as it is (O_DIRECT or
 * not), which the test grows and shrinks under the device: the capacity
 * the config presents, requests on either side of it, the ioctl's errors,
 * and requests in flight while it runs.  Block device backends are resized
 * end to end instead (selftests/l2/45-resize.sh, a loop device).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "vbt.h"

#define MIB_SECTORS	2048ULL

static uint64_t capacity(struct vbt_dev *d)
{
	struct vhost_blk_config c = { .size = sizeof(c) };

	if (ioctl(d->fd, VHOST_BLK_GET_CONFIG, &c))
		return ~0ULL;
	return c.blk.capacity;
}

static int set_capacity(int fd, uint64_t sectors)
{
	return ioctl(fd, VHOST_BLK_SET_CAPACITY, &sectors) ? -errno : 0;
}

/* One 4 KiB request at @sector: its status, -1 without a completion. */
static int rw4k(struct vbt_dev *d, struct vbt_mem *m, uint32_t type,
		uint64_t sector, uint64_t seed)
{
	uint8_t *buf = vbt_alloc(m, 4096, 4096);

	if (type == VIRTIO_BLK_T_OUT)
		vbt_fill(buf, 4096, seed);
	return vbt_rw(d, 0, type, sector, buf, 4096);
}

static bool file_is(int fd, uint64_t sector, uint64_t seed)
{
	uint8_t ref[4096], got[4096];

	vbt_fill(ref, sizeof(ref), seed);
	return pread(fd, got, sizeof(got), sector * 512) == sizeof(got) &&
	       !memcmp(ref, got, sizeof(got));
}

/*
 * @n 4 KiB reads in flight when the capacity changes: every one completes
 * with OK, none lost, none twice.
 */
static void t_resize_inflight(struct vbt_dev *d, unsigned int n,
			      uint64_t grow_to)
{
	struct vbt_burst b;
	int ret;

	vbt_burst_start(d, &b, n);
	ret = set_capacity(d->fd, grow_to);
	vbt_burst_wait(d, &b);
	tap_result(!ret && b.done == n && !b.bad && !b.dup &&
		   capacity(d) == grow_to,
		   "resize: %u reads in flight across SET_CAPACITY all complete OK (%u of %u, %u failed, %u unknown or twice)",
		   n, b.done, n, b.bad, b.dup);
}

void vbt_resize(struct vbt_mem *m)
{
	struct vbt_opts o = {
		.nq = 1, .qsize = 256, .serial = "vbt-resize",
	};
	struct vbt_dev d, other;
	struct vbt_opts oo = { .no_rings = true, .backend_fd = -1 };
	char dir[256], path[300];
	int fd, befd, ret;
	bool ok;

	if (cfg.bdev) {
		tap_skip("a block device backend: a loop device is resized in 45-resize",
			 "resize: a file beside the backend, grown and shrunk");
		return;
	}
	snprintf(dir, sizeof(dir), "%s", cfg.path);
	snprintf(path, sizeof(path), "%s/vbt-resize.XXXXXX", dirname(dir));
	/* fd: buffered, to resize and read back; befd: opened as the backend. */
	fd = mkstemp(path);
	befd = fd < 0 ? -1 : open(path, O_RDWR | (cfg.direct ? O_DIRECT : 0));
	if (befd < 0 || ftruncate(fd, MIB_SECTORS * 512)) {
		tap_result(false, "resize: a 1 MiB file beside the backend (%s)",
			   strerror(errno));
		if (fd >= 0) {
			unlink(path);
			close(fd);
		}
		if (befd >= 0)
			close(befd);
		return;
	}
	unlink(path);
	o.backend_fd = befd;
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "resize: device on a 1 MiB file (%s)",
			   strerror(errno));
		close(befd);
		close(fd);
		return;
	}

	/* Beyond the backend's size: refused, nothing changes. */
	ret = set_capacity(d.fd, 2 * MIB_SECTORS);
	tap_result(ret == -EINVAL && capacity(&d) == MIB_SECTORS,
		   "resize: a capacity above the backend's size is refused (EINVAL: %s)",
		   strerror(-ret));

	/* Grow the file: the old end still holds, then the new one opens. */
	ok = !ftruncate(fd, 2 * MIB_SECTORS * 512) &&
	     rw4k(&d, m, VIRTIO_BLK_T_IN, MIB_SECTORS, 0) == VIRTIO_BLK_S_IOERR;
	tap_result(ok, "resize: before SET_CAPACITY, a read past the old end fails (IOERR)");
	ret = set_capacity(d.fd, 0);
	ok = !ret && capacity(&d) == 2 * MIB_SECTORS &&
	     rw4k(&d, m, VIRTIO_BLK_T_OUT, 2 * MIB_SECTORS - 8, 7) == 0 &&
	     file_is(fd, 2 * MIB_SECTORS - 8, 7) &&
	     rw4k(&d, m, VIRTIO_BLK_T_IN, MIB_SECTORS, 0) == 0;
	tap_result(ok, "resize: grown to 2 MiB (0 = the backend's size): config says %llu sectors, the last 4 KiB written and verified in the file",
		   (unsigned long long)capacity(&d));
	ok = rw4k(&d, m, VIRTIO_BLK_T_IN, 2 * MIB_SECTORS - 4, 0) ==
	     VIRTIO_BLK_S_IOERR;
	tap_result(ok, "resize: a read across the new end fails (IOERR)");

	/* Shrink, then take the file with it. */
	ret = set_capacity(d.fd, MIB_SECTORS / 2);
	ok = !ret && capacity(&d) == MIB_SECTORS / 2 &&
	     rw4k(&d, m, VIRTIO_BLK_T_IN, MIB_SECTORS / 2, 0) ==
	     VIRTIO_BLK_S_IOERR &&
	     rw4k(&d, m, VIRTIO_BLK_T_OUT, MIB_SECTORS / 2 - 4, 0) ==
	     VIRTIO_BLK_S_IOERR &&
	     rw4k(&d, m, VIRTIO_BLK_T_OUT, MIB_SECTORS / 2 - 8, 9) == 0 &&
	     file_is(fd, MIB_SECTORS / 2 - 8, 9);
	tap_result(ok, "resize: shrunk to 512 KiB: reads and writes past it fail (IOERR), the last 4 KiB before it works");
	ok = !ftruncate(fd, MIB_SECTORS / 2 * 512) && !set_capacity(d.fd, 0) &&
	     capacity(&d) == MIB_SECTORS / 2;
	tap_result(ok, "resize: the file shrunk to match, SET_CAPACITY 0 keeps 512 KiB");

	/* Requests in flight across the change. */
	ok = !ftruncate(fd, 2 * MIB_SECTORS * 512);
	if (ok)
		t_resize_inflight(&d, 64, 2 * MIB_SECTORS);
	else
		tap_result(false, "resize: grow the file for requests in flight");

	/* Only the owner, and only with a backend. */
	if (vbt_dev_open(&other, m, &oo)) {
		tap_result(false, "resize: a second device (%s)", strerror(errno));
	} else {
		ret = set_capacity(other.fd, 0);
		tap_result(ret == -ENXIO,
			   "resize: without a backend: ENXIO (%s)",
			   strerror(-ret));
		vbt_dev_close(&other);
	}
	close(fd);
	fd = open("/dev/vhost-blk", O_RDWR);
	ret = fd < 0 ? -errno : set_capacity(fd, 0);
	tap_result(ret == -EPERM, "resize: not the owner: EPERM (%s)",
		   strerror(-ret));
	if (fd >= 0)
		close(fd);
	vbt_dev_close(&d);
	close(befd);
}
