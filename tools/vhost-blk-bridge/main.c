// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: command line, listening socket and the session loop.
 *
 * One socket serves one disk.  Front-ends (QEMU's vhost-user-blk-pci)
 * connect one after another; each connection is one vhost-user session
 * with its own /dev/vhost-blk instance.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bridge.h"

int bridge_verbose;
static volatile sig_atomic_t stop_requested;

static void vlog(const char *fmt, va_list ap)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "%s[%d] %ld.%03ld: ", BRIDGE_NAME, (int)getpid(),
		(long)ts.tv_sec, ts.tv_nsec / 1000000);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void log_msg(const char *fmt, ...)
{
	va_list ap;

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
"Usage: %s --socket PATH --backend FILE|BLOCKDEV [options]\n"
"\n"
"vhost-user server for QEMU's vhost-user-blk-pci that hands the virtqueues\n"
"to the in-kernel /dev/vhost-blk device: after setup no request passes\n"
"through this process.\n"
"\n"
"  -s, --socket PATH     unix socket to listen on (created; an existing\n"
"                        socket file is replaced)\n"
"  -b, --backend PATH    backing regular file or block device\n"
"  -r, --readonly        present a read-only disk\n"
"  -q, --queues N        request queues offered (1..%d, default 1); QEMU's\n"
"                        num-queues must not exceed it\n"
"  -S, --serial STR      GET_ID serial (up to %d bytes)\n"
"      --buffered        use the page cache (default: O_DIRECT)\n"
"      --vhost-dev PATH  vhost-blk device node (default /dev/vhost-blk)\n"
"      --once            exit after the first session ends\n"
"      --no-kernel       testing only: speak vhost-user without a device\n"
"                        (no I/O is ever done)\n"
"  -v, --verbose         log every vhost-user message\n"
"  -h, --help            this text\n"
"\n"
"QEMU side: -object memory-backend-memfd,id=mem,size=1G,share=on\n"
"  -numa node,memdev=mem -chardev socket,id=c0,path=PATH\n"
"  -device vhost-user-blk-pci,chardev=c0,num-queues=N\n",
		BRIDGE_NAME, VHOST_BLK_MAX_QUEUES, VHOST_BLK_SERIAL_LEN);
}

bool bridge_stopping(void)
{
	return stop_requested;
}

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int s;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_msg("socket path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_msg("%s exists and is not a socket", path);
			return -1;
		}
		unlink(path);
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		log_msg("socket: %s", strerror(errno));
		return -1;
	}
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s, 1) < 0) {
		log_msg("listen on %s: %s", path, strerror(errno));
		close(s);
		return -1;
	}
	return s;
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

enum { OPT_BUFFERED = 256, OPT_VHOST_DEV, OPT_NO_KERNEL, OPT_ONCE };

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "backend", required_argument, NULL, 'b' },
	{ "readonly", no_argument, NULL, 'r' },
	{ "queues", required_argument, NULL, 'q' },
	{ "serial", required_argument, NULL, 'S' },
	{ "buffered", no_argument, NULL, OPT_BUFFERED },
	{ "vhost-dev", required_argument, NULL, OPT_VHOST_DEV },
	{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_args(int argc, char **argv, struct bridge_opts *o)
{
	int c;

	o->queues = 1;
	o->vhost_path = "/dev/vhost-blk";
	while ((c = getopt_long(argc, argv, "s:b:rq:S:vh", long_opts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket_path = optarg;
			break;
		case 'b':
			o->backend_path = optarg;
			break;
		case 'r':
			o->readonly = true;
			break;
		case 'q':
			if (parse_uint(optarg, 1, VHOST_BLK_MAX_QUEUES,
				       &o->queues)) {
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
	if (!o->socket_path || !o->backend_path) {
		fprintf(stderr, "%s: --socket and --backend are required (see --help)\n",
			BRIDGE_NAME);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bridge_opts opts = { 0 };
	struct bridge br = { .opts = &opts };
	struct sigaction sa = { .sa_handler = on_signal };
	int lsock, ret = 0;

	if (parse_args(argc, argv, &opts))
		return 2;
	bridge_verbose = opts.verbose;

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

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	lsock = listen_on(opts.socket_path);
	if (lsock < 0) {
		backend_close(&br.be);
		return 1;
	}
	log_msg("listening on %s, backend %s (%llu bytes, %s%s%s), %u queue(s)%s",
		opts.socket_path, opts.backend_path,
		(unsigned long long)br.be.size,
		br.be.is_bdev ? "block device" : "file",
		opts.buffered ? ", buffered" : ", O_DIRECT",
		br.be.readonly ? ", read-only" : "", opts.queues,
		opts.no_kernel ? ", NO KERNEL DEVICE (testing)" : "");

	while (!stop_requested) {
		int s = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);

		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			log_msg("accept: %s", strerror(errno));
			ret = 1;
			break;
		}
		log_msg("session start");
		if (vu_serve(&br, s))
			log_msg("session ended on error");
		else
			log_msg("session ended");
		close(s);
		if (opts.once)
			break;
	}

	close(lsock);
	unlink(opts.socket_path);
	backend_close(&br.be);
	log_msg("exit");
	return ret;
}
