// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --owner-killed: the VMM is killed (SIGKILL) while reads it
 * queued are in flight on a slow backend (null_blk completing from a timer,
 * a second or so later).  Its guest memory is shared with this process, as
 * a guest's memfd is shared between QEMU and a vhost-user back-end, so the
 * rings can be read once it is gone.  When the dead process has been
 * reaped (its files, the device among them, are released on its way out),
 * every request the device fetched must be in the used ring with its
 * status: a back-end started again resumes at the used index, and a
 * request fetched but never published would be lost to the guest, or
 * fetched twice.  Since 6.4 the queues' vhost workers die with the process,
 * before their requests complete.  Then a device of this process takes the
 * rings over where they stand, as a bridge started again does: it must
 * signal the guest once, since the dead one's interrupts went to a call
 * eventfd the front-end has replaced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "vbt.h"

#define KQ	2	/* queues */
#define KREQ	16	/* reads in flight on each */

struct kreq {
	struct virtio_blk_outhdr h;
	uint8_t st;
	uint8_t pad[4095 - sizeof(struct virtio_blk_outhdr)];
	uint8_t data[4096];
};

/* What the child tells its parent, once its reads are on their way. */
struct kreport {
	struct vring_used *used[KQ];
	struct kreq *req[KQ][KREQ];
	uint16_t head[KQ][KREQ];
	bool workers;		/* a worker each (not on 6.1: one for both) */
};

static void child(int out, struct vbt_mem *m, bool workers)
{
	struct vbt_opts o = { .nq = KQ, .qsize = 64, .backend_fd = -2,
			      .workers = workers };
	struct kreport rep;
	struct vbt_dev d;
	unsigned int q, i;

	if (vbt_dev_open(&d, m, &o) &&
	    (o.workers = false, vbt_dev_open(&d, m, &o)))
		_exit(1);
	rep.workers = o.workers;
	for (q = 0; q < KQ; q++) {
		struct vbt_vq *vq = &d.vq[q];
		uint16_t old = vq->avail_idx;

		rep.used[q] = vq->used;
		for (i = 0; i < KREQ; i++) {
			struct kreq *r = vbt_alloc(m, sizeof(*r), 4096);
			struct vbt_seg s[3] = {
				{ vbt_gpa(m, &r->h), sizeof(r->h), false },
				{ vbt_gpa(m, r->data), sizeof(r->data), true },
				{ vbt_gpa(m, &r->st), 1, true },
			};
			int head;

			memset(r, 0, sizeof(*r));
			r->h.type = VIRTIO_BLK_T_IN;
			r->h.sector = (q * KREQ + i) * 8;
			r->st = 0xff;
			head = vbt_vq_add(vq, s, 3, false, r);
			if (head < 0)
				_exit(1);
			rep.req[q][i] = r;
			rep.head[q][i] = head;
			vbt_vq_publish(vq, head);
		}
		vbt_vq_kick(vq, old);
	}
	if (write(out, &rep, sizeof(rep)) != sizeof(rep))
		_exit(1);
	for (;;)
		pause();
}

static uint16_t used_idx(const struct vring_used *u)
{
	return __atomic_load_n(&u->idx, __ATOMIC_ACQUIRE);
}

/*
 * A new device on the rings the dead one left (same addresses: the rings
 * are allocated as the child did), each at its used index: the call
 * eventfd fires once the backend is attached, with no new request.
 */
static bool takeover_signals(struct vbt_mem *m, bool workers)
{
	struct vbt_opts o = { .nq = KQ, .qsize = 64, .backend_fd = -1,
			      .workers = workers };
	struct vhost_vring_state st;
	struct vbt_dev d;
	unsigned int q;
	bool ok = true;
	int bfd;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o) &&
	    (o.workers = false, vbt_dev_open(&d, m, &o)))
		return false;
	for (q = 0; q < KQ; q++) {
		struct vbt_vq *vq = &d.vq[q];

		/* Setting the rings up cleared them: as the guest left them. */
		vq->avail->idx = KREQ;
		vq->used->idx = KREQ;
		vq->avail_idx = KREQ;
		vq->last_used = KREQ;
		st.index = q;
		st.num = KREQ;
		ok = ok && !ioctl(d.fd, VHOST_SET_VRING_BASE, &st);
	}
	bfd = vbt_open_backend(false);
	ok = ok && bfd >= 0 && !vbt_attach(&d, bfd, 0, KQ, NULL);
	if (bfd >= 0)
		close(bfd);
	for (q = 0; ok && q < KQ; q++) {
		struct pollfd p = { .fd = d.vq[q].call, .events = POLLIN };

		if (poll(&p, 1, 2000) != 1) {
			tap_diag("queue %u: no interrupt when the device took the ring over",
				 q);
			ok = false;
		}
	}
	vbt_dev_close(&d);
	return ok;
}

static void killed_case(bool workers)
{
	const char *what = workers ? "2 queues / 2 workers" : "2 queues";
	struct kreport rep;
	struct vbt_mem m;
	unsigned int q, i, early = 0;
	bool ok = true;
	int p[2], status;
	pid_t pid;

	vbt_mem_init_shared(&m);
	if (pipe(p)) {
		tap_result(false, "owner killed: pipe: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		child(p[1], &m, workers);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &rep, sizeof(rep)) != sizeof(rep)) {
		close(p[0]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		tap_result(false, "owner killed with reads in flight (%s): the owner set up its device",
			   what);
		munmap(m.base, VBT_MEM_SIZE);
		return;
	}
	close(p[0]);
	if (workers && !rep.workers)
		what = "2 queues / 1 worker (no worker ioctls)";
	/* Time for the workers to fetch every request; none completes yet. */
	usleep(200000);
	for (q = 0; q < KQ; q++)
		early += used_idx(rep.used[q]);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (early)
		tap_diag("%u reads completed before the kill: the backend is too fast for this test",
			 early);
	for (q = 0; q < KQ; q++) {
		uint16_t n = used_idx(rep.used[q]);
		bool seen[64] = { false };

		if (n != KREQ) {
			tap_diag("queue %u: used index %u, %u reads queued", q,
				 n, KREQ);
			ok = false;
			continue;
		}
		for (i = 0; i < KREQ; i++) {
			uint32_t id = rep.used[q]->ring[i].id;

			if (id >= 64 || seen[id]) {
				tap_diag("queue %u: used entry %u names head %u twice or out of range",
					 q, i, id);
				ok = false;
			} else {
				seen[id] = true;
			}
			if (rep.req[q][i]->st != VIRTIO_BLK_S_OK) {
				tap_diag("queue %u: read %u has status 0x%x", q,
					 i, rep.req[q][i]->st);
				ok = false;
			}
		}
		for (i = 0; i < KREQ; i++)
			ok = ok && seen[rep.head[q][i]];
	}
	tap_result(WIFSIGNALED(status) && !early && ok,
		   "owner killed with %u reads in flight on each of %s: all completed into the used rings by the time it is reaped",
		   KREQ, what);
	tap_result(takeover_signals(&m, workers),
		   "  a new device on those rings, at their used index, interrupts the guest once it starts");
	munmap(m.base, VBT_MEM_SIZE);
}

void vbt_owner_killed(void)
{
	killed_case(false);
	killed_case(true);
}
