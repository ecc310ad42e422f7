// SPDX-License-Identifier: GPL-2.0
/*
 * vbmark: open and close a measurement window of the vbcount TCG plugin
 * from inside a guest (any nesting level), and two calibration loads.
 *
 *   vbmark open ID | close ID     the marker instruction, ID in RDI
 *   vbmark enter ID | leave ID    the same for a window several threads
 *                                 share: the first to enter opens it, the
 *                                 last to leave closes it
 *   vbmark loop N ID              window ID around N iterations of a
 *                                 two-instruction loop (2N instructions),
 *                                 on the one vCPU it starts on
 *   vbmark run N                  the same loop with no window of its own
 *                                 (counted by whatever window is open)
 *   vbmark cpuid N ID             window ID around N CPUID instructions
 *                                 (each one a VM exit in a KVM guest)
 *
 * Outside the plugin the marker is an ordinary NOP: vbmark does nothing.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * nopl 0x5642000N(%rax): the plugin reads the op N from the displacement
 * and the window's id from RDI.
 */
#define VB_MARK_FN(name, op)						\
static inline void name(uint64_t id)					\
{									\
	asm volatile(".byte 0x0f, 0x1f, 0x80\n\t.long 0x5642000" #op	\
		     : : "D"(id) : "memory");				\
}

VB_MARK_FN(vb_open, 1)
VB_MARK_FN(vb_close, 2)
VB_MARK_FN(vb_enter, 3)
VB_MARK_FN(vb_leave, 4)

/*
 * Stay on the CPU we run on, so that a loop is counted on one vCPU: the
 * calibration compares that vCPU's count with the loop's length.
 */
static void stay(void)
{
	int cpu = sched_getcpu();
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("vbmark: sched_setaffinity");
}

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	if (!*s || *end) {
		fprintf(stderr, "vbmark: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "open")) {
		vb_open(num(argv[2]));
	} else if (argc == 3 && !strcmp(argv[1], "close")) {
		vb_close(num(argv[2]));
	} else if (argc == 3 && !strcmp(argv[1], "enter")) {
		vb_enter(num(argv[2]));
	} else if (argc == 3 && !strcmp(argv[1], "leave")) {
		vb_leave(num(argv[2]));
	} else if (argc == 4 && !strcmp(argv[1], "loop")) {
		uint64_t n = num(argv[2]), id = num(argv[3]);

		if (!n)
			return 2;
		stay();
		vb_open(id);
		asm volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
		vb_close(id);
	} else if (argc == 3 && !strcmp(argv[1], "run")) {
		uint64_t n = num(argv[2]);

		if (!n)
			return 2;
		asm volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
	} else if (argc == 4 && !strcmp(argv[1], "cpuid")) {
		uint64_t n = num(argv[2]), id = num(argv[3]);
		uint32_t a, b, c, d;

		vb_open(id);
		while (n--) {
			a = 0;
			c = 0;
			asm volatile("cpuid"
				     : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
		}
		vb_close(id);
	} else {
		fprintf(stderr,
			"usage: vbmark open ID | close ID | enter ID | leave ID | loop N ID | run N | cpuid N ID\n");
		return 2;
	}
	return 0;
}
