// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test --context: whose identity the device's work runs under and
 * when a write is durable, observed from outside the module:
 *  - ext4 tracepoints name the task that synced, zeroed or punched the
 *    backing file, and whether a sync was an fdatasync;
 *  - page flags show whether an acknowledged write is still dirty;
 *  - a memory cgroup shows what the device charged to its opener;
 *  - an unprivileged owner shows whose credentials the device uses;
 *  - a fanotify listener shows that each I/O asks the file's permission
 *    hooks;
 *  - a ramfs file shows how a backend without fallocate answers.
 * Needs root, tracefs, and --file on ext4 (with reserved blocks for the
 * credentials case: mkfs.ext4 -m).  The backend is opened through the page
 * cache whatever --direct says.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include "vbt.h"

#define NOBODY		65534
#define KPF_DIRTY	4
#define KPF_WRITEBACK	8

/* ---- a trace instance of our own ---- */

static char tr_dir[160];

static bool tr_write(const char *rel, const char *val)
{
	char p[256];
	bool ok;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", tr_dir, rel);
	fd = open(p, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return false;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok;
}

static bool tr_setup(void)
{
	static const char * const roots[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	static const char * const events[] = {
		"ext4/ext4_sync_file_enter", "ext4/ext4_zero_range",
		"ext4/ext4_punch_hole",
	};
	char rel[128];
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(tr_dir, sizeof(tr_dir), "%s/instances/vbt-%d",
			 roots[i], getpid());
		if (!mkdir(tr_dir, 0700) || errno == EEXIST)
			break;
	}
	if (i == 2)
		return false;
	for (i = 0; i < 3; i++) {
		snprintf(rel, sizeof(rel), "events/%s/enable", events[i]);
		if (!tr_write(rel, "1"))
			return false;
	}
	return true;
}

static void tr_clear(void)
{
	tr_write("trace", "");
}

struct tr_ev {
	char comm[32];
	int pid;
	char name[32];
	int datasync;
};

/*
 * The events on inode @ino since the last tr_clear(), oldest first.  A line
 * reads "  COMM-PID  [CPU] FLAGS  TIME: EVENT: dev M,N ino I ...".
 */
static int tr_events(unsigned long ino, struct tr_ev *ev, int max)
{
	char p[256], line[512], key[32];
	int n = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/trace", tr_dir);
	f = fopen(p, "r");
	if (!f)
		return -1;
	snprintf(key, sizeof(key), " ino %lu ", ino);
	while (n < max && fgets(line, sizeof(line), f)) {
		char *task = line, *lb, *dash, *ts, *colon, *ds;

		if (line[0] == '#' || !strstr(line, key))
			continue;
		lb = strstr(line, " [");
		ts = lb ? strstr(lb, ": ") : NULL;
		colon = ts ? strchr(ts + 2, ':') : NULL;
		if (!colon)
			continue;
		*lb = 0;
		while (*task == ' ')
			task++;
		dash = strrchr(task, '-');
		if (!dash)
			continue;
		*dash = 0;
		snprintf(ev[n].comm, sizeof(ev[n].comm), "%.31s", task);
		ev[n].pid = atoi(dash + 1);
		*colon = 0;
		snprintf(ev[n].name, sizeof(ev[n].name), "%.31s", ts + 2);
		ds = strstr(colon + 1, " datasync ");
		ev[n].datasync = ds ? atoi(ds + 10) : -1;
		n++;
	}
	fclose(f);
	return n;
}

/* ---- helpers ---- */

static bool owner_worker(const struct tr_ev *e, pid_t owner)
{
	char want[32];

	snprintf(want, sizeof(want), "vhost-%d", owner);
	return !strcmp(e->comm, want);
}

static int ctx_open(struct vbt_dev *d, struct vbt_mem *m, int bfd, bool flush)
{
	struct vbt_opts o = {
		.nq = 1, .qsize = 256, .backend_fd = bfd, .serial = "context",
	};

	if (!flush)
		o.features = ~(1ULL << VIRTIO_BLK_F_FLUSH);
	vbt_mem_reset(m);
	if (vbt_dev_open(d, m, &o)) {
		tap_diag("device setup failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int ctx_dwz(struct vbt_dev *d, struct vbt_mem *m, uint32_t type,
		   uint64_t sector, uint32_t n, uint32_t flags)
{
	struct virtio_blk_discard_write_zeroes *r = vbt_alloc(m, 16, 8);

	r->sector = sector;
	r->num_sectors = n;
	r->flags = flags;
	return vbt_rw(d, 0, type, 0, r, 16);
}

static const char *status_name(int st)
{
	switch (st) {
	case VIRTIO_BLK_S_OK:
		return "OK";
	case VIRTIO_BLK_S_IOERR:
		return "IOERR";
	case VIRTIO_BLK_S_UNSUPP:
		return "UNSUPP";
	default:
		return "no completion";
	}
}

/*
 * Pages of [off, off + len) of @fd that are dirty or under writeback:
 * mapped, faulted in, then their flags looked up by PFN.  -1 if the flags
 * cannot be read (not root, no /proc/kpageflags).
 */
static int unstable_pages(int fd, off_t off, size_t len)
{
	long ps = sysconf(_SC_PAGESIZE);
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);
	volatile uint8_t *p = MAP_FAILED;
	int n = -1;
	size_t i;

	if (pm < 0 || kf < 0)
		goto out;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
	if (p == MAP_FAILED)
		goto out;
	n = 0;
	for (i = 0; i < len / ps; i++) {
		uint64_t e, fl;

		(void)p[i * ps];
		if (pread(pm, &e, 8, ((uintptr_t)p / ps + i) * 8) != 8 ||
		    !(e >> 63) || !(e & ((1ULL << 55) - 1)) ||
		    pread(kf, &fl, 8, (e & ((1ULL << 55) - 1)) * 8) != 8) {
			n = -1;
			break;
		}
		if (fl & (1ULL << KPF_DIRTY | 1ULL << KPF_WRITEBACK))
			n++;
	}
	munmap((void *)p, len);
out:
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	return n;
}

/* ---- durability without FLUSH ---- */

static void t_dsync(struct vbt_mem *m, int bfd)
{
	const uint32_t len = 16384;
	int st[2] = { -1, -1 }, dirty[2] = { -1, -1 };
	struct vbt_dev d;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		uint64_t sector = 16384 + pass * 64;
		uint8_t *buf;

		if (ctx_open(&d, m, bfd, !pass))
			break;
		buf = vbt_alloc(m, len, 4096);
		vbt_fill(buf, len, 40 + pass);
		st[pass] = vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, sector, buf, len);
		dirty[pass] = unstable_pages(bfd, sector * 512, len);
		vbt_dev_close(&d);
	}
	/* The control: the test can see pages a write left dirty. */
	tap_result(st[0] == 0 && dirty[0] == 4,
		   "FLUSH negotiated: an acknowledged buffered write may stay in the page cache (%d of 4 pages dirty)",
		   dirty[0]);
	tap_result(st[1] == 0 && dirty[1] == 0,
		   "FLUSH not negotiated: a write is stable when it completes (%d of 4 pages still dirty)",
		   dirty[1]);
}

static void t_sync_after_dwz(struct vbt_mem *m, int bfd, unsigned long ino)
{
	static const struct {
		uint32_t type;
		const char *name, *event;
	} c[2] = {
		{ VIRTIO_BLK_T_WRITE_ZEROES, "WRITE_ZEROES", "ext4_zero_range" },
		{ VIRTIO_BLK_T_DISCARD, "DISCARD", "ext4_punch_hole" },
	};
	struct tr_ev ev[16];
	struct vbt_dev d;
	int i, j, n, st;

	if (ctx_open(&d, m, bfd, false)) {
		tap_result(false, "DISCARD and WRITE_ZEROES without FLUSH: device setup");
		return;
	}
	for (i = 0; i < 2; i++) {
		bool op = false, sync = false;

		tr_clear();
		st = ctx_dwz(&d, m, c[i].type, 18432 + i * 64, 64, 0);
		n = tr_events(ino, ev, 16);
		for (j = 0; j < n; j++) {
			if (!strcmp(ev[j].name, c[i].event))
				op = true;
			else if (op && !strcmp(ev[j].name, "ext4_sync_file_enter"))
				sync = true;
		}
		tap_result(st == 0 && op && sync,
			   "FLUSH not negotiated: %s is followed by a sync of the backing file before it completes (%s, %s%s)",
			   c[i].name, status_name(st), op ? c[i].event : "no fallocate seen",
			   sync ? ", then a sync" : ", no sync");
	}
	vbt_dev_close(&d);
}

/* ---- owner context ---- */

static void t_dwz_owner(struct vbt_mem *m, int bfd, unsigned long ino)
{
	const char *name = "DISCARD and WRITE_ZEROES run on the owner's vhost worker";
	struct tr_ev ev[16];
	struct vbt_dev d;
	int i, n, st[2] = { -1, -1 };
	bool owner = true;

	if (ctx_open(&d, m, bfd, true)) {
		tap_result(false, "%s: device setup", name);
		return;
	}
	tr_clear();
	st[0] = ctx_dwz(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 18560, 64, 0);
	st[1] = ctx_dwz(&d, m, VIRTIO_BLK_T_DISCARD, 18624, 64, 0);
	n = tr_events(ino, ev, 16);
	vbt_dev_close(&d);
	for (i = 0; i < n; i++) {
		if (owner_worker(&ev[i], getpid()))
			continue;
		owner = false;
		tap_diag("%s ran in %s-%d", ev[i].name, ev[i].comm, ev[i].pid);
	}
	tap_result(!st[0] && !st[1] && n >= 2 && owner, "%s (vhost-%d, %d events)",
		   name, getpid(), n);
}

/* ---- FLUSH ---- */

/*
 * @n FLUSH chains on each of the first @nq queues, all made available
 * before the first kick; returns how many completed OK.
 */
static unsigned int flush_burst_mq(struct vbt_dev *d, struct vbt_mem *m,
				   unsigned int nq, unsigned int n)
{
	uint16_t old[VBT_MAX_QUEUES];
	uint8_t *st[256];
	unsigned int i, q, ok = 0;

	for (q = 0; q < nq && (q + 1) * n <= 256; q++) {
		struct vbt_vq *vq = &d->vq[q];

		old[q] = vq->avail_idx;
		for (i = 0; i < n; i++) {
			struct virtio_blk_outhdr *h = vbt_alloc(m, 32, 16);
			uint8_t **sp = &st[q * n + i];
			struct vbt_seg s[2];

			h->type = VIRTIO_BLK_T_FLUSH;
			h->ioprio = 0;
			h->sector = 0;
			*sp = (uint8_t *)h + 16;
			**sp = 0xff;
			s[0] = (struct vbt_seg){ vbt_gpa(m, h), 16, false };
			s[1] = (struct vbt_seg){ vbt_gpa(m, *sp), 1, true };
			vbt_vq_publish(vq, vbt_vq_add(vq, s, 2, false, NULL));
		}
	}
	nq = q;
	for (q = 0; q < nq; q++)
		vbt_vq_kick(&d->vq[q], old[q]);
	for (q = 0; q < nq; q++)
		for (i = 0; i < n; i++)
			if (vbt_vq_wait(&d->vq[q], NULL, NULL, 10000) < 0)
				return ok;
	for (i = 0; i < nq * n; i++)
		ok += *st[i] == VIRTIO_BLK_S_OK;
	return ok;
}

static unsigned int flush_burst(struct vbt_dev *d, struct vbt_mem *m,
				unsigned int n)
{
	return flush_burst_mq(d, m, 1, n);
}

/* The syncs= line of the stats of the device that retired @flushes FLUSHes. */
static long long stats_syncs(unsigned long long flushes)
{
	char path[300], line[128];
	long long syncs = -1;
	unsigned long long v;
	struct dirent *e;
	DIR *dir;

	dir = opendir("/sys/kernel/debug/vhost-blk");
	while (dir && (e = readdir(dir))) {
		bool mine = false;
		long long s = -1;
		FILE *f;

		snprintf(path, sizeof(path), "/sys/kernel/debug/vhost-blk/%s/stats",
			 e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			if (sscanf(line, "flush_reqs %llu", &v) == 1)
				mine = v == flushes;
			if (sscanf(line, "syncs %llu", &v) == 1)
				s = v;
		}
		if (f)
			fclose(f);
		if (mine)
			syncs = s;
	}
	if (dir)
		closedir(dir);
	return syncs;
}

static void t_flush(struct vbt_mem *m, int bfd, unsigned long ino)
{
	const unsigned int n = 64;
	struct tr_ev ev[256];
	struct vbt_dev d;
	unsigned int done, i, syncs = 0, data = 0, owner = 0;
	long long counted;
	int nev;

	if (ctx_open(&d, m, bfd, true)) {
		tap_result(false, "FLUSH: device setup");
		return;
	}
	tr_clear();
	done = flush_burst(&d, m, n);
	nev = tr_events(ino, ev, 256);
	for (i = 0; i < (unsigned int)(nev > 0 ? nev : 0); i++) {
		if (strcmp(ev[i].name, "ext4_sync_file_enter"))
			continue;
		syncs++;
		data += ev[i].datasync == 1;
		if (owner_worker(&ev[i], getpid()))
			owner++;
		else if (owner + 1 == syncs)
			tap_diag("FLUSH synced in %s-%d", ev[i].comm, ev[i].pid);
	}
	counted = stats_syncs(n);
	vbt_dev_close(&d);
	tap_result(done == n && syncs && data == syncs,
		   "FLUSH is an fdatasync of the backing file (%u of %u syncs with datasync=1)",
		   data, syncs);
	tap_result(done == n && syncs >= 1 && syncs <= n / 2,
		   "%u FLUSHes made available at once: %u syncs of the backing file (merged)",
		   n, syncs);
	tap_result(counted >= syncs && syncs,
		   "debugfs stats count the syncs (syncs %lld)", counted);
	tap_result(syncs && owner == syncs,
		   "FLUSH runs on the owner's vhost worker (vhost-%d)", getpid());
}

/* FLUSHes on four queues served by four vhost workers share their syncs. */
static void t_flush_workers(struct vbt_mem *m, int bfd, unsigned long ino)
{
	const char *name = "16 FLUSHes on each of 4 queues with a vhost worker each";
	struct vbt_opts o = {
		.nq = 4, .qsize = 64, .backend_fd = bfd, .workers = true,
	};
	struct tr_ev ev[256];
	unsigned int done, syncs = 0;
	struct vbt_dev d;
	int i, n;

	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		if (errno == ENOTTY || errno == EINVAL || errno == EFAULT)
			tap_skip("no multi-worker vhost on this kernel", "%s", name);
		else
			tap_result(false, "%s: setup: %s", name, strerror(errno));
		return;
	}
	tr_clear();
	done = flush_burst_mq(&d, m, 4, 16);
	n = tr_events(ino, ev, 256);
	for (i = 0; i < n; i++)
		syncs += !strcmp(ev[i].name, "ext4_sync_file_enter");
	vbt_dev_close(&d);
	tap_result(done == 64 && syncs >= 1 && syncs <= 32,
		   "%s: %u syncs of the backing file (merged across workers)",
		   name, syncs);
}

/* ---- cgroup: memory charged to the opener, work in the owner's cgroup ---- */

static long long cg_read(const char *cg, const char *file)
{
	char p[256];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", cg, file);
	f = fopen(p, "r");
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static bool cg_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok;
}

/* The cgroup v2 path of @pid ("/..." of its "0::" line). */
static void cg_of(pid_t pid, char *out, size_t len)
{
	char p[64], line[256];
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/cgroup", pid);
	snprintf(out, len, "?");
	f = fopen(p, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, len, "%.*s", (int)len - 1, line + 3);
		}
	}
	if (f)
		fclose(f);
}

static void report(int fd, bool ok, const char *fmt, ...)
{
	char buf[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(fd, "%d %s\n", ok, buf);
}

/* Print what a child reported with report(). */
static void collect(int fd, pid_t pid, unsigned int want, const char *what)
{
	char line[512];
	unsigned int got = 0;
	FILE *f = fdopen(fd, "r");
	int status;

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		tap_result(line[0] == '1', "%s", line + 2);
		got++;
	}
	if (f)
		fclose(f);
	waitpid(pid, &status, 0);
	if (got < want)
		tap_result(false, "%s: the child reported %u of %u results", what,
			   got, want);
}

static void cg_child(int out, struct vbt_mem *m, int bfd, unsigned long ino,
		     const char *cg)
{
	char procs[256], mine[128], its[128];
	struct tr_ev ev[64];
	long long before, after;
	struct vbt_dev d;
	int fds[8], i, n;
	pid_t worker = 0;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	if (!cg_write(procs, "0")) {
		report(out, false, "move into a new cgroup: %s", strerror(errno));
		_exit(1);
	}
	before = cg_read(cg, "memory.current");
	for (i = 0; i < 8; i++)
		fds[i] = open("/dev/vhost-blk", O_RDWR | O_CLOEXEC);
	after = cg_read(cg, "memory.current");
	for (i = 0; i < 8; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	report(out, before >= 0 && after - before >= 1 << 20,
	       "8 opened devices are charged to the opener's memory cgroup (%lld KiB)",
	       (after - before) / 1024);

	if (ctx_open(&d, m, bfd, true)) {
		report(out, false, "FLUSH in a cgroup: device setup");
		_exit(1);
	}
	tr_clear();
	flush_burst(&d, m, 1);
	n = tr_events(ino, ev, 64);
	for (i = 0; i < n; i++)
		if (!strcmp(ev[i].name, "ext4_sync_file_enter"))
			worker = ev[i].pid;
	cg_of(getpid(), mine, sizeof(mine));
	if (worker)
		cg_of(worker, its, sizeof(its));
	else
		snprintf(its, sizeof(its), "no sync seen");
	vbt_dev_close(&d);
	report(out, worker && !strcmp(mine, its),
	       "FLUSH runs in the owner's cgroup (%s; the syncing task: %s)",
	       mine, its);
	_exit(0);
}

static void t_cgroup(struct vbt_mem *m, int bfd, unsigned long ino)
{
	const char *root = "/sys/fs/cgroup";
	char cg[128], ctl[160];
	int p[2], i;
	pid_t pid;

	snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", root);
	if (access(ctl, R_OK)) {
		tap_skip("cgroup v2 not mounted on /sys/fs/cgroup",
			 "the device's memory and work in the owner's cgroup");
		return;
	}
	snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", root);
	cg_write(ctl, "+memory");
	snprintf(cg, sizeof(cg), "%s/vbt-%d", root, getpid());
	if ((mkdir(cg, 0755) && errno != EEXIST) || cg_read(cg, "memory.current") < 0) {
		tap_skip("no memory controller in a new cgroup",
			 "the device's memory and work in the owner's cgroup");
		rmdir(cg);
		return;
	}
	if (pipe(p)) {
		tap_result(false, "cgroup child: pipe");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		cg_child(p[1], m, bfd, ino, cg);
	}
	close(p[1]);
	collect(p[0], pid, 2, "cgroup");
	for (i = 0; i < 50 && rmdir(cg) && errno == EBUSY; i++)
		usleep(100000);
}

/* ---- credentials: an unprivileged owner and the reserved blocks ---- */

static void creds_child(int out, struct vbt_mem *m, int bfd, int dev, int fill)
{
	static uint8_t chunk[1 << 20];
	struct vbt_opts o = {
		.nq = 1, .qsize = 256, .backend_fd = bfd, .have_dev_fd = true,
		.dev_fd = dev,
	};
	struct statfs sf;
	struct vbt_dev d;
	uint8_t *buf;
	int wz, out_st;

	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY)) {
		report(out, false, "drop to uid %d: %s", NOBODY, strerror(errno));
		_exit(1);
	}
	/* Fill what an unprivileged user may use, to the last block. */
	memset(chunk, 0x5a, sizeof(chunk));
	while (write(fill, chunk, sizeof(chunk)) > 0)
		;
	while (write(fill, chunk, 4096) > 0)
		;
	fsync(fill);
	while (write(fill, chunk, 4096) > 0)
		;
	fsync(fill);
	fstatfs(fill, &sf);
	vbt_mem_reset(m);
	if (vbt_dev_open(&d, m, &o)) {
		report(out, false, "unprivileged owner: device setup: %s",
		       strerror(errno));
		_exit(1);
	}
	/* Both ranges are holes of the backing file: they need new blocks. */
	wz = ctx_dwz(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 24576, 2048, 0);
	buf = vbt_alloc(m, 65536, 4096);
	vbt_fill(buf, 65536, 77);
	out_st = vbt_rw(&d, 0, VIRTIO_BLK_T_OUT, 28672, buf, 65536);
	vbt_dev_close(&d);
	report(out, sf.f_bavail * sf.f_bsize < 65536 && wz == VIRTIO_BLK_S_IOERR,
	       "uid %d owner, file system full for it: WRITE_ZEROES does not use the reserved blocks (%s; %llu blocks left to it)",
	       NOBODY, status_name(wz), (unsigned long long)sf.f_bavail);
	report(out, sf.f_bavail * sf.f_bsize < 65536 && out_st == VIRTIO_BLK_S_IOERR,
	       "uid %d owner, file system full for it: a write into a hole does not use the reserved blocks (%s)",
	       NOBODY, status_name(out_st));
	_exit(0);
}

static void t_creds(struct vbt_mem *m)
{
	const char *name = "an unprivileged owner's device uses the owner's credentials";
	char path[300], dir[256];
	struct statfs sf;
	int p[2], bfd, dev, fill;
	pid_t pid;
	char *dn;

	snprintf(dir, sizeof(dir), "%s", cfg.path);
	dn = dirname(dir);
	snprintf(path, sizeof(path), "%s/vbt-fill", dn);
	if (statfs(dn, &sf) || sf.f_bfree - sf.f_bavail <
	    (4ULL << 20) / sf.f_bsize) {
		tap_skip("the backing file system has no reserved blocks (mkfs.ext4 -m)",
			 "%s", name);
		return;
	}
	bfd = open(cfg.path, O_RDWR);
	dev = open("/dev/vhost-blk", O_RDWR | O_CLOEXEC);
	fill = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (bfd < 0 || dev < 0 || fill < 0 || fchown(fill, NOBODY, NOBODY) ||
	    pipe(p)) {
		tap_result(false, "%s: setup", name);
		goto out;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		creds_child(p[1], m, bfd, dev, fill);
	}
	close(p[1]);
	collect(p[0], pid, 2, name);
out:
	if (fill >= 0)
		close(fill);
	unlink(path);
	if (dev >= 0)
		close(dev);
	if (bfd >= 0)
		close(bfd);
}

/* ---- the permission hooks of every I/O ---- */

struct fan {
	int fd;
	volatile bool stop;
	unsigned int denied;
};

static void *fan_thread(void *arg)
{
	struct fan *f = arg;
	struct pollfd p = { .fd = f->fd, .events = POLLIN };
	char buf[4096];

	while (!f->stop) {
		struct fanotify_event_metadata *e;
		ssize_t len;

		if (poll(&p, 1, 100) <= 0)
			continue;
		len = read(f->fd, buf, sizeof(buf));
		for (e = (void *)buf; len > 0 && FAN_EVENT_OK(e, len);
		     e = FAN_EVENT_NEXT(e, len)) {
			struct fanotify_response r = { .fd = e->fd,
						       .response = FAN_DENY };

			if (e->mask & FAN_ACCESS_PERM) {
				if (write(f->fd, &r, sizeof(r)) == sizeof(r))
					f->denied++;
			}
			if (e->fd >= 0)
				close(e->fd);
		}
	}
	return NULL;
}

static void t_fanotify(struct vbt_mem *m)
{
	const char *name = "reads go through the file's permission hooks";
	struct fan f = { .fd = -1 };
	int st1 = -1, st2 = -1, bfd = -1;
	struct vbt_dev d;
	pthread_t t;
	uint8_t *buf;

	f.fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_LARGEFILE);
	if (f.fd < 0) {
		tap_skip("no fanotify permission events", "%s", name);
		return;
	}
	if (fanotify_mark(f.fd, FAN_MARK_ADD, FAN_ACCESS_PERM, AT_FDCWD, cfg.path) ||
	    pthread_create(&t, NULL, fan_thread, &f)) {
		tap_result(false, "%s: fanotify setup: %s", name, strerror(errno));
		close(f.fd);
		return;
	}
	bfd = open(cfg.path, O_RDWR);
	if (bfd >= 0 && !ctx_open(&d, m, bfd, true)) {
		buf = vbt_alloc(m, 4096, 4096);
		st1 = vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 4096);
		fanotify_mark(f.fd, FAN_MARK_REMOVE, FAN_ACCESS_PERM, AT_FDCWD,
			      cfg.path);
		f.stop = true;
		pthread_join(t, NULL);
		close(f.fd);
		st2 = vbt_rw(&d, 0, VIRTIO_BLK_T_IN, 0, buf, 4096);
		vbt_dev_close(&d);
	} else {
		f.stop = true;
		pthread_join(t, NULL);
		close(f.fd);
	}
	if (bfd >= 0)
		close(bfd);
	tap_result(st1 == VIRTIO_BLK_S_IOERR && f.denied && st2 == 0,
		   "%s: a fanotify listener denying access fails them (%s, %u denied; %s without it)",
		   name, status_name(st1), f.denied, status_name(st2));
}

/* ---- a backend without fallocate ---- */

static void t_no_fallocate(struct vbt_mem *m)
{
	const char *name = "a backend without fallocate (ramfs)";
	char dir[] = "/tmp/vbt-ramfs.XXXXXX", path[64];
	int wz = -1, wzu = -1, dis = -1, fd = -1;
	struct vbt_dev d;

	if (!mkdtemp(dir) || mount("none", dir, "ramfs", 0, NULL)) {
		tap_skip("cannot mount ramfs", "%s", name);
		rmdir(dir);
		return;
	}
	snprintf(path, sizeof(path), "%s/img", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	if (fd >= 0 && !ftruncate(fd, 1 << 20) && !ctx_open(&d, m, fd, true)) {
		wz = ctx_dwz(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0);
		wzu = ctx_dwz(&d, m, VIRTIO_BLK_T_WRITE_ZEROES, 8, 8,
			      VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
		dis = ctx_dwz(&d, m, VIRTIO_BLK_T_DISCARD, 16, 8, 0);
		vbt_dev_close(&d);
	}
	if (fd >= 0)
		close(fd);
	umount(dir);
	rmdir(dir);
	tap_result(wz == VIRTIO_BLK_S_UNSUPP && wzu == VIRTIO_BLK_S_UNSUPP &&
		   dis == VIRTIO_BLK_S_OK,
		   "%s: WRITE_ZEROES -> UNSUPP (%s, with unmap %s), DISCARD -> OK (%s)",
		   name, status_name(wz), status_name(wzu), status_name(dis));
}

void vbt_context(struct vbt_mem *m)
{
	struct statfs sf;
	struct stat st;
	int bfd;

	t_no_fallocate(m);
	t_fanotify(m);
	bfd = open(cfg.path, O_RDWR);
	if (bfd < 0 || fstat(bfd, &st) || fstatfs(bfd, &sf) ||
	    sf.f_type != EXT4_SUPER_MAGIC) {
		tap_skip("--file is not on ext4",
			 "sync, owner context and durability cases");
		if (bfd >= 0)
			close(bfd);
		return;
	}
	if (!tr_setup()) {
		tap_skip("no tracefs instance with the ext4 events",
			 "sync, owner context and durability cases");
		close(bfd);
		return;
	}
	t_dsync(m, bfd);
	t_sync_after_dwz(m, bfd, st.st_ino);
	t_dwz_owner(m, bfd, st.st_ino);
	t_flush(m, bfd, st.st_ino);
	t_flush_workers(m, bfd, st.st_ino);
	t_cgroup(m, bfd, st.st_ino);
	close(bfd);
	rmdir(tr_dir);
	/* Last: it fills the file system. */
	t_creds(m);
}
