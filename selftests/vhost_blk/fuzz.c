// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --fuzz SEED COUNT: COUNT random descriptor chains built
 * from SEED (reproducible), each submitted alone.  Every chain must end in
 * a completion or a vq error (then the device is replaced); afterwards the
 * kernel must be untainted and a fresh device must serve verified I/O.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "vbt.h"

#define FUZZ_QSIZE	64
#define FUZZ_AREA	(256 << 10)
#define BAD_TAINTS	((1UL << 5) | (1UL << 7) | (1UL << 9) | (1UL << 14))

static uint64_t pick_addr(uint64_t *s, uint64_t area)
{
	switch (vbt_rand(s) % 20) {
	case 0:
		return VBT_GPA_HOLE + vbt_rand(s) % 4096;
	case 1:
		return VBT_GPA_HIGH + VBT_CHUNK - vbt_rand(s) % 1024;
	case 2:
		return vbt_rand(s);
	case 3:
		return VBT_GPA_LOW + VBT_CHUNK - vbt_rand(s) % 2048;
	default:
		return area + vbt_rand(s) % (FUZZ_AREA - 16384);
	}
}

static uint32_t pick_len(uint64_t *s)
{
	switch (vbt_rand(s) % 10) {
	case 0:
		return 0;
	case 1:
		return vbt_rand(s);
	case 2:
	case 3:
		return 1 + vbt_rand(s) % 32;
	case 4:
		return vbt_rand(s) % (1 << 20);
	default:
		return 512 * (1 + vbt_rand(s) % 16);
	}
}

static uint32_t pick_type(uint64_t *s)
{
	static const uint32_t types[] = {
		VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_FLUSH,
		VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_DISCARD,
		VIRTIO_BLK_T_WRITE_ZEROES, VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT,
	};
	uint64_t r = vbt_rand(s) % 10;

	return r < 8 ? types[r] : (uint32_t)vbt_rand(s);
}

static uint64_t pick_sector(uint64_t *s, uint64_t cap)
{
	switch (vbt_rand(s) % 8) {
	case 0:
		return cap - vbt_rand(s) % 16;
	case 1:
		return vbt_rand(s);
	case 2:
		return ~0ULL - vbt_rand(s) % 16;
	default:
		return vbt_rand(s) % cap;
	}
}

static int fuzz_open(struct vbt_dev *d, struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = FUZZ_QSIZE, .backend_fd = -2,
			      .serial = "fuzz" };

	vbt_mem_reset(m);
	return vbt_dev_open(d, m, &o);
}

void vbt_fuzz(struct vbt_mem *m, uint64_t seed, unsigned long count)
{
	unsigned long i, used = 0, errs = 0, stuck = 0, resets = 0;
	unsigned long taint0 = vbt_tainted();
	uint64_t s = seed * 2654435761ULL + 7, cap = cfg.size / 512;
	struct vbt_dev d;
	uint8_t *area;
	uint64_t ag;
	bool ok = true;

	if (fuzz_open(&d, m)) {
		tap_result(false, "fuzz: device setup (%s)", strerror(errno));
		return;
	}
	area = vbt_alloc(m, FUZZ_AREA, 4096);
	ag = vbt_gpa(m, area);
	for (i = 0; i < count; i++) {
		struct vbt_vq *vq = &d.vq[0];
		struct virtio_blk_outhdr *h = (void *)area;
		struct vring_desc *t;
		unsigned int n = 1 + vbt_rand(&s) % 6, j;
		bool indirect = vbt_rand(&s) % 4 == 0;
		uint64_t end;
		int res = 0;

		vbt_fill(area + 16, 4096, vbt_rand(&s));
		h->type = pick_type(&s);
		h->ioprio = 0;
		h->sector = pick_sector(&s, cap);
		if (h->type == VIRTIO_BLK_T_DISCARD ||
		    h->type == VIRTIO_BLK_T_WRITE_ZEROES) {
			struct virtio_blk_discard_write_zeroes *r = (void *)(area + 16);

			r->sector = pick_sector(&s, cap);
			r->num_sectors = vbt_rand(&s) % 4 ? vbt_rand(&s) % 256 :
				(uint32_t)vbt_rand(&s);
			r->flags = vbt_rand(&s) % 4 ? 0 : vbt_rand(&s) % 4;
		}
		t = indirect ? vq->indir[0] : vq->desc;
		for (j = 0; j < n; j++) {
			bool last = j + 1 == n;

			t[j].addr = pick_addr(&s, ag);
			t[j].len = pick_len(&s);
			t[j].flags = (last ? 0 : VRING_DESC_F_NEXT);
			t[j].next = j + 1;
			if (j && (last || vbt_rand(&s) % 3 == 0))
				t[j].flags |= VRING_DESC_F_WRITE;
			if (vbt_rand(&s) % 40 == 0)
				t[j].flags ^= VRING_DESC_F_WRITE;
			if (vbt_rand(&s) % 40 == 0)
				t[j].next = vbt_rand(&s) % (FUZZ_QSIZE + 4);
			if (vbt_rand(&s) % 60 == 0)
				t[j].flags |= VRING_DESC_F_INDIRECT;
		}
		/* Mostly a well-formed header at the area start. */
		if (vbt_rand(&s) % 5) {
			t[0].addr = ag;
			t[0].len = 16 + (h->type >= VIRTIO_BLK_T_DISCARD &&
					 h->type <= VIRTIO_BLK_T_WRITE_ZEROES ?
					 16 * (vbt_rand(&s) % 3) : 0);
			t[0].flags &= ~VRING_DESC_F_WRITE;
		}
		if (indirect) {
			vq->desc[0].addr = vq->indir_gpa;
			vq->desc[0].len = vbt_rand(&s) % 30 ? 16 * n :
					  vbt_rand(&s) % 4096;
			vq->desc[0].flags = VRING_DESC_F_INDIRECT;
		}
		vbt_vq_errored(vq);	/* forget an error of a completed chain */
		vq->avail->ring[vq->avail_idx % vq->num] = 0;
		vq->avail_idx++;
		vbt_vq_kick_force(vq);

		end = vbt_now_ns() + 2000000000ULL;
		while (vbt_now_ns() < end) {
			if (*(volatile uint16_t *)&vq->used->idx != vq->last_used) {
				vq->last_used++;
				res = 1;
				break;
			}
			if (vbt_vq_errored(vq)) {
				res = 2;
				break;
			}
			usleep(200);
		}
		if (res == 1) {
			used++;
			continue;
		}
		if (res == 2)
			errs++;
		else
			stuck++;
		if (cfg.verbose)
			tap_diag("chain %lu: %s", i, res == 2 ? "vq error" : "no completion");
		vbt_dev_close(&d);
		resets++;
		if (fuzz_open(&d, m)) {
			ok = false;
			break;
		}
		area = vbt_alloc(m, FUZZ_AREA, 4096);
		ag = vbt_gpa(m, area);
	}
	if (d.fd >= 0)
		vbt_dev_close(&d);
	tap_diag("fuzz seed %llu: %lu chains, %lu completed, %lu vq errors, %lu without answer",
		 (unsigned long long)seed, i, used, errs, stuck);
	tap_result(ok && (vbt_tainted() & BAD_TAINTS) == (taint0 & BAD_TAINTS),
		   "fuzz: %lu random chains (seed %llu), kernel untainted", count,
		   (unsigned long long)seed);
	/* A chain the device neither completes nor refuses is a bug. */
	tap_result(!stuck, "fuzz: every chain completed or refused with a vq error (%lu stuck)",
		   stuck);
	{
		struct vbt_dev f;
		uint8_t *w, *r;
		bool sv;

		sv = !fuzz_open(&f, m);
		w = vbt_alloc(m, 4096, 4096);
		r = vbt_alloc(m, 4096, 4096);
		vbt_fill(w, 4096, seed);
		sv = sv && vbt_rw(&f, 0, VIRTIO_BLK_T_OUT, 8, w, 4096) == 0 &&
		     vbt_rw(&f, 0, VIRTIO_BLK_T_IN, 8, r, 4096) == 0 &&
		     (cfg.nodata || !memcmp(w, r, 4096));
		if (f.fd >= 0)
			vbt_dev_close(&f);
		tap_result(sv, "fuzz: a fresh device serves verified I/O afterwards");
	}
}
