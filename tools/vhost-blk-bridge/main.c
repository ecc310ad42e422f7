// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: command line, the listening socket, privileges, signals
 * and the session loop.
 *
 * One socket serves one disk.  Front-ends (QEMU's vhost-user-blk-pci)
 * connect one after another; each connection is one vhost-user session
 * with its own /dev/vhost-blk instance.
 *
 * The listening socket is created here (--socket, with --socket-mode and
 * --socket-group, bound under a temporary name and renamed into place, so
 * it never exists with other permissions and no path is unlinked), or
 * passed in: --fd N, or systemd socket activation (LISTEN_FDS).
 *
 * SIGINT and SIGTERM stay blocked except inside bridge_wait(), the one
 * place the bridge sleeps: a stop request is never lost, whatever the
 * bridge was doing when it came.  SIGHUP (systemctl reload) asks for the
 * backend's size to be read again: a session takes it between two
 * messages (vhost_user.c, online resize).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#ifdef BRIDGE_SECCOMP_SELFTEST
#include <sys/utsname.h>
#endif
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bridge.h"

#define DEFAULT_TIMEOUT		30
#define DEFAULT_LOCK_TIMEOUT	60
#define DEFAULT_SOCKET_MODE	0600
#define GROUP_SOCKET_MODE	0660

int bridge_verbose;
static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t resize_requested;
/*
 * The signal mask bridge_wait() sleeps with: SIGINT, SIGTERM and SIGHUP
 * deliverable.
 */
static sigset_t wait_mask;

static void vlog(const char *fmt, va_list ap)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "%s[%d] %ld.%03ld: ", BRIDGE_NAME, (int)getpid(),
		(long)ts.tv_sec, ts.tv_nsec / 1000000);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/*
 * A front-end can make the bridge log at will (every refused request is
 * logged): a bucket of LOG_BURST messages, refilled at LOG_PER_SEC a
 * second, bounds what it can write; -v lines are the operator's choice and
 * not limited.  What was dropped is counted and said with the next line.
 */
#define LOG_BURST	200
#define LOG_PER_SEC	20

static bool log_allowed(unsigned long *dropped)
{
	static long long last_ms;
	static unsigned long tokens = LOG_BURST, lost;
	long long now = bridge_now_ms();

	if (!last_ms)
		last_ms = now;
	if (now - last_ms >= 1000 / LOG_PER_SEC) {
		unsigned long long add = (now - last_ms) * LOG_PER_SEC / 1000;

		tokens = add >= LOG_BURST - tokens ? LOG_BURST : tokens + add;
		last_ms = now;
	}
	if (!tokens) {
		lost++;
		return false;
	}
	tokens--;
	*dropped = lost;
	lost = 0;
	return true;
}

void log_msg(const char *fmt, ...)
{
	unsigned long dropped;
	va_list ap;

	if (!log_allowed(&dropped))
		return;
	if (dropped)
		fprintf(stderr, "%s[%d]: %lu messages not logged (more than %d a second)\n",
			BRIDGE_NAME, (int)getpid(), dropped, LOG_PER_SEC);
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void log_dbg(const char *fmt, ...)
{
	va_list ap;

	if (!bridge_verbose)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: %s --backend FILE|BLOCKDEV [--socket PATH | --fd N] [options]\n"
"\n"
"vhost-user server for QEMU's vhost-user-blk-pci that hands the virtqueues\n"
"to the in-kernel /dev/vhost-blk device: after setup no request passes\n"
"through this process.  Whoever can connect to the socket can read and\n"
"write the whole backend: give the socket to the VM's QEMU only.\n"
"\n"
"  -b, --backend PATH    backing regular file or block device (opened once)\n"
"  -s, --socket PATH     unix socket to create and listen on (a stale socket\n"
"                        there is replaced; a live one is refused)\n"
"      --socket-mode MODE  its permissions, octal (default 0600; 0660 with\n"
"                        --socket-group)\n"
"      --socket-group GRP  its group (name or number)\n"
"      --fd N            listen on the socket passed in as fd N instead\n"
"                        (systemd socket activation needs no option)\n"
"  -u, --user USER       after setup, drop to USER (and its groups); it must\n"
"                        be able to open the vhost-blk device node\n"
"  -t, --timeout SEC     a front-end must send its first message, finish a\n"
"                        message it started and read a reply within SEC\n"
"                        seconds (1..3600, default %d)\n"
"  -r, --readonly        present a read-only disk\n"
"  -q, --queues N        request queues offered (1..%d, default 1); QEMU's\n"
"                        num-queues must not exceed it\n"
"  -S, --serial STR      GET_ID serial (up to %d bytes)\n"
"      --batch-delay-us N  longest a busy queue waits for the guest's burst\n"
"                        to end before it fetches, unless the guest is\n"
"                        slower (0..%d us; 0: answer every notification at\n"
"                        once; default: vhost_blk's batch_delay_us parameter)\n"
"      --irq-delay-us N  longest a queue holds the guest's interrupt for\n"
"                        completed requests while more are in flight than\n"
"                        completed (0..%d us; 0: after every completion\n"
"                        run; default: vhost_blk's irq_delay_us parameter)\n"
"      --poll-us N       busy polling: a queue whose ring ran empty spins on\n"
"                        it for up to N us since its last request before it\n"
"                        lets the guest notify again; for hosts with a core\n"
"                        to spare per queue (0..%d; 0: off; default:\n"
"                        vhost_blk's poll_us parameter)\n"
"      --buffered        use the page cache (default: O_DIRECT)\n"
"      --lock-timeout SEC  while the rings run, the backend is locked (flock);\n"
"                        a bridge started again waits up to SEC seconds for\n"
"                        the device of the one before it to finish with the\n"
"                        backend (0..3600, default %d; 0: no lock, for a\n"
"                        disk shared on purpose)\n"
"      --vhost-dev PATH  vhost-blk device node (default /dev/vhost-blk)\n"
"      --once            exit after the first session ends\n"
"      --no-kernel       testing only: speak vhost-user without a device\n"
"                        (no I/O is ever done)\n"
"  -v, --verbose         log every vhost-user message\n"
"  -h, --help            this text\n"
"      --version         the bridge's version (the modules' of the same tree)\n"
"\n"
"QEMU side: -object memory-backend-memfd,id=mem,size=1G,share=on\n"
"  -numa node,memdev=mem -chardev socket,id=c0,path=PATH\n"
"  -device vhost-user-blk-pci,chardev=c0,num-queues=N\n",
		BRIDGE_NAME, DEFAULT_TIMEOUT, VHOST_BLK_MAX_QUEUES,
		VHOST_BLK_SERIAL_LEN, VHOST_BLK_BATCH_DELAY_MAX,
		VHOST_BLK_IRQ_DELAY_MAX, VHOST_BLK_BUSYLOOP_MAX_US,
		DEFAULT_LOCK_TIMEOUT);
}

bool bridge_stopping(void)
{
	return stop_requested;
}

long long bridge_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

bool bridge_take_resize(void)
{
	if (!resize_requested)
		return false;
	resize_requested = 0;
	return true;
}

static int wait_for(int fd, short events, long long deadline_ms,
		    bool wake_on_resize)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		struct timespec ts, *tsp = NULL;
		int n;

		if (stop_requested)
			return -EINTR;
		if (wake_on_resize && resize_requested)
			return -EAGAIN;
		if (deadline_ms >= 0) {
			long long left = deadline_ms - bridge_now_ms();

			if (left <= 0)
				return 0;
			ts.tv_sec = left / 1000;
			ts.tv_nsec = (left % 1000) * 1000000;
			tsp = &ts;
		}
		n = ppoll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, tsp,
			  &wait_mask);
		if (n > 0)
			return 1;
		if (n == 0)
			continue;	/* the deadline check above decides */
		if (errno != EINTR)
			return -errno;
	}
}

int bridge_wait(int fd, short events, long long deadline_ms)
{
	return wait_for(fd, events, deadline_ms, false);
}

int bridge_wait_idle(int fd, long long deadline_ms)
{
	return wait_for(fd, POLLIN, deadline_ms, true);
}

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		resize_requested = 1;
	else
		stop_requested = 1;
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t stop;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop, &wait_mask);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	sigdelset(&wait_mask, SIGHUP);
}

/* ---- the listening socket ------------------------------------------------ */

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

/* A listening AF_UNIX stream socket passed in as @fd. */
static int check_listener(int fd, const char *how)
{
	int type = 0, domain = 0, listening = 0;
	socklen_t len = sizeof(int);
	struct stat st;

	if (fstat(fd, &st) < 0) {
		log_msg("%s: fd %d: %s", how, fd, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    (len = sizeof(int),
	     getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) ||
	    (len = sizeof(int),
	     getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0) ||
	    type != SOCK_STREAM || domain != AF_UNIX || !listening) {
		log_msg("%s: fd %d is not a listening unix stream socket",
			how, fd);
		return -1;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || set_nonblock(fd) < 0) {
		log_msg("%s: fd %d: %s", how, fd, strerror(errno));
		return -1;
	}
	return fd;
}

/*
 * systemd socket activation: LISTEN_PID is ours and LISTEN_FDS says how
 * many sockets start at fd 3.  Returns the fd, -1 on error, -2 when no
 * socket was passed this way.  The variables are removed either way, so
 * nothing the bridge might start inherits them.
 */
static int activation_fd(void)
{
	const char *pid = getenv("LISTEN_PID");
	const char *fds = getenv("LISTEN_FDS");
	char *end;
	long n;
	int ret = -2;

	if (pid && fds) {
		errno = 0;
		n = strtol(pid, &end, 10);
		if (!errno && !*end && end != pid && n == getpid()) {
			n = strtol(fds, &end, 10);
			if (*end || end == fds || n != 1) {
				log_msg("socket activation: LISTEN_FDS=%s, need exactly one socket",
					fds);
				ret = -1;
			} else {
				ret = check_listener(3, "socket activation");
			}
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return ret;
}

static int parse_group(const char *name, gid_t *gid)
{
	struct group *gr = getgrnam(name);
	char *end;
	unsigned long v;

	if (gr) {
		*gid = gr->gr_gid;
		return 0;
	}
	errno = 0;
	v = strtoul(name, &end, 10);
	if (errno || end == name || *end || v > INT_MAX)
		return -1;
	*gid = v;
	return 0;
}

/* Is something accepting connections on @path? */
static bool socket_in_use(const struct sockaddr_un *sa)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	bool live;

	if (s < 0)
		return false;
	live = connect(s, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
	       errno == EAGAIN;
	close(s);
	return live;
}

/*
 * Create the listening socket at @o->socket_path: bound under a temporary
 * name in the same directory with its final mode (umask) and group, set
 * listening, then renamed over the path.  The path never names a socket
 * with other permissions, and nothing is unlinked that another process
 * could have put there meanwhile: rename() replaces atomically.
 */
static int create_listener(const struct bridge_opts *o, struct stat *made)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sockaddr_un tmp = { .sun_family = AF_UNIX };
	const char *path = o->socket_path;
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
	mode_t mode = o->socket_mode >= 0 ? (mode_t)o->socket_mode :
		      o->socket_group ? GROUP_SOCKET_MODE : DEFAULT_SOCKET_MODE;
	gid_t gid = (gid_t)-1;
	struct stat st;
	mode_t old_umask;
	int s, n;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_msg("socket path too long (at most %zu bytes): %s",
			sizeof(sa.sun_path) - 1, path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%.*s.%s.%d.tmp",
		     (int)dirlen, path, path + dirlen, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp.sun_path)) {
		log_msg("socket path too long for its temporary name: %s",
			path);
		return -1;
	}
	if (o->socket_group && parse_group(o->socket_group, &gid)) {
		log_msg("--socket-group: no group '%s'", o->socket_group);
		return -1;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_msg("%s exists and is not a socket", path);
			return -1;
		}
		if (socket_in_use(&sa)) {
			log_msg("%s: another process is listening on it", path);
			return -1;
		}
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		log_msg("socket: %s", strerror(errno));
		return -1;
	}
	unlink(tmp.sun_path);	/* our own leftover (same pid), if any */
	old_umask = umask(~mode & 0777);
	n = bind(s, (struct sockaddr *)&tmp, sizeof(tmp));
	umask(old_umask);
	if (n < 0) {
		log_msg("bind %s: %s", tmp.sun_path, strerror(errno));
		close(s);
		return -1;
	}
	if ((gid != (gid_t)-1 &&
	     fchownat(AT_FDCWD, tmp.sun_path, -1, gid,
		      AT_SYMLINK_NOFOLLOW) < 0) ||
	    listen(s, 16) < 0 || lstat(tmp.sun_path, made) < 0 ||
	    rename(tmp.sun_path, path) < 0) {
		log_msg("listen on %s: %s", path, strerror(errno));
		unlink(tmp.sun_path);
		close(s);
		return -1;
	}
	return s;
}

/* ---- privileges -------------------------------------------------------- */

/*
 * No way back up through exec, and no ptrace or core dump of a process
 * that maps guest memory.
 */
static int lock_down(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		log_msg("prctl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Root without --user: the uid stays (files and the device it opens are
 * root's), the capabilities go, all of them: serving sessions needs none.
 */
static int drop_capabilities(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = { 0 };
	unsigned long cap;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			log_msg("dropping capability %lu: %s", cap,
				strerror(errno));
			return -1;
		}
	}
	if (syscall(SYS_capset, &hdr, data) < 0) {
		log_msg("capset: %s", strerror(errno));
		return -1;
	}
	return lock_down();
}

static int drop_privileges(const struct bridge_opts *o)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(o->user);
	if (!pw) {
		log_msg("--user: no user '%s'", o->user);
		return -1;
	}
	if (getuid() != pw->pw_uid || geteuid() != pw->pw_uid) {
		if (initgroups(pw->pw_name, pw->pw_gid) < 0 ||
		    setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
			log_msg("cannot drop to user %s: %s", o->user,
				strerror(errno));
			return -1;
		}
		if (pw->pw_uid != 0 && setuid(0) == 0) {
			log_msg("dropping to user %s did not stick", o->user);
			return -1;
		}
	}
	return lock_down();
}

/* ---- command line ------------------------------------------------------ */

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out, int base)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

enum {
	OPT_BUFFERED = 256, OPT_VHOST_DEV, OPT_NO_KERNEL, OPT_ONCE, OPT_VERSION,
	OPT_SOCKET_MODE, OPT_SOCKET_GROUP, OPT_FD, OPT_BATCH_DELAY, OPT_IRQ_DELAY,
	OPT_POLL_US, OPT_LOCK_TIMEOUT,
};

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "socket-mode", required_argument, NULL, OPT_SOCKET_MODE },
	{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
	{ "fd", required_argument, NULL, OPT_FD },
	{ "user", required_argument, NULL, 'u' },
	{ "timeout", required_argument, NULL, 't' },
	{ "backend", required_argument, NULL, 'b' },
	{ "readonly", no_argument, NULL, 'r' },
	{ "queues", required_argument, NULL, 'q' },
	{ "serial", required_argument, NULL, 'S' },
	{ "batch-delay-us", required_argument, NULL, OPT_BATCH_DELAY },
	{ "irq-delay-us", required_argument, NULL, OPT_IRQ_DELAY },
	{ "poll-us", required_argument, NULL, OPT_POLL_US },
	{ "buffered", no_argument, NULL, OPT_BUFFERED },
	{ "lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT },
	{ "vhost-dev", required_argument, NULL, OPT_VHOST_DEV },
	{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static int bad_arg(const char *opt, const char *want, const char *got)
{
	fprintf(stderr, "%s: %s: need %s, got '%s'\n", BRIDGE_NAME, opt, want,
		got);
	return -1;
}

static int parse_args(int argc, char **argv, struct bridge_opts *o)
{
	unsigned int v;
	int c;

	o->queues = 1;
	o->batch_delay_us = -1;
	o->irq_delay_us = -1;
	o->poll_us = -1;
	o->vhost_path = "/dev/vhost-blk";
	o->socket_mode = -1;
	o->listen_fd = -1;
	o->timeout = DEFAULT_TIMEOUT;
	o->lock_timeout = DEFAULT_LOCK_TIMEOUT;
	while ((c = getopt_long(argc, argv, "s:u:t:b:rq:S:vh", long_opts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket_path = optarg;
			break;
		case OPT_SOCKET_MODE:
			if (parse_uint(optarg, 0, 0777, &v, 8))
				return bad_arg("--socket-mode",
					       "an octal mode 0..0777", optarg);
			o->socket_mode = v;
			break;
		case OPT_SOCKET_GROUP:
			o->socket_group = optarg;
			break;
		case OPT_FD:
			if (parse_uint(optarg, 0, INT_MAX, &v, 10))
				return bad_arg("--fd", "a file descriptor",
					       optarg);
			o->listen_fd = v;
			break;
		case 'u':
			o->user = optarg;
			break;
		case 't':
			if (parse_uint(optarg, 1, 3600, &o->timeout, 10))
				return bad_arg("--timeout", "1..3600 seconds",
					       optarg);
			break;
		case 'b':
			o->backend_path = optarg;
			break;
		case 'r':
			o->readonly = true;
			break;
		case 'q':
			if (parse_uint(optarg, 1, VHOST_BLK_MAX_QUEUES,
				       &o->queues, 10)) {
				fprintf(stderr, "%s: --queues: need 1..%d, got '%s'\n",
					BRIDGE_NAME, VHOST_BLK_MAX_QUEUES,
					optarg);
				return -1;
			}
			break;
		case 'S':
			if (strlen(optarg) > VHOST_BLK_SERIAL_LEN) {
				fprintf(stderr, "%s: --serial: at most %d bytes\n",
					BRIDGE_NAME, VHOST_BLK_SERIAL_LEN);
				return -1;
			}
			o->serial = optarg;
			break;
		case OPT_BATCH_DELAY:
			if (parse_uint(optarg, 0, VHOST_BLK_BATCH_DELAY_MAX, &v, 10))
				return bad_arg("--batch-delay-us",
					       "0..10000 microseconds", optarg);
			o->batch_delay_us = v;
			break;
		case OPT_IRQ_DELAY:
			if (parse_uint(optarg, 0, VHOST_BLK_IRQ_DELAY_MAX, &v, 10))
				return bad_arg("--irq-delay-us",
					       "0..10000 microseconds", optarg);
			o->irq_delay_us = v;
			break;
		case OPT_POLL_US:
			if (parse_uint(optarg, 0, VHOST_BLK_BUSYLOOP_MAX_US, &v, 10))
				return bad_arg("--poll-us", "0..10000 microseconds",
					       optarg);
			o->poll_us = v;
			break;
		case OPT_LOCK_TIMEOUT:
			if (parse_uint(optarg, 0, 3600, &o->lock_timeout, 10))
				return bad_arg("--lock-timeout", "0..3600 seconds",
					       optarg);
			break;
		case OPT_BUFFERED:
			o->buffered = true;
			break;
		case OPT_VHOST_DEV:
			o->vhost_path = optarg;
			break;
		case OPT_NO_KERNEL:
			o->no_kernel = true;
			break;
		case OPT_ONCE:
			o->once = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("%s %s\n", BRIDGE_NAME, BRIDGE_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", BRIDGE_NAME,
			argv[optind]);
		return -1;
	}
	if (!o->backend_path) {
		fprintf(stderr, "%s: --backend is required (see --help)\n",
			BRIDGE_NAME);
		return -1;
	}
	if (o->listen_fd >= 0 && o->socket_path) {
		fprintf(stderr, "%s: --socket and --fd exclude each other\n",
			BRIDGE_NAME);
		return -1;
	}
	if (!o->socket_path && (o->socket_mode >= 0 || o->socket_group)) {
		fprintf(stderr, "%s: --socket-mode and --socket-group apply to the socket --socket creates\n",
			BRIDGE_NAME);
		return -1;
	}
	return 0;
}

/* ---- main -------------------------------------------------------------- */

/* accept() failures that say nothing about the listening socket itself. */
static bool accept_error_transient(int err)
{
	switch (err) {
	case EBADF:
	case EFAULT:
	case EINVAL:
	case ENOTSOCK:
	case EOPNOTSUPP:
		return false;
	default:
		return true;
	}
}

/* Remove our socket file, unless another bridge has replaced it since. */
static void remove_socket(const char *path, const struct stat *made)
{
	struct stat st;

	if (lstat(path, &st) < 0 || st.st_dev != made->st_dev ||
	    st.st_ino != made->st_ino)
		return;
	/* Privileges dropped: the socket's directory may not let us. */
	if (unlink(path) < 0)
		log_dbg("socket %s left in place: %s", path, strerror(errno));
}

static void log_peer(int s)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
		log_msg("session start (peer pid %d uid %u gid %u)",
			(int)cr.pid, (unsigned int)cr.uid,
			(unsigned int)cr.gid);
	else
		log_msg("session start");
}

int main(int argc, char **argv)
{
	struct bridge_opts opts = { 0 };
	struct bridge br = { .opts = &opts };
	const char *origin;
	struct stat made;
	bool own_socket = false;
	int lsock, ret = 0, transient = 0;

	if (parse_args(argc, argv, &opts))
		return 2;
	bridge_verbose = opts.verbose;
	setup_signals();

	/* Everything is checked here, before a front-end can connect. */
	lsock = activation_fd();
	if (lsock == -1)
		return 1;
	if (lsock >= 0) {
		if (opts.listen_fd >= 0 || opts.socket_path) {
			log_msg("socket activation: --socket and --fd do not apply");
			return 2;
		}
		origin = "socket activation (fd 3)";
	} else if (opts.listen_fd >= 0) {
		lsock = check_listener(opts.listen_fd, "--fd");
		if (lsock < 0)
			return 1;
		origin = "the socket passed in";
	} else if (opts.socket_path) {
		origin = opts.socket_path;
	} else {
		fprintf(stderr, "%s: no socket: --socket PATH, --fd N or socket activation (see --help)\n",
			BRIDGE_NAME);
		return 2;
	}

	if (backend_open(&br.be, opts.backend_path, opts.readonly,
			 opts.buffered))
		return 1;

	/* Fail early, with a clear message, when the device is missing. */
	if (!opts.no_kernel) {
		struct vdev probe;

		if (vdev_open(&probe, opts.vhost_path, false)) {
			backend_close(&br.be);
			return 1;
		}
		vdev_close(&probe);
	}

	if (lsock < 0) {
		lsock = create_listener(&opts, &made);
		if (lsock < 0) {
			backend_close(&br.be);
			return 1;
		}
		own_socket = true;
	}

	if (opts.user) {
		if (drop_privileges(&opts))
			goto fail;
		/* Sessions open the device as this user: check it can. */
		if (!opts.no_kernel) {
			struct vdev probe;

			if (vdev_open(&probe, opts.vhost_path, false)) {
				log_msg("user %s cannot use %s: give it the device's group (the udev rule sets kvm)",
					opts.user, opts.vhost_path);
				goto fail;
			}
			vdev_close(&probe);
		}
	} else if (geteuid() == 0) {
		if (drop_capabilities())
			goto fail;
		log_dbg("running as root without capabilities (see --user)");
	}

	if (sandbox_enter())
		goto fail;
#ifdef BRIDGE_SECCOMP_SELFTEST
	/* A test build: a system call outside the filter ends the process. */
	log_msg("seccomp self-test: calling uname()");
	{
		struct utsname u;

		uname(&u);
	}
	log_msg("seccomp self-test: still alive");
#endif

	log_msg("listening on %s, backend %s (%llu bytes, %s%s%s), %u queue(s)%s%s%s",
		origin, opts.backend_path, (unsigned long long)br.be.size,
		br.be.is_bdev ? "block device" : "file",
		opts.buffered ? ", buffered" : ", O_DIRECT",
		br.be.readonly ? ", read-only" : "", opts.queues,
		opts.user ? ", as user " : "", opts.user ? opts.user : "",
		opts.no_kernel ? ", NO KERNEL DEVICE (testing)" : "");

	while (!stop_requested) {
		int s = accept4(lsock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		int err = errno;

		if (s < 0) {
			int r;

			if (err == EAGAIN || err == EINTR) {
				r = bridge_wait(lsock, POLLIN, -1);
				if (r < 0 && r != -EINTR) {
					log_msg("poll: %s", strerror(-r));
					ret = 1;
					break;
				}
				continue;
			}
			if (!accept_error_transient(err)) {
				log_msg("accept: %s", strerror(err));
				ret = 1;
				break;
			}
			/*
			 * Out of fds or memory, a connection aborted: wait
			 * and try again (the connection, if any, stays
			 * queued), saying so once per run of failures.
			 */
			if (!transient++)
				log_msg("accept: %s (retrying every second)",
					strerror(err));
			bridge_wait(-1, 0, bridge_now_ms() + 1000);
			continue;
		}
		if (transient)
			log_msg("accept works again after %d failure(s)",
				transient);
		transient = 0;
		log_peer(s);
		if (vu_serve(&br, s))
			log_msg("session ended on error");
		else
			log_msg("session ended");
		close(s);
		if (opts.once)
			break;
	}

	close(lsock);
	if (own_socket)
		remove_socket(opts.socket_path, &made);
	backend_close(&br.be);
	log_msg("exit");
	return ret;

fail:
	close(lsock);
	if (own_socket)
		remove_socket(opts.socket_path, &made);
	backend_close(&br.be);
	return 1;
}
