// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test hostile cases: malformed chains and rings, bad requests,
 * bad ioctls, and teardown with I/O in flight.  After each case a device
 * (the same one for request-level cases, a fresh one otherwise) must serve
 * a verified write + read, and the kernel must not have tainted itself
 * with a WARN, an oops or a bad page.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "vbt.h"

#define QSIZE		256
/* TAINT_BAD_PAGE, TAINT_DIE, TAINT_WARN, TAINT_SOFTLOCKUP */
#define BAD_TAINTS	((1UL << 5) | (1UL << 7) | (1UL << 9) | (1UL << 14))

static unsigned long taint0;

static int h_open(struct vbt_dev *d, struct vbt_mem *m, unsigned int qsize,
		  int backend_fd)
{
	struct vbt_opts o = {
		.nq = 1, .qsize = qsize, .backend_fd = backend_fd,
		.serial = "hostile",
	};

	vbt_mem_reset(m);
	if (vbt_dev_open(d, m, &o)) {
		tap_diag("device setup failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* A verified 4 KiB write + read on @d. */
static bool serves(struct vbt_dev *d, struct vbt_mem *m, uint64_t seed)
{
	uint8_t *w = vbt_alloc(m, 4096, 4096), *r = vbt_alloc(m, 4096, 4096);
	uint64_t sector = 100 + seed % 1000 * 8;

	vbt_fill(w, 4096, seed);
	memset(r, 0, 4096);
	return vbt_rw(d, 0, VIRTIO_BLK_T_OUT, sector, w, 4096) == 0 &&
	       vbt_rw(d, 0, VIRTIO_BLK_T_IN, sector, r, 4096) == 0 &&
	       (cfg.nodata || !memcmp(w, r, 4096));
}

static bool fresh_serves(struct vbt_mem *m)
{
	static uint64_t seed = 1000;
	struct vbt_dev d;
	bool ok;

	if (h_open(&d, m, QSIZE, -2))
		return false;
	ok = serves(&d, m, seed++);
	vbt_dev_close(&d);
	return ok;
}

static void verdict(bool ok, bool serve_ok, const char *name)
{
	unsigned long t = vbt_tainted();
	bool taint_ok = (t & BAD_TAINTS) == (taint0 & BAD_TAINTS);

	if (!serve_ok)
		tap_diag("%s: the device does not serve a normal request afterwards",
			 name);
	if (!taint_ok)
		tap_diag("%s: kernel tainted 0x%lx (was 0x%lx)", name, t, taint0);
	tap_result(ok && serve_ok && taint_ok, "hostile: %s", name);
	taint0 = t;
}

/* ---- raw rings ---- */

enum { R_USED, R_ERR, R_NONE };

static void raw_desc(struct vbt_vq *vq, unsigned int i, uint64_t addr,
		     uint32_t len, uint16_t flags, uint16_t next)
{
	vq->desc[i].addr = addr;
	vq->desc[i].len = len;
	vq->desc[i].flags = flags;
	vq->desc[i].next = next;
}

static void raw_avail(struct vbt_vq *vq, uint16_t head)
{
	vq->avail->ring[vq->avail_idx % vq->num] = head;
	vq->avail_idx++;
	vbt_vq_kick_force(vq);
}

static int raw_wait(struct vbt_vq *vq, uint32_t *len, int ms)
{
	uint64_t end = vbt_now_ns() + ms * 1000000ULL;

	while (vbt_now_ns() < end) {
		uint16_t idx = *(volatile uint16_t *)&vq->used->idx;

		if (vbt_vq_errored(vq))
			return R_ERR;
		if (idx != vq->last_used) {
			__sync_synchronize();
			if (len)
				*len = vq->used->ring[vq->last_used % vq->num].len;
			vq->last_used++;
			return R_USED;
		}
		usleep(1000);
	}
	return R_NONE;
}

struct hreq {
	struct virtio_blk_outhdr h;
	uint8_t st;
	uint8_t pad[15];
	uint8_t data[4096];
};

static struct hreq *hreq(struct vbt_mem *m, uint32_t type, uint64_t sector)
{
	struct hreq *r = vbt_alloc(m, sizeof(*r), 4096);

	memset(r, 0, sizeof(*r));
	r->h.type = type;
	r->h.sector = sector;
	r->st = 0xff;
	return r;
}

enum raw_case {
	RC_HOLE, RC_CROSS_END, RC_HUGE_LEN, RC_WRAP_ADDR, RC_LOOP, RC_IND_LOOP,
	RC_NEXT_OOR, RC_HEAD_OOR, RC_IND_LEN, RC_IND_HOLE, RC_IND_NESTED,
	RC_IND_ZERO, RC_IND_OVERSIZE, RC_OVERSIZE, RC_NO_STATUS,
	RC_ZERO_STATUS, RC_OUT_AFTER_IN, RC_IDX_JUMP, RC_USED_RO,
	RC_DESC_UNMAPPED, RC_STATUS_RO, RC_IND_NEXT, RC_INTO_RING, RC_NR,
};

static const char * const raw_names[RC_NR] = {
	[RC_HOLE] = "data address in a hole of the memory table",
	[RC_CROSS_END] = "data running off the end of a memory region",
	[RC_HUGE_LEN] = "descriptor length 0xffffffff",
	[RC_WRAP_ADDR] = "descriptor address + length wrapping 2^64",
	[RC_LOOP] = "descriptor chain looping on itself",
	[RC_IND_LOOP] = "loop inside an indirect table",
	[RC_NEXT_OOR] = "next index beyond the ring",
	[RC_HEAD_OOR] = "avail head index beyond the ring",
	[RC_IND_LEN] = "indirect table length not a multiple of 16",
	[RC_IND_HOLE] = "indirect table in unmapped guest memory",
	[RC_IND_NESTED] = "nested indirect descriptor",
	[RC_IND_ZERO] = "indirect table of length 0",
	[RC_IND_OVERSIZE] = "oversize chain: 260 indirect descriptors",
	[RC_OVERSIZE] = "oversize chain: 250 direct descriptors",
	[RC_NO_STATUS] = "chain without a status descriptor",
	[RC_ZERO_STATUS] = "status descriptor of length 0",
	[RC_OUT_AFTER_IN] = "device-readable descriptor after a writable one",
	[RC_IDX_JUMP] = "avail idx moved by more than the ring size",
	[RC_USED_RO] = "used ring in read-only memory",
	[RC_DESC_UNMAPPED] = "descriptor table at an unmapped user address",
	[RC_STATUS_RO] = "status byte in read-only guest memory",
	[RC_IND_NEXT] = "indirect flag together with next",
	[RC_INTO_RING] = "data buffer aliasing the descriptor table",
};

static void raw_case(struct vbt_mem *m, enum raw_case c)
{
	struct vbt_dev d;
	struct vbt_vq *vq;
	struct hreq *r;
	struct vring_desc *t;
	uint64_t tg, rg;
	uint32_t len = ~0U;
	void *ro = NULL, *hole;
	int res, i;
	bool ok = false, any = false;

	if (h_open(&d, m, QSIZE, -2)) {
		verdict(false, false, raw_names[c]);
		return;
	}
	vq = &d.vq[0];
	r = hreq(m, VIRTIO_BLK_T_IN, 8);
	rg = vbt_gpa(m, r);
	t = vq->indir[0];
	tg = vq->indir_gpa;
	/* The usual shape: header, data, status. */
	raw_desc(vq, 0, rg, 16, VRING_DESC_F_NEXT, 1);
	raw_desc(vq, 1, rg + 32, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	raw_desc(vq, 2, rg + 16, 1, VRING_DESC_F_WRITE, 0);

	switch (c) {
	case RC_HOLE:
		vq->desc[1].addr = VBT_GPA_HOLE;
		break;
	case RC_CROSS_END:
		vq->desc[1].addr = VBT_GPA_HIGH + VBT_CHUNK - 256;
		vq->desc[1].len = 4096;
		break;
	case RC_HUGE_LEN:
		vq->desc[1].len = 0xffffffff;
		break;
	case RC_WRAP_ADDR:
		vq->desc[1].addr = 0xfffffffffffff000ULL;
		vq->desc[1].len = 8192;
		break;
	case RC_LOOP:
		vq->desc[1].next = 1;
		break;
	case RC_IND_LOOP:
		memcpy(t, vq->desc, 3 * 16);
		t[1].next = 0;
		t[2].flags |= VRING_DESC_F_NEXT;
		t[2].next = 0;
		raw_desc(vq, 0, tg, 3 * 16, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_NEXT_OOR:
		vq->desc[1].next = QSIZE + 44;
		break;
	case RC_HEAD_OOR:
		vq->avail->ring[vq->avail_idx % vq->num] = QSIZE + 5;
		vq->avail_idx++;
		vbt_vq_kick_force(vq);
		goto wait;
	case RC_IND_LEN:
		memcpy(t, vq->desc, 3 * 16);
		raw_desc(vq, 0, tg, 24, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_IND_HOLE:
		raw_desc(vq, 0, VBT_GPA_HOLE, 48, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_IND_NESTED:
		memcpy(t, vq->desc, 3 * 16);
		t[1].flags |= VRING_DESC_F_INDIRECT;
		raw_desc(vq, 0, tg, 48, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_IND_ZERO:
		raw_desc(vq, 0, tg, 0, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_IND_OVERSIZE:
		t[0] = vq->desc[0];
		for (i = 1; i < 259; i++) {
			t[i].addr = rg + 32 + (i % 8) * 512;
			t[i].len = 512;
			t[i].flags = VRING_DESC_F_NEXT | VRING_DESC_F_WRITE;
			t[i].next = i + 1;
		}
		t[259] = vq->desc[2];
		raw_desc(vq, 0, tg, 260 * 16, VRING_DESC_F_INDIRECT, 0);
		break;
	case RC_OVERSIZE:
		for (i = 1; i < 249; i++)
			raw_desc(vq, i, rg + 32 + (i % 8) * 512, 512,
				 VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, i + 1);
		raw_desc(vq, 249, rg + 16, 1, VRING_DESC_F_WRITE, 0);
		break;
	case RC_NO_STATUS:
		vq->desc[0].flags = 0;
		any = true;	/* refused: vq_err, or returned unused */
		break;
	case RC_ZERO_STATUS:
		raw_desc(vq, 0, rg, 16, VRING_DESC_F_NEXT, 1);
		raw_desc(vq, 1, rg + 16, 0, VRING_DESC_F_WRITE, 0);
		any = true;
		break;
	case RC_OUT_AFTER_IN:
		vq->desc[1].flags = VRING_DESC_F_NEXT | VRING_DESC_F_WRITE;
		vq->desc[2].flags = 0;
		break;
	case RC_IDX_JUMP:
		vq->avail_idx += QSIZE + 1;
		vbt_vq_kick_force(vq);
		goto wait;
	case RC_USED_RO:
		ro = vq->used;
		mprotect(ro, 4096, PROT_READ);
		break;
	case RC_DESC_UNMAPPED: {
		struct vhost_vring_addr a = { .index = 0 };

		hole = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(hole, 4096);
		a.desc_user_addr = (uintptr_t)hole;
		a.avail_user_addr = (uintptr_t)vq->avail;
		a.used_user_addr = (uintptr_t)vq->used;
		if (ioctl(d.fd, VHOST_SET_VRING_ADDR, &a))
			any = true;	/* refused up front is fine too */
		break;
	}
	case RC_STATUS_RO:
		ro = r;
		mprotect(ro, 4096, PROT_READ);
		any = true;
		break;
	case RC_IND_NEXT:
		memcpy(t, vq->desc, 3 * 16);
		raw_desc(vq, 0, tg, 48, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1);
		any = true;
		break;
	case RC_INTO_RING:
		vq->desc[1].addr = vbt_gpa(m, vq->desc);
		any = true;
		break;
	default:
		break;
	}
	raw_avail(vq, 0);
wait:
	res = raw_wait(vq, &len, 2000);
	if (any)
		ok = true;
	else if (c == RC_NO_STATUS || c == RC_ZERO_STATUS)
		ok = res == R_ERR || (res == R_USED && len == 0);
	else
		ok = res == R_ERR;
	if (!ok)
		tap_diag("%s: outcome %s (used.len %u)", raw_names[c],
			 res == R_USED ? "used" : res == R_ERR ? "none, no vq error" :
			 "nothing", len);
	if (ro)
		mprotect(ro, 4096, PROT_READ | PROT_WRITE);
	vbt_dev_close(&d);
	verdict(ok, fresh_serves(m), raw_names[c]);
}

/* ---- request-level cases on one device ---- */

static int seg_io(struct vbt_dev *d, struct vbt_seg *s, unsigned int n,
		  volatile uint8_t *status, uint32_t *ul)
{
	struct vbt_vq *vq = &d->vq[0];
	uint16_t old = vq->avail_idx;
	int head = vbt_vq_add(vq, s, n, false, NULL);

	if (head < 0)
		return -1;
	vbt_vq_publish(vq, head);
	vbt_vq_kick(vq, old);
	if (vbt_vq_wait(vq, ul, NULL, 5000) < 0)
		return -1;
	return *status;
}

static int dwz_n(struct vbt_dev *d, struct vbt_mem *m, uint32_t type,
		 unsigned int n, uint64_t sector, uint32_t nr, uint32_t flags,
		 uint32_t bytes)
{
	struct virtio_blk_discard_write_zeroes *r = vbt_alloc(m, 16 * n, 8);
	struct vbt_io io = { .type = type, .data = r, .len = bytes };
	unsigned int i;

	for (i = 0; i < n; i++) {
		r[i].sector = sector + i * 8;
		r[i].num_sectors = nr;
		r[i].flags = flags;
	}
	return vbt_io(d, 0, &io);
}

static void req_cases(struct vbt_mem *m)
{
	struct vhost_blk_config c = { .size = sizeof(c) };
	uint64_t cap;
	struct vbt_dev d;
	struct hreq *r;
	struct vbt_seg s[6];
	uint32_t ul = 0;
	uint8_t *buf;
	uint64_t g;
	int st;

	if (h_open(&d, m, QSIZE, -2) || ioctl(d.fd, VHOST_BLK_GET_CONFIG, &c)) {
		tap_result(false, "hostile: request-level device setup");
		return;
	}
	cap = c.blk.capacity;
	buf = vbt_alloc(m, 8192, 4096);

#define REQ(expr, name) verdict((expr), serves(&d, m, __LINE__), name)
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_IN, cap, buf, 512) == VIRTIO_BLK_S_IOERR,
	    "read at sector == capacity -> IOERR");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_IN, ~0ULL, buf, 512) == VIRTIO_BLK_S_IOERR,
	    "sector 2^64-1 (sector + length overflows) -> IOERR");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_IN, cap - 1, buf, 1024) == VIRTIO_BLK_S_IOERR,
	    "read straddling the end of the device -> IOERR");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, 1ULL << 63, buf, 4096) == VIRTIO_BLK_S_IOERR,
	    "write at sector 2^63 -> IOERR");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 100) == VIRTIO_BLK_S_IOERR,
	    "read of 100 bytes (not a sector multiple) -> IOERR");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, 0, buf, 4095) == VIRTIO_BLK_S_IOERR,
	    "write of 4095 bytes -> IOERR");
	REQ(vbt_rw(&d, 0, 0xdeadbeef, 0, buf, 512) == VIRTIO_BLK_S_UNSUPP,
	    "unknown type 0xdeadbeef -> UNSUPP");
	REQ(vbt_rw(&d, 0, VIRTIO_BLK_T_OUT | 0x80000000, 0, buf, 512) ==
	    VIRTIO_BLK_S_UNSUPP, "legacy barrier bit -> UNSUPP");

	/* Header in a device-writable descriptor. */
	r = hreq(m, VIRTIO_BLK_T_IN, 0);
	g = vbt_gpa(m, r);
	s[0] = (struct vbt_seg){ g, 16, true };
	s[1] = (struct vbt_seg){ g + 32, 512, true };
	s[2] = (struct vbt_seg){ g + 16, 1, true };
	st = seg_io(&d, s, 3, &r->st, &ul);
	REQ(st == VIRTIO_BLK_S_IOERR, "device-writable header -> IOERR");

	r = hreq(m, VIRTIO_BLK_T_IN, 0);
	g = vbt_gpa(m, r);
	s[0] = (struct vbt_seg){ g, 8, false };
	s[1] = (struct vbt_seg){ g + 16, 1, true };
	st = seg_io(&d, s, 2, &r->st, &ul);
	REQ(st == VIRTIO_BLK_S_IOERR, "8-byte header -> IOERR");

	/* Status descriptor of 64 bytes: status is its last byte. */
	r = hreq(m, VIRTIO_BLK_T_FLUSH, 0);
	g = vbt_gpa(m, r);
	memset(r->data, 0xaa, 64);
	s[0] = (struct vbt_seg){ g, 16, false };
	s[1] = (struct vbt_seg){ g + 32, 64, true };
	st = seg_io(&d, s, 2, &r->data[63], &ul);
	REQ(st == 0 && r->data[0] == 0xaa,
	    "status descriptor longer than one byte: status in its last byte");

	REQ(dwz_n(&d, m, VIRTIO_BLK_T_DISCARD, 1, 0, 8, 0, 10) == VIRTIO_BLK_S_IOERR,
	    "discard payload of 10 bytes -> IOERR");
	REQ(dwz_n(&d, m, VIRTIO_BLK_T_DISCARD, 1, cap - 4, 8, 0, 16) ==
	    VIRTIO_BLK_S_IOERR, "discard beyond capacity -> IOERR");
	REQ(dwz_n(&d, m, VIRTIO_BLK_T_DISCARD, 1, 0, 8, 2, 16) ==
	    VIRTIO_BLK_S_UNSUPP, "discard with reserved flags -> UNSUPP");
	REQ(dwz_n(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 1, 0, 0xffffffff, 0, 16) ==
	    VIRTIO_BLK_S_IOERR, "write-zeroes of 2^32-1 sectors -> IOERR");
	REQ(dwz_n(&d, m, VIRTIO_BLK_T_DISCARD, 17, 0, 8, 0, 17 * 16) ==
	    VIRTIO_BLK_S_IOERR, "discard with 17 ranges (max 16) -> IOERR");
	REQ(dwz_n(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 1, ~0ULL - 3, 8, 0, 16) ==
	    VIRTIO_BLK_S_IOERR, "write-zeroes range wrapping 2^64 -> IOERR");

	{
		struct vbt_io io = { .type = VIRTIO_BLK_T_GET_ID, .data = buf,
				     .len = 5 };

		REQ(vbt_io(&d, 0, &io) == 0 && io.used_len == 6,
		    "GET_ID into a 5-byte buffer: truncated, used.len 6");
	}

	/* Zero-length descriptors inside a chain. */
	r = hreq(m, VIRTIO_BLK_T_IN, 8);
	g = vbt_gpa(m, r);
	s[0] = (struct vbt_seg){ g, 16, false };
	s[1] = (struct vbt_seg){ g + 32, 0, true };
	s[2] = (struct vbt_seg){ g + 32, 512, true };
	s[3] = (struct vbt_seg){ g + 1024, 0, true };
	s[4] = (struct vbt_seg){ g + 16, 1, true };
	st = seg_io(&d, s, 5, &r->st, &ul);
	REQ(st == 0 && ul == 513, "zero-length descriptors inside a chain");

	/* Data overlapping its own header. */
	r = hreq(m, VIRTIO_BLK_T_IN, 8);
	g = vbt_gpa(m, r);
	s[0] = (struct vbt_seg){ g, 16, false };
	s[1] = (struct vbt_seg){ g + 32, 512, true };
	s[2] = (struct vbt_seg){ g + 16, 1, true };
	s[1].gpa = g;
	st = seg_io(&d, s, 3, &r->st, &ul);
	REQ(st == 0, "read data landing on its own header");
#undef REQ
	vbt_dev_close(&d);
}

/* ---- ioctl-level cases ---- */

static int set_backend_raw(int fd, uint32_t size, int bfd, uint32_t flags,
			   uint16_t nq, uint32_t blk_size, uint32_t resv)
{
	struct {
		struct vhost_blk_backend b;
		uint8_t extra[16];
	} a;

	memset(&a, 0, sizeof(a));
	a.b.size = size;
	a.b.fd = bfd;
	a.b.flags = flags;
	a.b.num_queues = nq;
	a.b.blk_size = blk_size;
	a.b.reserved1 = resv;
	a.extra[15] = size > sizeof(a.b);
	return ioctl(fd, VHOST_BLK_SET_BACKEND, &a) ? errno : 0;
}

static void ioctl_cases(struct vbt_mem *m)
{
	struct vhost_vring_state vs;
	struct vbt_dev d;
	int bfd = vbt_open_backend(false);
	int pfd[2], dfd, e, fd;
	uint64_t f;
	bool ok;

	if (h_open(&d, m, QSIZE, -2)) {
		tap_result(false, "hostile: ioctl device setup");
		return;
	}
	vs = (struct vhost_vring_state){ .index = 0, .num = 100 };
	e = ioctl(d.fd, VHOST_SET_VRING_NUM, &vs) ? errno : 0;
	vs.num = 0;
	ok = e && (ioctl(d.fd, VHOST_SET_VRING_NUM, &vs) ? errno : 0);
	vs.num = 65536;
	ok = ok && (ioctl(d.fd, VHOST_SET_VRING_NUM, &vs) ? errno : 0);
	verdict(ok, serves(&d, m, 1), "ring size 100 / 0 / 65536 refused");

	vs = (struct vhost_vring_state){ .index = VBT_MAX_QUEUES, .num = 64 };
	verdict(ioctl(d.fd, VHOST_SET_VRING_NUM, &vs) && errno == ENOBUFS,
		serves(&d, m, 2), "vring index beyond the device's queues refused");

	vs = (struct vhost_vring_state){ .index = 0, .num = 128 };
	verdict(ioctl(d.fd, VHOST_SET_VRING_NUM, &vs) && errno == EBUSY,
		serves(&d, m, 3), "ring resize while the queue is running refused (EBUSY)");

	f = ~0ULL;
	verdict(ioctl(d.fd, VHOST_SET_FEATURES, &f) && errno == EOPNOTSUPP,
		serves(&d, m, 4), "SET_FEATURES with unknown bits -> EOPNOTSUPP");

	if (pipe(pfd))
		pfd[0] = pfd[1] = -1;
	dfd = open("/", O_RDONLY | O_DIRECTORY);
	ok = set_backend_raw(d.fd, 4, bfd, 0, 1, 0, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), bfd, 0x80, 1, 0, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), bfd, 0, 17, 0, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), bfd, 0, 1, 1000, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), bfd, 0, 1, 0, 1) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend) + 16, bfd, 0, 1, 0, 0) == E2BIG &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), pfd[0], 0, 1, 0, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), dfd, 0, 1, 0, 0) == EINVAL &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), -5, 0, 1, 0, 0) == EBADF &&
	     set_backend_raw(d.fd, sizeof(struct vhost_blk_backend), 9999, 0, 1, 0, 0) == EBADF;
	verdict(ok, serves(&d, m, 5),
		"SET_BACKEND with bad size/flags/queues/blk_size/reserved/fd refused");
	close(pfd[0]);
	close(pfd[1]);
	close(dfd);

	/* The other reserved fields, and blk_size a power of two either side. */
	{
		struct vhost_blk_backend b, z = {
			.size = sizeof(b), .fd = bfd, .num_queues = 1,
		};

		b = z;
		b.reserved0 = 1;
		e = ioctl(d.fd, VHOST_BLK_SET_BACKEND, &b) ? errno : 0;
		ok = e == EINVAL;
		b = z;
		b.reserved2[sizeof(b.reserved2) - 1] = 1;
		e = ioctl(d.fd, VHOST_BLK_SET_BACKEND, &b) ? errno : 0;
		ok = ok && e == EINVAL;
		b = z;
		b.blk_size = 256;
		e = ioctl(d.fd, VHOST_BLK_SET_BACKEND, &b) ? errno : 0;
		ok = ok && e == EINVAL;
		b = z;
		b.blk_size = 8192;
		e = ioctl(d.fd, VHOST_BLK_SET_BACKEND, &b) ? errno : 0;
		ok = ok && e == EINVAL;
	}
	verdict(ok, serves(&d, m, 10),
		"SET_BACKEND with reserved0 or reserved2 set, blk_size 256 or 8192 -> EINVAL");

	/* The u32 and u64 arguments: unreadable, or past their bound. */
	{
		__u32 us = VHOST_BLK_BATCH_DELAY_MAX + 1;

		ok = ioctl(d.fd, VHOST_BLK_SET_BATCH_DELAY, (void *)16) &&
		     errno == EFAULT;
		ok = ok && ioctl(d.fd, VHOST_BLK_SET_BATCH_DELAY, &us) &&
		     errno == EINVAL;
		us = VHOST_BLK_IRQ_DELAY_MAX + 1;
		ok = ok && ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, (void *)16) &&
		     errno == EFAULT;
		ok = ok && ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, &us) &&
		     errno == EINVAL;
		ok = ok && ioctl(d.fd, VHOST_BLK_SET_CAPACITY, (void *)16) &&
		     errno == EFAULT;
	}
	verdict(ok, serves(&d, m, 11),
		"SET_BATCH_DELAY/SET_IRQ_DELAY/SET_CAPACITY: bad pointer -> EFAULT, above the maximum -> EINVAL");

	ok = set_backend_raw(d.fd, sizeof(struct vhost_blk_backend) + 16, bfd, 0, 1, 0, 0) == E2BIG;
	{
		struct vhost_blk_config c;

		memset(&c, 0, sizeof(c));
		c.size = 4;
		ok = ok && ioctl(d.fd, VHOST_BLK_GET_CONFIG, &c) && errno == EINVAL;
		ok = ok && ioctl(d.fd, VHOST_BLK_GET_CONFIG, (void *)16) &&
		     errno == EFAULT;
	}
	verdict(ok, serves(&d, m, 6), "GET_CONFIG with size 4 or a bad pointer refused");

	/* Not the owner: a forked child has another mm. */
	fflush(stdout);
	if (fork() == 0) {
		struct vhost_vring_state st = { .index = 0 };

		_exit(ioctl(d.fd, VHOST_GET_VRING_BASE, &st) && errno == EPERM &&
		      vbt_attach(&d, -1, 0, 1, NULL) && errno == EPERM ? 0 : 1);
	}
	wait(&e);
	verdict(WIFEXITED(e) && WEXITSTATUS(e) == 0, serves(&d, m, 7),
		"ioctls from a process that is not the owner -> EPERM");

	/* A non-owner learns nothing from its arguments: EPERM comes first. */
	fflush(stdout);
	if (fork() == 0)
		_exit(set_backend_raw(d.fd, 4, bfd, 0, 1, 0, 0) == EPERM &&
		      set_backend_raw(d.fd, sizeof(struct vhost_blk_backend),
				      bfd, 0x80, 1, 0, 0) == EPERM &&
		      set_backend_raw(d.fd, 1 << 30, bfd, 0, 1, 0, 0) == EPERM ?
		      0 : 1);
	wait(&e);
	verdict(WIFEXITED(e) && WEXITSTATUS(e) == 0, serves(&d, m, 13),
		"SET_BACKEND from a non-owner: EPERM before the arguments are read");

	/* Nor can a non-owner tune the device. */
	fflush(stdout);
	if (fork() == 0) {
		__u32 us = 0;

		_exit(ioctl(d.fd, VHOST_BLK_SET_BATCH_DELAY, &us) &&
		      errno == EPERM &&
		      ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, &us) &&
		      errno == EPERM ? 0 : 1);
	}
	wait(&e);
	verdict(WIFEXITED(e) && WEXITSTATUS(e) == 0, serves(&d, m, 12),
		"SET_BATCH_DELAY/SET_IRQ_DELAY from a non-owner -> EPERM");

	/* Bigger than a page: refused whatever the tail holds. */
	{
		struct vhost_blk_backend *b = calloc(1, 8192);

		b->size = 4097;
		b->fd = bfd;
		b->num_queues = 1;
		e = ioctl(d.fd, VHOST_BLK_SET_BACKEND, b) ? errno : 0;
		free(b);
		verdict(e == E2BIG, serves(&d, m, 14),
			"SET_BACKEND with size 4097 (more than a page, zero tail) -> E2BIG");
		if (e)
			tap_diag("size 4097: %s", strerror(e));
	}

	/* O_APPEND would put every write at the end of the file. */
	fd = open(cfg.path, O_RDWR | O_APPEND | (cfg.direct ? O_DIRECT : 0));
	e = fd < 0 ? -1 : set_backend_raw(d.fd, sizeof(struct vhost_blk_backend),
					 fd, 0, 1, 0, 0);
	if (fd >= 0)
		close(fd);
	ok = e == EINVAL;
	if (!ok)
		tap_diag("O_APPEND backend: %s", e < 0 ? "open failed" : strerror(e));
	/* The old backend again, whatever happened. */
	ok = !vbt_attach(&d, bfd, 0, 1, NULL) && ok;
	verdict(ok, serves(&d, m, 15), "SET_BACKEND with an O_APPEND fd -> EINVAL");

	/*
	 * O_APPEND set afterwards on the open file the device holds (fcntl on
	 * any descriptor of it): a write must still land at its own sector.
	 */
	e = fcntl(bfd, F_GETFL);
	ok = e >= 0 && !fcntl(bfd, F_SETFL, e | O_APPEND) && serves(&d, m, 16);
	if (e >= 0)
		fcntl(bfd, F_SETFL, e);
	verdict(ok, serves(&d, m, 17),
		"O_APPEND set on the backend after SET_BACKEND: writes stay at their sector");
	vbt_dev_close(&d);

	fd = open("/dev/vhost-blk", O_RDWR);
	ok = fd >= 0 && set_backend_raw(fd, sizeof(struct vhost_blk_backend),
					bfd, 0, 1, 0, 0) == EPERM;
	if (fd >= 0)
		close(fd);
	verdict(ok, fresh_serves(m), "SET_BACKEND before SET_OWNER -> EPERM");
	close(bfd);
}

/* Kick before anything is set up, then set up: the queue works. */
static void kick_early(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .backend_fd = -1, .no_rings = true };
	struct vhost_vring_file f = { .index = 0 };
	struct vbt_dev d;
	uint64_t one = 1;
	int kfd, bfd;
	bool ok;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		verdict(false, false, "kick before setup");
		return;
	}
	kfd = eventfd(0, EFD_NONBLOCK);
	f.fd = kfd;
	ok = !ioctl(d.fd, VHOST_SET_VRING_KICK, &f) &&
	     write(kfd, &one, 8) == 8;
	usleep(20000);
	bfd = vbt_open_backend(false);
	ok = ok && !vbt_attach(&d, bfd, 0, 1, NULL) && write(kfd, &one, 8) == 8;
	usleep(20000);
	ok = ok && !vbt_vq_setup(&d, 0, QSIZE);
	close(bfd);
	close(kfd);
	verdict(ok, ok && serves(&d, m, 8),
		"kick before the ring (and backend) is set up, then set up");
	vbt_dev_close(&d);
}

/* Requests queued before a backend is attached run once it is. */
static void queued_before_attach(struct vbt_mem *m)
{
	struct vbt_dev d;
	struct vbt_io io;
	uint8_t *buf;
	int bfd;
	bool ok;

	if (h_open(&d, m, QSIZE, -1)) {
		verdict(false, false, "requests queued before attach");
		return;
	}
	buf = vbt_alloc(m, 4096, 4096);
	io = (struct vbt_io){ .type = VIRTIO_BLK_T_IN, .data = buf, .len = 4096 };
	/* vbt_io waits 10 s: submit by hand instead. */
	{
		struct vbt_vq *vq = &d.vq[0];
		struct hreq *r = hreq(m, VIRTIO_BLK_T_IN, 0);
		struct vbt_seg s[3] = {
			{ vbt_gpa(m, r), 16, false },
			{ vbt_gpa(m, r->data), 4096, true },
			{ vbt_gpa(m, &r->st), 1, true },
		};
		uint16_t old = vq->avail_idx;
		int head = vbt_vq_add(vq, s, 3, false, NULL);

		vbt_vq_publish(vq, head);
		vbt_vq_kick(vq, old);
		usleep(100000);
		ok = vbt_vq_poll(vq, NULL, NULL) == -1;
		bfd = vbt_open_backend(false);
		ok = ok && !vbt_attach(&d, bfd, 0, 1, NULL) &&
		     vbt_vq_wait(vq, NULL, NULL, 5000) >= 0 && r->st == 0;
		close(bfd);
	}
	(void)io;
	verdict(ok, serves(&d, m, 9), "requests queued before attach complete after it");
	vbt_dev_close(&d);
}

/* Fill @n requests (indirect, reads and writes) without waiting. */
static unsigned int flood(struct vbt_dev *d, struct vbt_mem *m, unsigned int q,
			  unsigned int n, struct hreq **rs)
{
	struct vbt_vq *vq = &d->vq[q];
	uint16_t old = vq->avail_idx;
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct hreq *r = hreq(m, i & 1 ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN,
				      (i % 512) * 8);
		struct vbt_seg s[3] = {
			{ vbt_gpa(m, r), 16, false },
			{ vbt_gpa(m, r->data), 4096, !(i & 1) },
			{ vbt_gpa(m, &r->st), 1, true },
		};
		int head = vbt_vq_add(vq, s, 3, true, r);

		if (head < 0)
			break;
		if (rs)
			rs[i] = r;
		vbt_vq_publish(vq, head);
	}
	vbt_vq_kick(vq, old);
	return i;
}

enum inflight_case { IF_MEMTABLE, IF_MEMTABLE_EMPTY, IF_SWAP, IF_DETACH,
		     IF_RESET, IF_CLOSE, IF_MUNMAP, IF_BOUND };

/* After VHOST_RESET_OWNER: owner, features, mem table, ring, backend again. */
static bool setup_again(struct vbt_dev *d)
{
	struct vbt_vq *vq = &d->vq[0];
	uint64_t f;
	int bfd;
	bool ok;

	close(vq->kick);
	close(vq->call);
	close(vq->err);
	free(vq->cookie);
	free(vq->indir);
	free(vq->chain_len);
	vq->num = 0;
	ok = !ioctl(d->fd, VHOST_SET_OWNER) &&
	     !ioctl(d->fd, VHOST_GET_FEATURES, &f) &&
	     !ioctl(d->fd, VHOST_SET_FEATURES, &d->features) &&
	     !vbt_set_mem_table(d, d->mem) && !vbt_vq_setup(d, 0, QSIZE);
	bfd = vbt_open_backend(false);
	ok = ok && !vbt_attach(d, bfd, 0, 1, NULL);
	close(bfd);
	return ok;
}

static void inflight_case(struct vbt_mem *m, enum inflight_case c)
{
	static const char * const names[] = {
		[IF_MEMTABLE] = "mem table replaced with I/O in flight",
		[IF_MEMTABLE_EMPTY] = "mem table emptied with I/O in flight",
		[IF_SWAP] = "backend swapped with I/O in flight",
		[IF_DETACH] = "backend detached with I/O in flight: all fetched requests retired",
		[IF_RESET] = "RESET_OWNER with I/O in flight, then set up again",
		[IF_CLOSE] = "fd closed with I/O in flight",
		[IF_MUNMAP] = "guest memory unmapped with I/O in flight, then close",
		[IF_BOUND] = "1000 requests on a 1024 ring (in-flight bound)",
	};
	struct vbt_mem m2, *mm = m;
	struct hreq *rs[1024];
	struct vbt_dev d;
	struct vbt_vq *vq;
	unsigned int n, i, done;
	bool ok = true, close_done = false;
	int bfd;

	if (c == IF_MUNMAP) {
		vbt_mem_init(&m2);
		mm = &m2;
	}
	if (h_open(&d, mm, c == IF_BOUND ? 1024 : QSIZE, -2)) {
		verdict(false, false, names[c]);
		return;
	}
	vq = &d.vq[0];
	n = flood(&d, mm, 0, c == IF_BOUND ? 1000 : 200, rs);
	switch (c) {
	case IF_MEMTABLE: {
		struct {
			struct vhost_memory h;
			struct vhost_memory_region r[4];
		} t;

		memset(&t, 0, sizeof(t));
		t.h.nregions = 4;
		for (i = 0; i < 4; i++) {
			t.r[i].guest_phys_addr = mm->gpa[i];
			t.r[i].memory_size = VBT_CHUNK;
			t.r[i].userspace_addr = (uintptr_t)(mm->base + ((i + 1) % 4) * VBT_CHUNK);
		}
		ok = !ioctl(d.fd, VHOST_SET_MEM_TABLE, &t);
		usleep(200000);
		/* Restore: later completions land where we look. */
		ok = ok && !vbt_set_mem_table(&d, mm);
		break;
	}
	case IF_MEMTABLE_EMPTY: {
		struct vhost_memory t = { .nregions = 0 };

		ok = !ioctl(d.fd, VHOST_SET_MEM_TABLE, &t);
		usleep(200000);
		ok = ok && !vbt_set_mem_table(&d, mm);
		break;
	}
	case IF_SWAP:
		bfd = vbt_open_backend(false);
		ok = !vbt_attach(&d, bfd, 0, 1, NULL);
		close(bfd);
		break;
	case IF_DETACH: {
		struct vhost_vring_state st = { .index = 0 };

		ok = !vbt_attach(&d, -1, 0, 1, NULL) &&
		     !ioctl(d.fd, VHOST_GET_VRING_BASE, &st);
		/* Every request the device fetched is in the used ring. */
		ok = ok && *(volatile uint16_t *)&vq->used->idx == st.num;
		if (!ok)
			tap_diag("used idx %u, vring base %u",
				 *(volatile uint16_t *)&vq->used->idx, st.num);
		bfd = vbt_open_backend(false);
		ok = !vbt_attach(&d, bfd, 0, 1, NULL) && ok;
		close(bfd);
		break;
	}
	case IF_RESET:
		ok = !ioctl(d.fd, VHOST_RESET_OWNER) && setup_again(&d) &&
		     serves(&d, mm, 10);
		vbt_dev_close(&d);
		close_done = true;
		break;
	case IF_CLOSE:
		vbt_dev_close(&d);
		close_done = true;
		break;
	case IF_MUNMAP:
		munmap(m2.base, VBT_MEM_SIZE);
		vbt_dev_close(&d);
		close_done = true;
		break;
	default:
		break;
	}
	if (!close_done) {
		/* Whatever was in flight completes (or the queue errs out). */
		for (done = 0; done < n; done++)
			if (vbt_vq_wait(vq, NULL, NULL, 5000) < 0)
				break;
		if (c == IF_SWAP || c == IF_DETACH || c == IF_BOUND) {
			ok = ok && done == n;
			for (i = 0; ok && i < n; i++)
				ok = rs[i]->st == 0;
		}
		if (c == IF_BOUND)
			tap_diag("%u of %u completed", done, n);
		vbt_dev_close(&d);
	}
	verdict(ok, fresh_serves(m), names[c]);
}

/* The VMM dies (SIGKILL) with I/O in flight. */
static void owner_killed(struct vbt_mem *m, bool workers)
{
	int p[2], status;
	pid_t pid;
	char c;

	if (pipe(p)) {
		verdict(false, false, "owner killed");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct vbt_opts o = { .nq = 2, .qsize = QSIZE, .backend_fd = -2,
				      .workers = workers };
		struct vbt_mem cm;
		struct vbt_dev d;

		vbt_mem_init(&cm);
		/* Without the worker ioctls (6.1): both queues on one worker. */
		if (vbt_dev_open(&d, &cm, &o) &&
		    (o.workers = false, vbt_dev_open(&d, &cm, &o)))
			_exit(1);
		/* Tell the parent which it got: 'w' a worker each, 'r' one. */
		if (write(p[1], o.workers ? "w" : "r", 1) != 1)
			_exit(1);
		for (;;) {
			unsigned int q;

			for (q = 0; q < 2; q++) {
				struct vbt_vq *vq = &d.vq[q];

				flood(&d, &cm, q, 64, NULL);
				while (vbt_vq_poll(vq, NULL, NULL) >= 0)
					;
			}
		}
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1) {
		close(p[0]);
		waitpid(pid, &status, 0);
		verdict(false, false, "owner killed with I/O in flight");
		return;
	}
	close(p[0]);
	usleep(100000);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	verdict(WIFSIGNALED(status), fresh_serves(m),
		c == 'w' ? "owner killed (SIGKILL) with I/O in flight on 2 queues / 2 workers" :
		workers ? "owner killed (SIGKILL) with I/O in flight on 2 queues / 1 worker (no worker ioctls)" :
			  "owner killed (SIGKILL) with I/O in flight on 2 queues");
}

/* ---- a worker flooded with chains the device refuses ---- */

#define FLOOD_RING	32768
#define FLOOD_CHAIN	200

struct flood {
	struct vbt_vq *vq;
	volatile bool stop;
	uint64_t chains;
};

/*
 * Keep the ring full: every avail entry names head 0, a chain of 200
 * descriptors without a device-writable byte, and avail idx is moved on as
 * soon as the device returns chains.  The device must walk the whole ring
 * (32768 chains, 6.5 million descriptors) before it sees it empty, so a
 * worker that does not yield on its own keeps looping as long as this thread
 * gets to run now and then.
 */
static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	struct vbt_vq *vq = f->vq;
	uint16_t last = 0;

	while (!f->stop) {
		uint16_t used = *(volatile uint16_t *)&vq->used->idx;

		if (used == last)
			continue;
		f->chains += (uint16_t)(used - last);
		last = used;
		vq->avail_idx = used + vq->num;
		vbt_vq_kick_force(vq);
	}
	return NULL;
}

/*
 * Queue 0 is flooded with chains that have no device-writable byte; queue 1,
 * on the same worker, must keep serving reads.  A worker that never yields
 * shows as a read waiting 10 s and, after about 20 s, as a soft lockup or an
 * RCU stall in the kernel log (which fails the run).
 */
void vbt_flood(struct vbt_mem *m, unsigned int seconds)
{
	struct vbt_opts o = { .nq = 2, .backend_fd = -1, .no_rings = true };
	const char *name = "queue 1 keeps serving reads while queue 0, on the same worker, is flooded with chains that have no status byte";
	struct flood f = { 0 };
	struct virtio_blk_outhdr *h;
	uint64_t reads = 0, end;
	struct vbt_vq *vq;
	struct vbt_dev d;
	pthread_t t;
	uint8_t *buf;
	bool stuck = false;
	unsigned int i;
	int st = 0, bfd;

	taint0 = vbt_tainted();
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o) || vbt_vq_setup(&d, 0, FLOOD_RING) ||
	    vbt_vq_setup(&d, 1, 64)) {
		tap_diag("device setup failed: %s", strerror(errno));
		verdict(false, false, name);
		return;
	}
	vq = &d.vq[0];
	h = vbt_alloc(m, sizeof(*h), 16);
	h->type = VIRTIO_BLK_T_IN;
	h->sector = 0;
	/* Head 0: FLOOD_CHAIN readable descriptors, each costing a walk. */
	for (i = 0; i < FLOOD_CHAIN; i++)
		raw_desc(vq, i, vbt_gpa(m, h), sizeof(*h),
			 i + 1 < FLOOD_CHAIN ? VRING_DESC_F_NEXT : 0, i + 1);
	vq->nfree = 0;
	vq->avail_idx = vq->num;	/* every avail entry is 0: head 0 */
	bfd = vbt_open_backend(false);
	if (bfd < 0 || vbt_attach(&d, bfd, 0, 2, NULL)) {
		tap_diag("attach failed: %s", strerror(errno));
		if (bfd >= 0)
			close(bfd);
		vbt_dev_close(&d);
		verdict(false, false, name);
		return;
	}
	close(bfd);
	vbt_vq_kick_force(vq);
	f.vq = vq;
	if (pthread_create(&t, NULL, flood_thread, &f)) {
		vbt_dev_close(&d);
		verdict(false, false, name);
		return;
	}
	buf = vbt_alloc(m, 4096, 4096);
	end = vbt_now_ns() + seconds * 1000000000ULL;
	while (vbt_now_ns() < end) {
		st = vbt_rw(&d, 1, VIRTIO_BLK_T_IN, 0, buf, 4096);
		if (st) {
			stuck = st < 0;
			break;
		}
		reads++;
	}
	/* The flood lasts its time even so: let the kernel log show a lockup. */
	while (vbt_now_ns() < end)
		usleep(100000);
	f.stop = true;
	pthread_join(t, NULL);
	tap_diag("flood: %llu chains refused on queue 0, %llu reads on queue 1 in %u s",
		 (unsigned long long)f.chains, (unsigned long long)reads, seconds);
	if (stuck)
		tap_diag("flood: a read on queue 1 waited 10 s without completing");
	else if (st)
		tap_diag("flood: a read on queue 1 failed with status %d", st);
	vbt_dev_close(&d);
	verdict(!st && reads > 0 && f.chains > FLOOD_RING, fresh_serves(m), name);
}

void vbt_hostile(struct vbt_mem *m)
{
	int c;

	taint0 = vbt_tainted();
	for (c = 0; c < RC_NR; c++)
		raw_case(m, c);
	req_cases(m);
	ioctl_cases(m);
	kick_early(m);
	queued_before_attach(m);
	for (c = IF_MEMTABLE; c <= IF_BOUND; c++)
		inflight_case(m, c);
	owner_killed(m, false);
	owner_killed(m, true);
}
