// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the system calls it may make once set up.
 *
 * The bridge parses messages from a front-end it need not trust.  Once the
 * backend is open, the socket listens and privileges are dropped, a seccomp
 * filter allows only what serving sessions takes: socket and message I/O,
 * opening /dev/vhost-blk and reading sysfs for each session, its ioctls,
 * mapping guest memory, the backend's lock, logging, signals, and exit.
 * Anything else kills the process (SIGSYS): a bug or an exploited parser
 * ends there, and the guest's disk with it, which systemd restarts.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>

#include "bridge.h"

static const int allowed[] = {
	/* sessions: the socket, messages and their fds */
	SCMP_SYS(accept4), SCMP_SYS(recvmsg), SCMP_SYS(recvfrom),
	SCMP_SYS(sendmsg), SCMP_SYS(sendto), SCMP_SYS(getsockopt),
	SCMP_SYS(shutdown), SCMP_SYS(ppoll), SCMP_SYS(poll),
	SCMP_SYS(close), SCMP_SYS(fcntl),
	/* /dev/vhost-blk per session, sysfs, the backend's lock and size */
	SCMP_SYS(openat), SCMP_SYS(ioctl), SCMP_SYS(flock),
	SCMP_SYS(read), SCMP_SYS(pread64), SCMP_SYS(lseek),
	SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx),
	/* guest memory, dirty logs, the allocator */
	SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect),
	SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(brk),
	/* logging, time, signals, the end (the socket file removed) */
	SCMP_SYS(write), SCMP_SYS(writev), SCMP_SYS(getpid),
	SCMP_SYS(gettid), SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep),
	SCMP_SYS(nanosleep), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(restart_syscall), SCMP_SYS(futex), SCMP_SYS(getrandom),
	SCMP_SYS(unlink), SCMP_SYS(exit), SCMP_SYS(exit_group),
};

int sandbox_enter(void)
{
	scmp_filter_ctx ctx;
	unsigned int i;
	int ret;

	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		log_msg("seccomp: cannot create a filter");
		return -ENOMEM;
	}
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
		if (ret && ret != -EDOM)	/* -EDOM: not on this arch */
			goto out;
	}
	ret = seccomp_load(ctx);
out:
	if (ret)
		log_msg("seccomp: cannot install the filter: %s", strerror(-ret));
	seccomp_release(ctx);
	return ret;
}
