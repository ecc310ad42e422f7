// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --review MODE: the host-side review's defects (issue 47),
 * each a test that failed before its fix.
 *   --review wz-nounmap  a file backend on tmpfs (no FALLOC_FL_ZERO_RANGE):
 *                        WRITE_ZEROES without UNMAP must not deallocate
 *   --review long-chain  a chain of more buffers than a request takes is
 *                        answered with an error status, and the queue
 *                        carries on
 *   --review zoned       a zoned block device is refused as a backend
 *   --review irq-release (fault-injection build, a backend whose reads take
 *                        a second: null_blk irqmode=2) the device is
 *                        released while a completion work that holds the
 *                        interrupt sleeps in retire: no moderation timer
 *                        may be left queued for the freed device
 *   --review bio-stale   (fault-injection build, a block device with
 *                        --direct: the direct-bio path) a buffered reader
 *                        caches the range while a write is on its way:
 *                        after the write it must read the new data
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "vbt.h"

#define FAULTS	"/sys/kernel/debug/vhost-blk/"

static int knob_write(const char *name, unsigned long v)
{
	char path[256];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), FAULTS "%s", name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	r = fprintf(f, "%lu\n", v) < 0;
	return fclose(f) || r ? -1 : 0;
}

static long knob_read(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), FAULTS "%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

static long long backend_blocks(void)
{
	struct stat st;

	if (stat(cfg.path, &st))
		return -1;
	return st.st_blocks;
}

/* V4: WRITE_ZEROES without UNMAP never deallocates. */
static void t_wz_nounmap(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	struct virtio_blk_discard_write_zeroes *r;
	long long before, after;
	uint64_t sector = 2048;
	struct vbt_dev d;
	uint8_t *buf;
	int st;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "wz-nounmap: device setup: %s", strerror(errno));
		return;
	}
	buf = vbt_alloc(m, 65536, 4096);
	r = vbt_alloc(m, sizeof(*r), 8);
	vbt_fill(buf, 65536, 47);
	if (vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, sector, buf, 65536) != 0) {
		tap_result(false, "wz-nounmap: 64 KiB written");
		vbt_dev_close(&d);
		return;
	}
	before = backend_blocks();
	r->sector = sector;
	r->num_sectors = 128;
	r->flags = 0;
	st = vbt_rw(&d, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, r, sizeof(*r));
	after = backend_blocks();
	memset(buf, 0xee, 65536);
	if (st == VIRTIO_BLK_S_OK) {
		bool zero = vbt_rw(&d, 0, VIRTIO_BLK_T_IN, sector, buf,
				   65536) == 0 && all_zero(buf, 65536);

		tap_result(zero && after >= before,
			   "wz-nounmap: WRITE_ZEROES without UNMAP reads back zeroes (%s) and keeps the range allocated (%lld -> %lld blocks)",
			   zero ? "yes" : "no", before, after);
	} else {
		tap_result((st == VIRTIO_BLK_S_UNSUPP ||
			    st == VIRTIO_BLK_S_IOERR) && after >= before,
			   "wz-nounmap: WRITE_ZEROES without UNMAP the backend cannot do fails cleanly (status %d) and deallocates nothing (%lld -> %lld blocks)",
			   st, before, after);
	}
	vbt_dev_close(&d);
}

#define LONG_SEGS	250	/* data buffers: more than a request takes */

/* V7: a chain of too many buffers gets an error status, not a wedge. */
static void t_long_chain(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	struct vbt_seg s[LONG_SEGS + 2];
	struct virtio_blk_outhdr *h;
	uint8_t *data, *status, *buf;
	struct vbt_dev d;
	struct vbt_vq *vq;
	void *cookie = NULL;
	unsigned int i;
	int head, st;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "long-chain: device setup: %s", strerror(errno));
		return;
	}
	vq = &d.vq[0];
	h = vbt_alloc(m, sizeof(*h), 16);
	status = vbt_alloc(m, 1, 1);
	data = vbt_alloc(m, LONG_SEGS * 512, 4096);
	buf = vbt_alloc(m, 4096, 4096);
	h->type = VIRTIO_BLK_T_IN;
	h->ioprio = 0;
	h->sector = 0;
	*status = 0xff;
	s[0] = (struct vbt_seg){ vbt_gpa(m, h), sizeof(*h), false };
	for (i = 0; i < LONG_SEGS; i++)
		s[i + 1] = (struct vbt_seg){ vbt_gpa(m, data + i * 512), 512,
					     true };
	s[LONG_SEGS + 1] = (struct vbt_seg){ vbt_gpa(m, status), 1, true };
	head = vbt_vq_add(vq, s, LONG_SEGS + 2, true, h);
	if (head < 0) {
		tap_result(false, "long-chain: chain of %u descriptors built",
			   LONG_SEGS + 2);
		vbt_dev_close(&d);
		return;
	}
	vbt_vq_publish(vq, head);
	vbt_vq_kick_force(vq);
	head = vbt_vq_wait(vq, NULL, &cookie, 3000);
	st = *(volatile uint8_t *)status;
	tap_result(head >= 0 && cookie == h && st != VIRTIO_BLK_S_OK &&
		   st != 0xff,
		   "long-chain: a chain of %u buffers completes with an error status (%s, status %d)",
		   LONG_SEGS + 2, head >= 0 ? "completed" : "no completion in 3 s",
		   st);
	/* The queue is not wedged: the next request completes. */
	st = vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 4096);
	tap_result(st == VIRTIO_BLK_S_OK,
		   "long-chain: a read after it completes (status %d)", st);
	vbt_dev_close(&d);
}

/* V5: zoned block devices are refused. */
static void t_zoned(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	struct vbt_dev d;
	int r, err;

	vbt_mem_reset(m);
	r = vbt_dev_open(&d, m, &o);
	err = errno;
	if (!r)
		vbt_dev_close(&d);
	tap_result(r < 0 && err == EOPNOTSUPP,
		   "zoned: a zoned block device is refused as a backend (%s)",
		   r < 0 ? strerror(err) : "accepted");
}

struct rreq {
	struct virtio_blk_outhdr h;
	uint8_t st;
	uint8_t data[4096] __attribute__((aligned(4096)));
};

static void send_reads(struct vbt_vq *vq, struct vbt_mem *m,
		       struct rreq *r, unsigned int first, unsigned int n)
{
	uint16_t old = vq->avail_idx;
	unsigned int i;

	for (i = first; i < first + n; i++) {
		struct vbt_seg s[3] = {
			{ vbt_gpa(m, &r[i].h), sizeof(r[i].h), false },
			{ vbt_gpa(m, r[i].data), sizeof(r[i].data), true },
			{ vbt_gpa(m, &r[i].st), 1, true },
		};

		r[i].h.type = VIRTIO_BLK_T_IN;
		r[i].h.sector = i * 8;
		r[i].st = 0xff;
		vbt_vq_publish(vq, vbt_vq_add(vq, s, 3, false, &r[i]));
	}
	vbt_vq_kick(vq, old);
}

/*
 * V1: reads take a second.  One read, three more half a second later, the
 * device closed at once: release waits for them.  The first read's
 * completion work takes it alone and sleeps in retire (the fault delay)
 * until the three have completed too, so release stops interrupt
 * moderation meanwhile; then that work holds the interrupt (one retired,
 * three in flight), and sleeps again after it, so that release clears the
 * moderation state before the next completion work runs.  No moderation
 * timer may be left queued once release has stopped moderation: the
 * device is freed right after.
 */
static void t_irq_release(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	__u32 us = VHOST_BLK_IRQ_DELAY_MAX;
	long before, after;
	struct vbt_dev d;
	struct rreq *r;

	if (knob_read("fault_irq_timer_orphaned") < 0) {
		tap_skip("no fault injection in this build",
			 "irq-release: no moderation timer left at release");
		return;
	}
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "irq-release: device setup: %s",
			   strerror(errno));
		return;
	}
	if (ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, &us)) {
		tap_result(false, "irq-release: VHOST_BLK_SET_IRQ_DELAY: %s",
			   strerror(errno));
		vbt_dev_close(&d);
		return;
	}
	r = vbt_alloc(m, 4 * sizeof(*r), 4096);
	*vbt_used_event(&d.vq[0]) = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	before = knob_read("fault_irq_timer_orphaned");
	if (knob_write("fault_retire_delay_ms", 800)) {
		tap_result(false, "irq-release: fault_retire_delay_ms set");
		vbt_dev_close(&d);
		return;
	}
	send_reads(&d.vq[0], m, r, 0, 1);
	usleep(500000);
	send_reads(&d.vq[0], m, r, 1, 3);
	usleep(100000);
	/* Release drains the four reads: about four seconds. */
	vbt_dev_close(&d);
	knob_write("fault_retire_delay_ms", 0);
	after = knob_read("fault_irq_timer_orphaned");
	tap_result(after == before,
		   "irq-release: no moderation timer is left queued for the freed device (%ld found queued)",
		   after - before);
}

/*
 * V8: a direct bio checks the device's page cache before it is built;
 * the fault delay holds it between that check and its submission while a
 * buffered read caches the old data.  Once the write completed, a
 * buffered read must see the new data, as after the file path's
 * O_DIRECT write (which invalidates the range when it is done).
 */
static void t_bio_stale(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	uint64_t sector = 65536;	/* 32 MiB in */
	struct virtio_blk_outhdr *h;
	uint8_t *buf, *status;
	uint8_t *cached = NULL;
	struct vbt_vq *vq;
	struct vbt_dev d;
	struct vbt_seg s[3];
	uint16_t old;
	int fd = -1, head;
	bool stale, old_seen;

	if (!cfg.bdev || !cfg.direct || cfg.nodata) {
		tap_skip("needs a block device with data, --direct",
			 "bio-stale: page cache after a direct bio write");
		return;
	}
	if (knob_read("fault_bio_delay_ms") < 0) {
		tap_skip("no fault injection in this build",
			 "bio-stale: page cache after a direct bio write");
		return;
	}
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "bio-stale: device setup: %s", strerror(errno));
		return;
	}
	vq = &d.vq[0];
	fd = open(cfg.path, O_RDONLY);
	cached = aligned_alloc(4096, 4096);
	buf = vbt_alloc(m, 4096, 4096);
	h = vbt_alloc(m, sizeof(*h), 16);
	status = vbt_alloc(m, 1, 1);
	if (fd < 0 || !cached) {
		tap_result(false, "bio-stale: buffered fd on %s", cfg.path);
		goto out;
	}
	/* Old data on the device, nothing of it cached. */
	vbt_fill(buf, 4096, 1);
	if (vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, sector, buf, 4096) != 0) {
		tap_result(false, "bio-stale: first write");
		goto out;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	/* The new data, held before its submission. */
	knob_write("fault_bio_delay_ms", 600);
	vbt_fill(buf, 4096, 2);
	h->type = VIRTIO_BLK_T_OUT;
	h->ioprio = 0;
	h->sector = sector;
	*status = 0xff;
	s[0] = (struct vbt_seg){ vbt_gpa(m, h), sizeof(*h), false };
	s[1] = (struct vbt_seg){ vbt_gpa(m, buf), 4096, false };
	s[2] = (struct vbt_seg){ vbt_gpa(m, status), 1, true };
	old = vq->avail_idx;
	vbt_vq_publish(vq, vbt_vq_add(vq, s, 3, false, h));
	vbt_vq_kick(vq, old);
	usleep(200000);
	/* A buffered reader caches the old data meanwhile. */
	old_seen = pread(fd, cached, 4096, sector << 9) == 4096;
	head = vbt_vq_wait(vq, NULL, NULL, 5000);
	knob_write("fault_bio_delay_ms", 0);
	if (head < 0 || *status != VIRTIO_BLK_S_OK) {
		tap_result(false, "bio-stale: delayed write completes (status %d)",
			   *status);
		goto out;
	}
	if (pread(fd, cached, 4096, sector << 9) != 4096) {
		tap_result(false, "bio-stale: buffered read");
		goto out;
	}
	stale = memcmp(cached, buf, 4096) != 0;
	tap_result(old_seen && !stale,
		   "bio-stale: a buffered read after a direct bio write sees the new data, not the page cache's old copy (%s)",
		   stale ? "stale" : "fresh");
out:
	knob_write("fault_bio_delay_ms", 0);
	if (fd >= 0)
		close(fd);
	free(cached);
	vbt_dev_close(&d);
}

int vbt_review(struct vbt_mem *m, const char *what)
{
	if (!strcmp(what, "wz-nounmap"))
		t_wz_nounmap(m);
	else if (!strcmp(what, "long-chain"))
		t_long_chain(m);
	else if (!strcmp(what, "zoned"))
		t_zoned(m);
	else if (!strcmp(what, "irq-release"))
		t_irq_release(m);
	else if (!strcmp(what, "bio-stale"))
		t_bio_stale(m);
	else
		return -1;
	return 0;
}
