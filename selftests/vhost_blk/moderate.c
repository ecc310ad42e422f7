// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --irq-moderation: interrupt moderation
 * (VHOST_BLK_SET_IRQ_DELAY) on a backend whose reads take about a second
 * (null_blk completing from a timer).  One read is sent, then three more
 * half a second later: the first completes while the three are in flight.
 * With a delay, its interrupt is held (the stats count it) and still comes
 * within the delay, long before the three complete: no completion waits
 * for others.  Without a delay, or with nothing else in flight, nothing is
 * held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "vbt.h"

#define MREQ	4

struct mreq {
	struct virtio_blk_outhdr h;
	uint8_t st;
	uint8_t data[4096] __attribute__((aligned(4096)));
};

static void send_reads(struct vbt_vq *vq, struct vbt_mem *m,
		       struct mreq *r, unsigned int first, unsigned int n)
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

static uint16_t used_idx(struct vbt_vq *vq)
{
	return __atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE);
}

/*
 * @n reads at once, or one and then @n - 1 more after 500 ms, with the
 * device's delay @us.  Returns the completions in the used ring when the
 * first interrupt that found one came (below 1: none in 3 s); *held: runs
 * of the completion work whose interrupt the device held meanwhile, *late:
 * interrupts it sent when the delay had passed.  Every read is collected
 * before it returns.
 */
static int schedule(struct vbt_mem *m, __u32 us, unsigned int n,
		    unsigned long long *held, unsigned long long *late)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	unsigned long long h0, l0;
	struct vbt_dev d;
	struct vbt_vq *vq;
	struct mreq *r;
	struct pollfd p;
	uint64_t v, end;
	int seen = -1;
	unsigned int i;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_diag("device setup failed: %s", strerror(errno));
		return -2;
	}
	if (ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, &us)) {
		tap_diag("VHOST_BLK_SET_IRQ_DELAY %u: %s", us, strerror(errno));
		vbt_dev_close(&d);
		return -2;
	}
	vq = &d.vq[0];
	p = (struct pollfd){ .fd = vq->call, .events = POLLIN };
	r = vbt_alloc(m, MREQ * sizeof(*r), 4096);
	/* The device may interrupt for the first completion. */
	*vbt_used_event(vq) = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	h0 = vbt_stat_total("irq_held");
	l0 = vbt_stat_total("irq_timeouts");
	send_reads(vq, m, r, 0, 1);
	if (n > 1) {
		usleep(500000);
		send_reads(vq, m, r, 1, n - 1);
	}
	/*
	 * The first interrupt that finds a completion (the device's first
	 * kick interrupts once with none: a restarted device's guest looks
	 * at its used ring).
	 */
	end = vbt_now_ns() + 3000000000ULL;
	while (seen <= 0 && vbt_now_ns() < end) {
		if (poll(&p, 1, 100) == 1 &&
		    read(vq->call, &v, sizeof(v)) == sizeof(v))
			seen = used_idx(vq);
	}
	*held = vbt_stat_total("irq_held") - h0;
	*late = vbt_stat_total("irq_timeouts") - l0;
	for (i = 0; i < n; i++) {
		if (vbt_vq_wait(vq, NULL, NULL, 3000) < 0) {
			tap_diag("read %u of %u did not complete", i + 1, n);
			seen = -2;
			break;
		}
	}
	vbt_dev_close(&d);
	return seen;
}

void vbt_irq_moderation(struct vbt_mem *m)
{
	struct vbt_opts o = { .nq = 1, .qsize = 64, .backend_fd = -2 };
	unsigned long long held, late;
	__u32 us = VHOST_BLK_IRQ_DELAY_MAX + 1;
	struct vbt_dev d;
	int seen, r;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		tap_result(false, "irq moderation: device setup: %s",
			   strerror(errno));
		return;
	}
	r = ioctl(d.fd, VHOST_BLK_SET_IRQ_DELAY, &us);
	tap_result(r < 0 && errno == EINVAL,
		   "irq moderation: a delay above %u us is refused (EINVAL)",
		   VHOST_BLK_IRQ_DELAY_MAX);
	vbt_dev_close(&d);
	if (access("/sys/kernel/debug/vhost-blk", F_OK)) {
		tap_skip("debugfs not mounted", "irq moderation: held interrupts");
		return;
	}

	seen = schedule(m, VHOST_BLK_IRQ_DELAY_MAX, MREQ, &held, &late);
	tap_result(seen == 1 && held >= 1 && late == 1,
		   "irq moderation: a read completed with %u in flight has its interrupt held (%llu held) and sent when the delay passed (%llu), before they complete (%d of %u in the used ring)",
		   MREQ - 1, held, late, seen, MREQ);

	seen = schedule(m, 0, MREQ, &held, &late);
	tap_result(seen == 1 && held == 0,
		   "irq moderation: with no delay nothing is held (%llu held, %d in the used ring at the interrupt)",
		   held, seen);

	seen = schedule(m, VHOST_BLK_IRQ_DELAY_MAX, 1, &held, &late);
	tap_result(seen == 1 && held == 0,
		   "irq moderation: a read alone in flight is not held (%llu held, %d in the used ring at the interrupt)",
		   held, seen);
}
