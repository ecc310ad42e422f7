// SPDX-License-Identifier: GPL-2.0
/*
 * vbcount: a QEMU TCG plugin that counts what a workload costs the whole
 * emulated machine.
 *
 * Counted per vCPU: guest instructions executed (every level: the VM QEMU
 * runs, and any guest nested inside it, since all of it goes through the
 * translator), and VMRUN instructions executed (an L2 hypervisor on SVM
 * enters its L3 guest once per L3 exit, so this is the L3 exit count).
 * Of the instructions, those executed in an L3 guest are also counted on
 * their own: from a VMRUN to the instruction after it, where the L2
 * hypervisor carries on after the guest's exit (SVM returns there).
 *
 * A program in any guest level opens and closes a measurement window with a
 * marker instruction (tools/cost-plugin/vbmark.c): a 7-byte NOP whose 32-bit
 * displacement says what to do, with the window's id in RDI. One window is
 * open at a time, machine-wide. A window that is opened again before it is
 * closed, or is still open when QEMU exits (its guest died), is reported as
 * dropped and never merged into another.
 *
 * Several threads of one workload (fio's jobs) can share a window: each
 * enters it when its own I/O starts and leaves it when that ends. The first
 * to enter opens the window, the last to leave closes it. An id entered
 * again after its window closed (one job ended before another started) is
 * reported as dropped: that workload's count would not be the whole of it.
 *
 * Arguments: out=FILE (default stderr). Output, one line per event, tab
 * separated: "W id insns exits ns l1_other_cpus vcpu_insns vcpu_exits" for
 * a closed window, "D id reason" for a dropped one, "X id reason" for a
 * close that matched no open window. A "W" line ends with "l3_insns": how
 * many of its instructions ran in an L3 guest.
 *
 * profile=FILE also writes, for each closed window, where its instructions
 * ran: "P id level address insns" for every translated block that ran in
 * it, level 2 (the VM QEMU runs) or 3 (a guest nested in it), address its
 * guest-virtual start (blocks at one address in several address spaces
 * are summed). It costs a callback per block executed: a profile run is
 * slower, and so its exits (which come with time) are not the bench's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* nopl disp32(%rax): 0f 1f 80 d0 d1 d2 d3; disp32 = VB_MAGIC | op */
#define VB_MAGIC	0x56420000u
#define VB_OP_OPEN	1
#define VB_OP_CLOSE	2
#define VB_OP_ENTER	3
#define VB_OP_LEAVE	4
#define VB_MARK_LEN	7

struct vb_cpu {
	uint64_t insns;
	uint64_t vmruns;
	uint64_t l3_insns;	/* of the L3 stints that ended */
	uint64_t l3_from;	/* insns when the current stint began */
	uint64_t in_l3;		/* a stint began (VMRUN) and has not ended */
};

struct vb_snap {
	uint64_t insns;
	uint64_t vmruns;
	uint64_t l3_insns;
};

/*
 * Where an L2 hypervisor resumes after its L3 guest exits: the address
 * after each VMRUN seen (one per hypervisor build in practice; a few for
 * safety). Guarded by lock.
 */
#define VB_MAX_RESUME	16
static uint64_t resume_pc[VB_MAX_RESUME];
static int n_resume;

/*
 * profile=: one record per translated block (address and length), shared
 * by its translations; what ran of it in the open window, by level.
 */
struct vb_block {
	uint64_t vaddr;
	uint32_t n;
	uint32_t resume;	/* starts where L2 resumes after an L3 exit */
	uint64_t insns[2];	/* in L2, in L3 */
};

static FILE *prof;
static GHashTable *blocks;	/* of struct vb_block, under lock */
static int prof_on;		/* a window is open (atomic) */

static struct qemu_plugin_scoreboard *score;
static qemu_plugin_u64 sc_insns, sc_vmruns;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int max_cpus;
static struct qemu_plugin_register **rdi_handle;	/* per vCPU */

/* The open window, under lock. */
static bool win_open;
static uint64_t win_id;
static unsigned int win_users;		/* entered and not yet left */
static bool last_valid;
static uint64_t last_id;		/* the window closed last */
static struct vb_snap *win_start;	/* per vCPU */
static uint64_t win_ns;
static long long win_host_busy, win_self_busy;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Busy clock ticks of the host: all CPUs, and this QEMU process alone. */
static void host_ticks(long long *all, long long *self)
{
	unsigned long long v[10] = { 0 };
	unsigned long long ut = 0, st = 0;
	char buf[1024];
	FILE *f;

	*all = -1;
	*self = -1;
	f = fopen("/proc/stat", "r");
	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			   &v[7]) == 8)
			*all = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
		fclose(f);
	}
	f = fopen("/proc/self/stat", "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			/* fields 14 and 15, counted after the ")" of comm */
			char *p = strrchr(buf, ')');
			int field = 2;

			while (p && *p && field < 14) {
				p = strchr(p + 1, ' ');
				field++;
			}
			if (p && sscanf(p, " %llu %llu", &ut, &st) == 2)
				*self = ut + st;
		}
		fclose(f);
	}
}

static void snap(struct vb_snap *s)
{
	int n = qemu_plugin_num_vcpus();
	int i;

	if (n > max_cpus)
		n = max_cpus;
	memset(s, 0, sizeof(*s) * max_cpus);
	for (i = 0; i < n; i++) {
		struct vb_cpu *c = qemu_plugin_scoreboard_find(score, i);

		s[i].insns = qemu_plugin_u64_get(sc_insns, i);
		s[i].vmruns = qemu_plugin_u64_get(sc_vmruns, i);
		/* a stint under way counts up to now */
		s[i].l3_insns = c->l3_insns +
				(c->in_l3 ? s[i].insns - c->l3_from : 0);
	}
}

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fflush(out);
}

static guint block_hash(gconstpointer p)
{
	const struct vb_block *b = p;

	return g_int64_hash(&b->vaddr) ^ b->n;
}

static gboolean block_equal(gconstpointer a, gconstpointer b)
{
	const struct vb_block *x = a, *y = b;

	return x->vaddr == y->vaddr && x->n == y->n;
}

/* Under lock: write out the open window's profile (id), or only forget it. */
static void profile_flush(bool write, uint64_t id)
{
	GHashTableIter it;
	gpointer key;
	int l;

	if (!prof)
		return;
	g_hash_table_iter_init(&it, blocks);
	while (g_hash_table_iter_next(&it, &key, NULL)) {
		struct vb_block *b = key;

		for (l = 0; l < 2; l++) {
			uint64_t v = __atomic_exchange_n(&b->insns[l], 0,
							 __ATOMIC_RELAXED);

			if (write && v)
				fprintf(prof, "P\t%" PRIu64 "\t%d\t%" PRIx64 "\t%" PRIu64 "\n",
					id, l + 2, b->vaddr, v);
		}
	}
	if (write)
		fflush(prof);
}

static void block_exec(unsigned int vcpu, void *udata)
{
	struct vb_block *b = udata;
	struct vb_cpu *c;

	if (!__atomic_load_n(&prof_on, __ATOMIC_RELAXED))
		return;
	c = qemu_plugin_scoreboard_find(score, vcpu);
	__atomic_fetch_add(&b->insns[c->in_l3 && !b->resume], b->n,
			   __ATOMIC_RELAXED);
}

static void window_open(uint64_t id)
{
	if (win_open)
		emit("D\t%" PRIu64 "\treopened-before-close\n", win_id);
	profile_flush(false, 0);
	win_open = true;
	win_id = id;
	win_users = 1;
	host_ticks(&win_host_busy, &win_self_busy);
	win_ns = now_ns();
	__atomic_store_n(&prof_on, 1, __ATOMIC_RELAXED);
	snap(win_start);
}

static void window_close(uint64_t id)
{
	struct vb_snap end[max_cpus];
	uint64_t insns = 0, vmruns = 0, l3 = 0, ns;
	long long busy, self;
	double other = -1;
	char ci[32 * 16], ce[32 * 16];
	size_t li = 0, le = 0;
	int i;

	snap(end);
	if (win_open && id == win_id)
		__atomic_store_n(&prof_on, 0, __ATOMIC_RELAXED);
	ns = now_ns() - win_ns;
	host_ticks(&busy, &self);
	if (!win_open || id != win_id) {
		emit("X\t%" PRIu64 "\tno-open-window-with-this-id\n", id);
		return;
	}
	win_open = false;
	profile_flush(true, id);
	last_valid = true;
	last_id = id;
	ci[0] = ce[0] = '\0';
	for (i = 0; i < max_cpus; i++) {
		uint64_t di = end[i].insns - win_start[i].insns;
		uint64_t de = end[i].vmruns - win_start[i].vmruns;

		insns += di;
		vmruns += de;
		l3 += end[i].l3_insns - win_start[i].l3_insns;
		if (li < sizeof(ci) - 24)
			li += snprintf(ci + li, sizeof(ci) - li, "%s%" PRIu64,
				       i ? "," : "", di);
		if (le < sizeof(ce) - 24)
			le += snprintf(ce + le, sizeof(ce) - le, "%s%" PRIu64,
				       i ? "," : "", de);
	}
	/* CPUs' worth of host time used by others than this QEMU meanwhile */
	if (busy >= 0 && self >= 0 && win_host_busy >= 0 && ns > 0) {
		long long other_ticks = (busy - win_host_busy) -
					(self - win_self_busy);

		if (other_ticks < 0)
			other_ticks = 0;
		other = (double)other_ticks / sysconf(_SC_CLK_TCK) /
			((double)ns / 1e9);
	}
	emit("W\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%.2f\t%s\t%s\t%" PRIu64 "\n",
	     id, insns, vmruns, ns, other, ci, ce, l3);
}

static void mark_exec(unsigned int vcpu, void *udata)
{
	uintptr_t op = (uintptr_t)udata;
	GByteArray *buf = g_byte_array_new();
	uint64_t id = 0;
	int n = -1;

	if (vcpu < (unsigned int)max_cpus && rdi_handle[vcpu])
		n = qemu_plugin_read_register(rdi_handle[vcpu], buf);
	if (n >= 8)
		memcpy(&id, buf->data, 8);	/* x86: little endian, as we are */
	g_byte_array_free(buf, true);
	if (n < 8)
		return;

	pthread_mutex_lock(&lock);
	switch (op) {
	case VB_OP_OPEN:
		window_open(id);
		break;
	case VB_OP_CLOSE:
		window_close(id);
		break;
	case VB_OP_ENTER:
		if (win_open && id == win_id) {
			win_users++;
			break;
		}
		if (!win_open && last_valid && id == last_id)
			emit("D\t%" PRIu64 "\tentered-after-close\n", id);
		window_open(id);
		break;
	case VB_OP_LEAVE:
		if (win_open && id == win_id && win_users > 1)
			win_users--;
		else
			window_close(id);
		break;
	}
	pthread_mutex_unlock(&lock);
}

/*
 * A VMRUN about to run: the TB that holds it (its last instruction: VMRUN
 * ends a TB) has been counted already, so what is counted from here until
 * the hypervisor resumes ran in the guest.
 */
static void vmrun_exec(unsigned int vcpu, void *udata)
{
	struct vb_cpu *c = qemu_plugin_scoreboard_find(score, vcpu);

	c->l3_from = c->insns;
	c->in_l3 = 1;
}

/*
 * The instruction after a VMRUN: the guest has exited. This TB's own
 * instructions (udata), counted when it began, are the hypervisor's.
 */
static void resume_exec(unsigned int vcpu, void *udata)
{
	struct vb_cpu *c = qemu_plugin_scoreboard_find(score, vcpu);
	uint64_t tb_insns = (uintptr_t)udata;

	if (!c->in_l3)
		return;
	c->in_l3 = 0;
	if (c->insns >= c->l3_from + tb_insns)
		c->l3_insns += c->insns - tb_insns - c->l3_from;
}

static bool is_resume_pc(uint64_t pc)
{
	bool found = false;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < n_resume && !found; i++)
		found = resume_pc[i] == pc;
	pthread_mutex_unlock(&lock);
	return found;
}

static void add_resume_pc(uint64_t pc)
{
	pthread_mutex_lock(&lock);
	if (n_resume < VB_MAX_RESUME) {
		int i;

		for (i = 0; i < n_resume; i++)
			if (resume_pc[i] == pc)
				break;
		if (i == n_resume)
			resume_pc[n_resume++] = pc;
	}
	pthread_mutex_unlock(&lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	size_t i;

	qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
		tb, QEMU_PLUGIN_INLINE_ADD_U64, sc_insns, n);
	if (prof) {
		struct vb_block key = { .vaddr = qemu_plugin_tb_vaddr(tb),
					.n = n };
		struct vb_block *b;

		key.resume = is_resume_pc(key.vaddr);
		pthread_mutex_lock(&lock);
		b = g_hash_table_lookup(blocks, &key);
		if (!b) {
			b = g_new0(struct vb_block, 1);
			*b = key;
			g_hash_table_add(blocks, b);
		}
		pthread_mutex_unlock(&lock);
		qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec,
						     QEMU_PLUGIN_CB_NO_REGS, b);
	}

	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		size_t len = qemu_plugin_insn_size(insn);
		uint8_t b[VB_MARK_LEN];
		uint32_t disp;

		if (is_resume_pc(qemu_plugin_insn_vaddr(insn)))
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, resume_exec, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)n);
		if (len != 3 && len != VB_MARK_LEN)
			continue;
		if (qemu_plugin_insn_data(insn, b, len) != len || b[0] != 0x0f)
			continue;
		if (len == 3 && b[1] == 0x01 && b[2] == 0xd8) {
			/* VMRUN */
			qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
				insn, QEMU_PLUGIN_INLINE_ADD_U64, sc_vmruns, 1);
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, vmrun_exec, QEMU_PLUGIN_CB_NO_REGS, NULL);
			add_resume_pc(qemu_plugin_insn_vaddr(insn) + len);
			continue;
		}
		if (len != VB_MARK_LEN || b[1] != 0x1f || b[2] != 0x80)
			continue;
		disp = b[3] | b[4] << 8 | b[5] << 16 | (uint32_t)b[6] << 24;
		if ((disp & 0xffff0000u) != VB_MAGIC)
			continue;
		if ((disp & 0xffff) < VB_OP_OPEN || (disp & 0xffff) > VB_OP_LEAVE)
			continue;
		qemu_plugin_register_vcpu_insn_exec_cb(
			insn, mark_exec, QEMU_PLUGIN_CB_R_REGS,
			(void *)(uintptr_t)(disp & 0xffff));
	}
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
	GArray *regs = qemu_plugin_get_registers();
	guint i;

	if (!regs)
		return;
	for (i = 0; i < regs->len; i++) {
		qemu_plugin_reg_descriptor *d =
			&g_array_index(regs, qemu_plugin_reg_descriptor, i);

		if (vcpu < (unsigned int)max_cpus && !strcmp(d->name, "rdi"))
			rdi_handle[vcpu] = d->handle;
	}
	g_array_free(regs, true);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	pthread_mutex_lock(&lock);
	if (win_open)
		emit("D\t%" PRIu64 "\tstill-open-at-exit\n", win_id);
	win_open = false;
	pthread_mutex_unlock(&lock);
	if (out != stderr)
		fclose(out);
	if (prof)
		fclose(prof);
	qemu_plugin_scoreboard_free(score);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL, *prof_path = NULL;
	int i;

	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr, "vbcount: x86_64 system emulation only\n");
		return -1;
	}
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			path = argv[i] + 4;
		} else if (!strncmp(argv[i], "profile=", 8)) {
			prof_path = argv[i] + 8;
		} else {
			fprintf(stderr, "vbcount: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	out = stderr;
	if (path) {
		out = fopen(path, "a");
		if (!out) {
			fprintf(stderr, "vbcount: %s: %s\n", path, strerror(errno));
			return -1;
		}
	}
	if (prof_path) {
		prof = fopen(prof_path, "a");
		if (!prof) {
			fprintf(stderr, "vbcount: %s: %s\n", prof_path,
				strerror(errno));
			return -1;
		}
		blocks = g_hash_table_new(block_hash, block_equal);
	}
	max_cpus = info->system.max_vcpus;
	win_start = calloc(max_cpus, sizeof(*win_start));
	rdi_handle = calloc(max_cpus, sizeof(*rdi_handle));
	if (!win_start || !rdi_handle)
		return -1;
	score = qemu_plugin_scoreboard_new(sizeof(struct vb_cpu));
	sc_insns = qemu_plugin_scoreboard_u64_in_struct(score, struct vb_cpu,
							insns);
	sc_vmruns = qemu_plugin_scoreboard_u64_in_struct(score, struct vb_cpu,
							 vmruns);
	emit("# vbcount: vcpus %d\n", max_cpus);
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
