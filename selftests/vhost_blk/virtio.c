// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test driver core: guest memory with its own memory table, split
 * rings with direct and indirect descriptors and event idx, and the
 * /dev/vhost-blk setup.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "vbt.h"

#define barrier()	__asm__ __volatile__("" ::: "memory")
#define mb()		__sync_synchronize()

static void mem_init(struct vbt_mem *m, int share)
{
	m->base = mmap(NULL, VBT_MEM_SIZE, PROT_READ | PROT_WRITE,
		       share | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (m->base == MAP_FAILED) {
		perror("mmap guest memory");
		exit(1);
	}
	m->gpa[0] = VBT_GPA_LOW + VBT_CHUNK;
	m->gpa[1] = VBT_GPA_LOW;
	m->gpa[2] = VBT_GPA_HIGH;
	m->gpa[3] = VBT_GPA_HIGH + 4 * VBT_CHUNK;
	vbt_mem_reset(m);
}

void vbt_mem_init(struct vbt_mem *m)
{
	mem_init(m, MAP_PRIVATE);
}

/* Guest memory a forked child shares with its parent, at the same address. */
void vbt_mem_init_shared(struct vbt_mem *m)
{
	mem_init(m, MAP_SHARED);
}

void vbt_mem_reset(struct vbt_mem *m)
{
	m->data_brk = 0;
	m->ring_brk = 0;
}

/* Data buffers: chunk 2 (wraps around: tests use little at a time). */
void *vbt_alloc(struct vbt_mem *m, size_t size, size_t align)
{
	size_t off = (m->data_brk + align - 1) & ~(align - 1);

	if (off + size > VBT_CHUNK)
		off = 0;
	m->data_brk = off + size;
	return m->base + 2 * VBT_CHUNK + off;
}

static void *vbt_ring_alloc(struct vbt_mem *m, size_t size)
{
	size_t off = (m->ring_brk + 4095) & ~4095UL;

	if (off + size > VBT_CHUNK)
		off = 0;
	m->ring_brk = off + size;
	memset(m->base + 3 * VBT_CHUNK + off, 0, size);
	return m->base + 3 * VBT_CHUNK + off;
}

uint64_t vbt_gpa(struct vbt_mem *m, const void *hva)
{
	size_t off = (const uint8_t *)hva - m->base;

	if (off >= VBT_MEM_SIZE)
		return ~0ULL;
	return m->gpa[off / VBT_CHUNK] + off % VBT_CHUNK;
}

void *vbt_hva(struct vbt_mem *m, uint64_t gpa)
{
	int i;

	for (i = 0; i < 4; i++)
		if (gpa >= m->gpa[i] && gpa < m->gpa[i] + VBT_CHUNK)
			return m->base + i * VBT_CHUNK + (gpa - m->gpa[i]);
	return NULL;
}

int vbt_set_mem_table(struct vbt_dev *d, struct vbt_mem *m)
{
	struct {
		struct vhost_memory h;
		struct vhost_memory_region r[4];
	} t;
	int i;

	memset(&t, 0, sizeof(t));
	t.h.nregions = 4;
	for (i = 0; i < 4; i++) {
		t.r[i].guest_phys_addr = m->gpa[i];
		t.r[i].memory_size = VBT_CHUNK;
		t.r[i].userspace_addr = (uintptr_t)(m->base + i * VBT_CHUNK);
	}
	return ioctl(d->fd, VHOST_SET_MEM_TABLE, &t);
}

int vbt_open_backend(bool ro)
{
	int flags = (ro ? O_RDONLY : O_RDWR) | (cfg.direct ? O_DIRECT : 0);

	return open(cfg.path, flags);
}

int vbt_attach(struct vbt_dev *d, int fd, uint32_t flags, unsigned int nq,
	       const char *serial)
{
	struct vhost_blk_backend b;

	memset(&b, 0, sizeof(b));
	b.size = sizeof(b);
	b.fd = fd;
	b.flags = flags;
	b.num_queues = nq;
	if (serial)
		memcpy(b.serial, serial, strnlen(serial, sizeof(b.serial)));
	return ioctl(d->fd, VHOST_BLK_SET_BACKEND, &b);
}

int vbt_vq_setup(struct vbt_dev *d, unsigned int i, unsigned int num)
{
	struct vbt_vq *vq = &d->vq[i];
	struct vhost_vring_state st = { .index = i, .num = num };
	struct vhost_vring_addr a = { .index = i };
	struct vhost_vring_file f = { .index = i };
	struct vring_desc *tables;
	unsigned int j;

	memset(vq, 0, sizeof(*vq));
	vq->num = num;
	vq->kick = vq->call = vq->err = -1;
	vq->desc = vbt_ring_alloc(d->mem, 16 * num);
	vq->avail = vbt_ring_alloc(d->mem, 6 + 2 * num);
	vq->used = vbt_ring_alloc(d->mem, 6 + 8 * num);
	vq->cookie = calloc(num, sizeof(*vq->cookie));
	vq->indir = calloc(num, sizeof(*vq->indir));
	vq->chain_len = calloc(num, sizeof(*vq->chain_len));
	/* Indirect tables only for rings they fit beside (VBT_INDIR_RING). */
	tables = num <= VBT_INDIR_RING ?
		 vbt_ring_alloc(d->mem, 16 * VBT_INDIR_MAX * num) : NULL;
	vq->indir_gpa = tables ? vbt_gpa(d->mem, tables) : 0;
	for (j = 0; j < num; j++) {
		vq->desc[j].next = j + 1;
		vq->indir[j] = tables ? tables + j * VBT_INDIR_MAX : NULL;
	}
	vq->free_head = 0;
	vq->nfree = num;
	vq->event_idx = d->features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
	vq->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	vq->call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	vq->err = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (ioctl(d->fd, VHOST_SET_VRING_NUM, &st))
		return -1;
	st.num = 0;
	if (ioctl(d->fd, VHOST_SET_VRING_BASE, &st))
		return -1;
	a.desc_user_addr = (uintptr_t)vq->desc;
	a.avail_user_addr = (uintptr_t)vq->avail;
	a.used_user_addr = (uintptr_t)vq->used;
	if (ioctl(d->fd, VHOST_SET_VRING_ADDR, &a))
		return -1;
	f.fd = vq->call;
	if (ioctl(d->fd, VHOST_SET_VRING_CALL, &f))
		return -1;
	f.fd = vq->err;
	if (ioctl(d->fd, VHOST_SET_VRING_ERR, &f))
		return -1;
	f.fd = vq->kick;
	if (ioctl(d->fd, VHOST_SET_VRING_KICK, &f))
		return -1;
	return 0;
}

int vbt_dev_open(struct vbt_dev *d, struct vbt_mem *m,
		 const struct vbt_opts *o)
{
	uint64_t features;
	unsigned int i;
	int fd;

	memset(d, 0, sizeof(*d));
	d->mem = m;
	d->nq = o->nq ? o->nq : 1;
	d->fd = o->have_dev_fd ? o->dev_fd :
		open("/dev/vhost-blk", O_RDWR | O_CLOEXEC);
	if (d->fd < 0)
		return -1;
	if (ioctl(d->fd, VHOST_SET_OWNER))
		goto err;
	if (ioctl(d->fd, VHOST_GET_FEATURES, &features))
		goto err;
	/* Dirty logging is for migrations (migrate.c), never on by default. */
	d->features = features & (o->features ? o->features : ~0ULL) &
		      ~(1ULL << VHOST_F_LOG_ALL);
	if (ioctl(d->fd, VHOST_SET_FEATURES, &d->features))
		goto err;
	if (vbt_set_mem_table(d, m))
		goto err;
	if (o->no_rings)
		return 0;
	for (i = 0; i < d->nq; i++) {
		if (vbt_vq_setup(d, i, o->qsize ? o->qsize : 128))
			goto err;
#ifdef VHOST_NEW_WORKER
		if (o->workers && i > 0) {
			struct vhost_worker_state ws = {};
			struct vhost_vring_worker vw = { .index = i };

			if (ioctl(d->fd, VHOST_NEW_WORKER, &ws))
				goto err;
			vw.worker_id = ws.worker_id;
			if (ioctl(d->fd, VHOST_ATTACH_VRING_WORKER, &vw))
				goto err;
		}
#endif
	}
	if (o->backend_fd == -1)
		return 0;
	fd = o->backend_fd;
	if (fd == -2)
		fd = vbt_open_backend(o->be_flags & VHOST_BLK_BACKEND_F_RO);
	if (fd < 0)
		goto err;
	i = vbt_attach(d, fd, o->be_flags, d->nq, o->serial);
	if (o->backend_fd == -2)
		close(fd);
	if (i)
		goto err;
	return 0;
err:
	i = errno;
	vbt_dev_close(d);
	errno = i;
	return -1;
}

void vbt_dev_close(struct vbt_dev *d)
{
	unsigned int i;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	for (i = 0; i < VBT_MAX_QUEUES; i++) {
		struct vbt_vq *vq = &d->vq[i];

		if (!vq->num)
			continue;
		close(vq->kick);
		close(vq->call);
		close(vq->err);
		free(vq->cookie);
		free(vq->indir);
		free(vq->chain_len);
		vq->num = 0;
	}
}

static uint16_t vbt_get_desc(struct vbt_vq *vq)
{
	uint16_t h = vq->free_head;

	vq->free_head = vq->desc[h].next;
	vq->nfree--;
	return h;
}

/* Returns the head, or -1 if the ring is full. */
int vbt_vq_add(struct vbt_vq *vq, const struct vbt_seg *segs, unsigned int n,
	       bool indirect, void *cookie)
{
	unsigned int i, need = indirect ? 1 : n;
	uint16_t head, d = 0, prev = 0;

	if (!n || vq->nfree < need ||
	    (indirect && (n > VBT_INDIR_MAX || !vq->indir_gpa)))
		return -1;
	if (indirect) {
		struct vring_desc *t;

		head = vbt_get_desc(vq);
		t = vq->indir[head];
		for (i = 0; i < n; i++) {
			t[i].addr = segs[i].gpa;
			t[i].len = segs[i].len;
			t[i].flags = (segs[i].write ? VRING_DESC_F_WRITE : 0) |
				     (i + 1 < n ? VRING_DESC_F_NEXT : 0);
			t[i].next = i + 1;
		}
		vq->desc[head].addr = vq->indir_gpa +
				      (uint64_t)head * 16 * VBT_INDIR_MAX;
		vq->desc[head].len = 16 * n;
		vq->desc[head].flags = VRING_DESC_F_INDIRECT;
		vq->chain_len[head] = 1;
		vq->cookie[head] = cookie;
		return head;
	}
	head = vq->free_head;
	for (i = 0; i < n; i++) {
		d = vbt_get_desc(vq);
		if (i)
			vq->desc[prev].flags |= VRING_DESC_F_NEXT;
		vq->desc[d].addr = segs[i].gpa;
		vq->desc[d].len = segs[i].len;
		vq->desc[d].flags = segs[i].write ? VRING_DESC_F_WRITE : 0;
		prev = d;
	}
	vq->chain_len[head] = n;
	vq->cookie[head] = cookie;
	return head;
}

void vbt_vq_publish(struct vbt_vq *vq, uint16_t head)
{
	vq->avail->ring[vq->avail_idx % vq->num] = head;
	vq->avail_idx++;
}

static inline uint16_t *vbt_avail_event(struct vbt_vq *vq)
{
	return (uint16_t *)&vq->used->ring[vq->num];
}

void vbt_vq_kick_force(struct vbt_vq *vq)
{
	uint64_t one = 1;

	mb();
	vq->avail->idx = vq->avail_idx;
	mb();
	vq->kicks++;
	if (write(vq->kick, &one, sizeof(one)) != sizeof(one))
		perror("kick");
}

/* Publish avail->idx and kick if the device asks for it. */
void vbt_vq_kick(struct vbt_vq *vq, uint16_t old_idx)
{
	uint64_t one = 1;
	bool need;

	mb();
	vq->avail->idx = vq->avail_idx;
	mb();
	if (vq->event_idx)
		need = vring_need_event(*(volatile uint16_t *)vbt_avail_event(vq),
					vq->avail_idx, old_idx);
	else
		need = !(*(volatile uint16_t *)&vq->used->flags &
			 VRING_USED_F_NO_NOTIFY);
	if (need) {
		vq->kicks++;
		if (write(vq->kick, &one, sizeof(one)) != sizeof(one))
			perror("kick");
	}
}

static void vbt_free_chain(struct vbt_vq *vq, uint16_t head)
{
	unsigned int n = vq->chain_len[head];
	uint16_t d = head, next;

	while (n--) {
		next = vq->desc[d].next;
		vq->desc[d].next = vq->free_head;
		vq->free_head = d;
		vq->nfree++;
		d = next;
	}
	vq->chain_len[head] = 0;
}

/* One completion if there is one: returns the head, or -1. */
int vbt_vq_poll(struct vbt_vq *vq, uint32_t *len, void **cookie)
{
	struct vring_used_elem e;
	uint16_t idx;

	idx = *(volatile uint16_t *)&vq->used->idx;
	if (idx == vq->last_used)
		return -1;
	mb();
	e = vq->used->ring[vq->last_used % vq->num];
	vq->last_used++;
	if (e.id >= vq->num || !vq->chain_len[e.id]) {
		fprintf(stderr, "# bad used id %u\n", e.id);
		return -2;
	}
	if (len)
		*len = e.len;
	if (cookie)
		*cookie = vq->cookie[e.id];
	vbt_free_chain(vq, e.id);
	return e.id;
}

/* Wait for one completion: the interrupt path (call eventfd). */
int vbt_vq_wait(struct vbt_vq *vq, uint32_t *len, void **cookie,
		int timeout_ms)
{
	uint64_t end = vbt_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct pollfd p = { .fd = vq->call, .events = POLLIN };
	uint64_t v;
	int h;

	for (;;) {
		h = vbt_vq_poll(vq, len, cookie);
		if (h != -1)
			return h;
		if (vq->event_idx) {
			*vbt_used_event(vq) = vq->last_used;
			mb();
		}
		h = vbt_vq_poll(vq, len, cookie);
		if (h != -1)
			return h;
		if (vbt_now_ns() > end)
			return -1;
		if (poll(&p, 1, 50) > 0 &&
		    read(vq->call, &v, sizeof(v)) == sizeof(v))
			vq->irqs++;
	}
}

bool vbt_vq_errored(struct vbt_vq *vq)
{
	uint64_t v;

	return read(vq->err, &v, sizeof(v)) == sizeof(v);
}

bool vbt_vq_wait_err(struct vbt_vq *vq, int timeout_ms)
{
	struct pollfd p = { .fd = vq->err, .events = POLLIN };

	return poll(&p, 1, timeout_ms) > 0 && vbt_vq_errored(vq);
}

uint64_t vbt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Build, submit and wait for one request: header, data, status. */
int vbt_io(struct vbt_dev *d, unsigned int q, struct vbt_io *io)
{
	struct vbt_vq *vq = &d->vq[q];
	struct virtio_blk_outhdr *hdr;
	struct vbt_seg segs[3];
	uint8_t *status;
	unsigned int n = 0;
	uint16_t old = vq->avail_idx;
	int head;

	hdr = vbt_alloc(d->mem, sizeof(*hdr), 16);
	status = vbt_alloc(d->mem, 1, 1);
	hdr->type = io->type;
	hdr->ioprio = 0;
	hdr->sector = io->sector;
	*status = 0xff;
	segs[n++] = (struct vbt_seg){ vbt_gpa(d->mem, hdr), sizeof(*hdr), false };
	if (io->len)
		segs[n++] = (struct vbt_seg){ vbt_gpa(d->mem, io->data), io->len,
				io->type != VIRTIO_BLK_T_OUT &&
				io->type != VIRTIO_BLK_T_DISCARD &&
				io->type != VIRTIO_BLK_T_WRITE_ZEROES };
	segs[n++] = (struct vbt_seg){ vbt_gpa(d->mem, status), 1, true };
	head = vbt_vq_add(vq, segs, n, io->indirect, io);
	if (head < 0)
		return -1;
	vbt_vq_publish(vq, head);
	vbt_vq_kick(vq, old);
	io->status = -1;
	if (vbt_vq_wait(vq, &io->used_len, NULL, 10000) < 0)
		return -1;
	io->status = *status;
	return io->status;
}

void vbt_burst_start(struct vbt_dev *d, struct vbt_burst *b, unsigned int n)
{
	struct vbt_vq *vq = &d->vq[0];
	uint16_t old = vq->avail_idx;
	unsigned int i;

	memset(b, 0, sizeof(*b));
	b->n = n < VBT_BURST_MAX ? n : VBT_BURST_MAX;
	for (i = 0; i < b->n; i++) {
		struct virtio_blk_outhdr *h;
		struct vbt_seg s[3];

		b->buf[i] = vbt_alloc(d->mem, 4096, 4096);
		h = vbt_alloc(d->mem, sizeof(*h), 16);
		b->status[i] = vbt_alloc(d->mem, 1, 1);
		h->type = VIRTIO_BLK_T_IN;
		h->ioprio = 0;
		h->sector = i * 8;
		*b->status[i] = 0xff;
		s[0] = (struct vbt_seg){ vbt_gpa(d->mem, h), sizeof(*h), false };
		s[1] = (struct vbt_seg){ vbt_gpa(d->mem, b->buf[i]), 4096, true };
		s[2] = (struct vbt_seg){ vbt_gpa(d->mem, b->status[i]), 1, true };
		vbt_vq_publish(vq, vbt_vq_add(vq, s, 3, false,
					      (void *)(uintptr_t)(i + 1)));
	}
	vbt_vq_kick(vq, old);
}

void vbt_burst_wait(struct vbt_dev *d, struct vbt_burst *b)
{
	bool seen[VBT_BURST_MAX] = { false };

	for (b->done = 0; b->done < b->n; b->done++) {
		void *c;
		uintptr_t k;

		if (vbt_vq_wait(&d->vq[0], NULL, &c, 10000) < 0)
			break;
		k = (uintptr_t)c;
		if (k < 1 || k > b->n || seen[k - 1]) {
			b->dup++;
			continue;
		}
		seen[k - 1] = true;
		if (*b->status[k - 1])
			b->bad++;
	}
}

int vbt_rw(struct vbt_dev *d, unsigned int q, uint32_t type, uint64_t sector,
	   void *buf, uint32_t len)
{
	struct vbt_io io = { .type = type, .sector = sector, .data = buf,
			     .len = len };

	return vbt_io(d, q, &io);
}

void vbt_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = vbt_rand(&s);

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

static int vbt_check_fd(void)
{
	static int fd = -1;

	if (fd < 0)
		fd = open(cfg.path, O_RDWR);
	return fd;
}

int vbt_backend_pread(void *buf, size_t len, uint64_t off)
{
	return pread(vbt_check_fd(), buf, len, off) == (ssize_t)len ? 0 : -1;
}

int vbt_backend_pwrite(const void *buf, size_t len, uint64_t off)
{
	int fd = vbt_check_fd();

	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		return -1;
	return fdatasync(fd);
}

unsigned long vbt_tainted(void)
{
	unsigned long t = 0;
	FILE *f = fopen("/proc/sys/kernel/tainted", "r");

	if (f) {
		if (fscanf(f, "%lu", &t) != 1)
			t = 0;
		fclose(f);
	}
	return t;
}

static int tap_n, tap_fail;

static void tap_line(const char *pre, const char *fmt, va_list ap,
		     const char *suffix)
{
	printf("%s - ", pre);
	vprintf(fmt, ap);
	printf("%s\n", suffix);
	fflush(stdout);
}

void tap_result(bool ok, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!ok)
		tap_fail++;
	va_start(ap, fmt);
	tap_line(ok ? "ok" : "not ok", fmt, ap, "");
	va_end(ap);
}

void tap_skip(const char *reason, const char *fmt, ...)
{
	char sfx[256];
	va_list ap;

	tap_n++;
	snprintf(sfx, sizeof(sfx), " # SKIP %s", reason);
	va_start(ap, fmt);
	tap_line("ok", fmt, ap, sfx);
	va_end(ap);
}

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int tap_done(void)
{
	printf("1..%d\n", tap_n);
	tap_diag("%d tests, %d failed", tap_n, tap_fail);
	return tap_fail ? 1 : 0;
}
