// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test: the dirty log of live migration (VHOST_F_LOG_ALL,
 * VHOST_SET_LOG_BASE, VHOST_VRING_F_LOG).  Which guest pages a request
 * marks (the data of a read, the status byte, the used ring; never the
 * data of a write), a buffer whose guest-physical pages sit in two memory
 * regions, nothing marked with logging off, and requests in flight while
 * logging is switched on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vbt.h"

#define LOG_PAGE	4096ULL
/* One bit per page up to the end of the highest chunk (vbt.h). */
#define LOG_BYTES	(((VBT_GPA_HIGH + 6 * VBT_CHUNK) / LOG_PAGE + 7) / 8)

static uint8_t *dlog;

static bool dirty(uint64_t gpa)
{
	uint64_t pg = gpa / LOG_PAGE;

	return dlog[pg / 8] & (1u << (pg % 8));
}

static unsigned long ndirty(void)
{
	unsigned long n = 0;
	size_t i;

	for (i = 0; i < LOG_BYTES; i++)
		n += __builtin_popcount(dlog[i]);
	return n;
}

static int set_log(struct vbt_dev *d, bool on)
{
	uint64_t f = d->features | (on ? 1ULL << VHOST_F_LOG_ALL : 0);
	struct vhost_vring_addr a = {
		.index = 0,
		.flags = on ? 1u << VHOST_VRING_F_LOG : 0,
		.desc_user_addr = (uintptr_t)d->vq[0].desc,
		.avail_user_addr = (uintptr_t)d->vq[0].avail,
		.used_user_addr = (uintptr_t)d->vq[0].used,
		.log_guest_addr = vbt_gpa(d->mem, d->vq[0].used),
	};

	if (ioctl(d->fd, VHOST_SET_FEATURES, &f) ||
	    ioctl(d->fd, VHOST_SET_VRING_ADDR, &a))
		return -errno;
	return 0;
}

/* @n 4 KiB reads in flight while logging goes on: all complete, once. */
static void t_log_inflight(struct vbt_dev *d, struct vbt_mem *m,
			   unsigned int n)
{
	struct vbt_burst b;
	unsigned int unmarked = 0;
	int ret;

	vbt_burst_start(d, &b, n);
	ret = set_log(d, true);
	vbt_burst_wait(d, &b);
	/* One more read: fetched with logging on, so marked. */
	if (vbt_rw(d, 0, VIRTIO_BLK_T_IN, 0, b.buf[0], 4096) ||
	    !dirty(vbt_gpa(m, b.buf[0])))
		unmarked++;
	tap_result(!ret && b.done == n && !b.bad && !b.dup && !unmarked,
		   "migrate: %u reads in flight while logging is switched on all complete OK (%u of %u, %u failed, %u unknown or twice); the next read is marked",
		   n, b.done, n, b.bad, b.dup);
}

void vbt_migrate(struct vbt_mem *m)
{
	struct vbt_opts o = {
		.nq = 1, .qsize = 256, .backend_fd = -2, .serial = "vbt-migrate",
	};
	uint64_t base, f, split;
	struct vbt_dev d;
	uint8_t *buf;
	bool ok;
	int ret;

	dlog = calloc(1, LOG_BYTES);
	vbt_mem_reset(m);
	if (!dlog || vbt_dev_open(&d, m, &o)) {
		tap_result(false, "migrate: device and a %llu-byte dirty log (%s)",
			   (unsigned long long)LOG_BYTES, strerror(errno));
		free(dlog);
		return;
	}
	ok = !ioctl(d.fd, VHOST_GET_FEATURES, &f) &&
	     (f & (1ULL << VHOST_F_LOG_ALL));
	base = (uintptr_t)dlog;
	ret = ioctl(d.fd, VHOST_SET_LOG_BASE, &base) ? -errno : 0;
	ret = ret ? ret : set_log(&d, true);
	tap_result(ok && !ret,
		   "migrate: VHOST_F_LOG_ALL offered; log base set, logging on (%s)",
		   strerror(-ret));

	buf = vbt_alloc(m, 3 * 4096, 4096);
	ok = !vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 8192) &&
	     dirty(vbt_gpa(m, buf)) && dirty(vbt_gpa(m, buf + 4096)) &&
	     !dirty(vbt_gpa(m, buf + 8192)) &&
	     dirty(vbt_gpa(m, d.vq[0].used));
	tap_result(ok, "migrate: an 8 KiB read marks its 2 data pages and the used ring, not the page after (%lu pages marked)",
		   ndirty());

	memset(dlog, 0, LOG_BYTES);
	ok = !vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, 0, buf, 8192) &&
	     !dirty(vbt_gpa(m, buf)) && !dirty(vbt_gpa(m, buf + 4096)) &&
	     dirty(vbt_gpa(m, d.vq[0].used)) && ndirty() <= 3;
	tap_result(ok, "migrate: an 8 KiB write marks the used ring and its status, not the data it read (%lu pages marked)",
		   ndirty());

	/* Contiguous in guest-physical space, two regions in ours (vbt.h). */
	memset(dlog, 0, LOG_BYTES);
	split = VBT_GPA_LOW + VBT_CHUNK - 4096;
	ok = !vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, vbt_hva(m, split), 8192) &&
	     dirty(split) && dirty(split + 4096) && !dirty(split + 8192) &&
	     !dirty(split - 4096);
	tap_result(ok, "migrate: a read into guest pages of two memory regions marks both pages (%lu pages marked)",
		   ndirty());

	ret = set_log(&d, false);
	memset(dlog, 0, LOG_BYTES);
	ok = !ret && !vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 8192) &&
	     !ndirty();
	tap_result(ok, "migrate: logging off: a read marks nothing (%lu pages marked)",
		   ndirty());

	t_log_inflight(&d, m, 64);
	vbt_dev_close(&d);
	free(dlog);
}
