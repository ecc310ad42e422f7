// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --load: closed-loop load generator.
 *
 *   --qd N         requests in flight per queue (default 32)
 *   --bs BYTES     block size (default 4096)
 *   --rw MODE      randread|randwrite|randrw|read|write (default randread)
 *   --mix PCT      reads in percent for randrw (default 70)
 *   --seconds S    run time (default 5)
 *   --queues Q     virtqueues, all driven from this thread (default 1)
 *   --workers      one vhost worker per queue (6.5+)
 *   --span MIB     limit offsets to the first MIB of the backend
 * Each request is one indirect descriptor (header, data, status), as Linux
 * guests submit them.
 *
 * Prints one line:
 *   load: rw=.. bs=.. qd=.. queues=.. seconds=.. ios=.. iops=.. mib_s=..
 *         lat_us avg=.. p50=.. p90=.. p99=.. p999=.. max=.. errors=..
 *         kicks=.. irqs=.. irq_timeouts=.. missed_irqs=..
 * (missed_irqs: completions found after waiting 1 s for an interrupt)
 * and a TAP line (ok when no request failed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vbt.h"

#define MAX_SAMPLES	(16u << 20)

struct lreq {
	struct virtio_blk_outhdr *h;
	uint8_t *status;
	uint8_t *data;
	uint64_t start;
	unsigned int q;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int vbt_load(struct vbt_mem *m, int argc, char **argv)
{
	unsigned int qd = 32, bs = 4096, mix = 70, seconds = 5, nq = 1;
	const char *rw = "randread";
	bool workers = false, seq, rnd_mix;
	uint64_t span = cfg.size, seq_off = 0, s = 12345;
	uint64_t ios = 0, errors = 0, sum_ns = 0, max_ns = 0, end, t0;
	uint64_t timeouts = 0, missed = 0;
	uint32_t *lat;
	size_t nlat = 0;
	struct vbt_opts o = { .backend_fd = -2, .serial = "load" };
	struct vbt_dev d;
	struct lreq *reqs;
	struct pollfd pfd[VBT_MAX_QUEUES];
	unsigned int i, q;
	double el;
	int read_pct;

	for (i = 0; i < (unsigned int)argc; i++) {
		const char *a = argv[i], *v = i + 1 < (unsigned int)argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--workers")) {
			workers = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "load: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--qd"))
			qd = atoi(v);
		else if (!strcmp(a, "--bs"))
			bs = atoi(v);
		else if (!strcmp(a, "--rw"))
			rw = v;
		else if (!strcmp(a, "--mix"))
			mix = atoi(v);
		else if (!strcmp(a, "--seconds"))
			seconds = atoi(v);
		else if (!strcmp(a, "--queues"))
			nq = atoi(v);
		else if (!strcmp(a, "--span"))
			span = strtoull(v, NULL, 0) << 20;
		else {
			fprintf(stderr, "load: unknown option %s\n", a);
			return 2;
		}
	}
	if (!qd || qd > 1024 || bs < 512 || bs % 512 || bs > (1 << 20) ||
	    !nq || nq > VBT_MAX_QUEUES || span < bs || span > cfg.size) {
		fprintf(stderr, "load: bad parameters\n");
		return 2;
	}
	if ((uint64_t)qd * nq * (bs + 4096) > 3 * VBT_CHUNK / 4) {
		fprintf(stderr, "load: qd * queues * bs too large for guest memory\n");
		return 2;
	}
	seq = !strcmp(rw, "read") || !strcmp(rw, "write");
	rnd_mix = !strcmp(rw, "randrw");
	read_pct = !strcmp(rw, "randread") || !strcmp(rw, "read") ? 100 :
		   rnd_mix ? (int)mix : 0;
	if (!seq && !rnd_mix && strcmp(rw, "randread") && strcmp(rw, "randwrite")) {
		fprintf(stderr, "load: bad --rw %s\n", rw);
		return 2;
	}

	o.nq = nq;
	o.qsize = 1;
	while (o.qsize < qd)
		o.qsize <<= 1;
	o.workers = workers;
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		fprintf(stderr, "load: device setup: %s\n", strerror(errno));
		return 1;
	}
	reqs = calloc((size_t)qd * nq, sizeof(*reqs));
	lat = malloc(MAX_SAMPLES * sizeof(*lat));
	if (!reqs || !lat)
		return 1;
	for (i = 0; i < qd * nq; i++) {
		reqs[i].h = vbt_alloc(m, 32, 64);
		reqs[i].status = (uint8_t *)reqs[i].h + 16;
		reqs[i].data = vbt_alloc(m, bs, 4096);
		reqs[i].q = i / qd;
		vbt_fill(reqs[i].data, bs, i);
	}
	for (q = 0; q < nq; q++)
		pfd[q] = (struct pollfd){ .fd = d.vq[q].call, .events = POLLIN };

	t0 = vbt_now_ns();
	end = t0 + seconds * 1000000000ULL;

#define SUBMIT(r) do {							\
	struct vbt_seg sg[3];						\
	bool rd = (int)(vbt_rand(&s) % 100) < read_pct;			\
	uint64_t off;							\
									\
	if (seq) {							\
		off = seq_off;						\
		seq_off = (seq_off + bs) % (span - span % bs);		\
	} else {							\
		off = vbt_rand(&s) % (span / bs) * bs;			\
	}								\
	(r)->h->type = rd ? VIRTIO_BLK_T_IN : VIRTIO_BLK_T_OUT;		\
	(r)->h->sector = off / 512;					\
	*(r)->status = 0xff;						\
	sg[0] = (struct vbt_seg){ vbt_gpa(m, (r)->h), 16, false };	\
	sg[1] = (struct vbt_seg){ vbt_gpa(m, (r)->data), bs, rd };	\
	sg[2] = (struct vbt_seg){ vbt_gpa(m, (r)->status), 1, true };	\
	(r)->start = vbt_now_ns();					\
	vbt_vq_publish(vq, vbt_vq_add(vq, sg, 3, true, (r)));		\
} while (0)

	for (q = 0; q < nq; q++) {
		struct vbt_vq *vq = &d.vq[q];
		uint16_t old = vq->avail_idx;

		for (i = 0; i < qd; i++)
			SUBMIT(&reqs[q * qd + i]);
		vbt_vq_kick(vq, old);
	}
	for (;;) {
		bool any = false, stop = vbt_now_ns() >= end;
		unsigned int outstanding = 0;

		for (q = 0; q < nq; q++) {
			struct vbt_vq *vq = &d.vq[q];
			uint16_t old = vq->avail_idx;
			void *c;

			while (vbt_vq_poll(vq, NULL, &c) >= 0) {
				struct lreq *r = c;
				uint64_t now = vbt_now_ns(), ns = now - r->start;

				any = true;
				ios++;
				if (*r->status)
					errors++;
				sum_ns += ns;
				if (ns > max_ns)
					max_ns = ns;
				if (nlat < MAX_SAMPLES)
					lat[nlat++] = ns > UINT32_MAX ? UINT32_MAX : ns;
				if (!stop)
					SUBMIT(r);
			}
			if (vq->avail_idx != old)
				vbt_vq_kick(vq, old);
			outstanding += vq->num - vq->nfree;
		}
		if (stop && !outstanding)
			break;
		if (any)
			continue;
		/* Nothing completed: ask for an interrupt and wait. */
		for (q = 0; q < nq; q++) {
			struct vbt_vq *vq = &d.vq[q];

			if (vq->event_idx)
				vq->avail->ring[vq->num] = vq->last_used;
		}
		__sync_synchronize();
		for (q = 0; q < nq; q++)
			if (*(volatile uint16_t *)&d.vq[q].used->idx != d.vq[q].last_used)
				any = true;
		if (any)
			continue;
		if (poll(pfd, nq, 1000) > 0) {
			for (q = 0; q < nq; q++) {
				uint64_t v;

				if ((pfd[q].revents & POLLIN) &&
				    read(pfd[q].fd, &v, sizeof(v)) == sizeof(v))
					d.vq[q].irqs++;
			}
		} else {
			/* No interrupt for 1 s: was one missed? */
			timeouts++;
			for (q = 0; q < nq; q++)
				if (*(volatile uint16_t *)&d.vq[q].used->idx !=
				    d.vq[q].last_used)
					missed++;
			if (vbt_now_ns() > end + 10000000000ULL) {
				fprintf(stderr, "load: requests stuck\n");
				errors++;
				break;
			}
		}
	}
	el = (vbt_now_ns() - t0) / 1e9;
	qsort(lat, nlat, sizeof(*lat), cmp_u32);
	{
		uint64_t kicks = 0, irqs = 0;

		for (q = 0; q < nq; q++) {
			kicks += d.vq[q].kicks;
			irqs += d.vq[q].irqs;
		}
#define PCT(p) (nlat ? lat[(size_t)((nlat - 1) * (p))] / 1000.0 : 0.0)
		printf("load: rw=%s bs=%u qd=%u queues=%u seconds=%.2f ios=%llu iops=%.0f mib_s=%.1f "
		       "lat_us avg=%.1f p50=%.1f p90=%.1f p99=%.1f p999=%.1f max=%.1f errors=%llu kicks=%llu irqs=%llu "
		       "irq_timeouts=%llu missed_irqs=%llu\n",
		       rw, bs, qd, nq, el, (unsigned long long)ios, ios / el,
		       ios * (double)bs / el / (1 << 20),
		       ios ? sum_ns / 1000.0 / ios : 0.0, PCT(0.50), PCT(0.90),
		       PCT(0.99), PCT(0.999), max_ns / 1000.0,
		       (unsigned long long)errors, (unsigned long long)kicks,
		       (unsigned long long)irqs, (unsigned long long)timeouts,
		       (unsigned long long)missed);
#undef PCT
	}
	vbt_dev_close(&d);
	free(reqs);
	free(lat);
	tap_result(!errors && !missed && ios > 0, "load: %s bs=%u qd=%u queues=%u: %.0f IOPS",
		   rw, bs, qd, nq, ios / el);
	return tap_done();
}
