// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the vhost-user protocol (QEMU docs/interop/vhost-user.rst).
 *
 * One session = one front-end connection = one /dev/vhost-blk instance.
 * Every message is validated (size, fd count, ring index, addresses) before
 * it reaches the kernel; a malformed one ends the session.  Requests we do
 * not implement are refused (REPLY_ACK failure, or an empty reply where the
 * request expects data) and the session goes on.
 *
 * Message I/O never blocks without a bound: the socket is non-blocking and
 * every wait goes through bridge_wait(), which also delivers SIGTERM.  A
 * front-end must send its first message within --timeout seconds of
 * connecting, complete every message it has started within --timeout, and
 * read every reply within --timeout; otherwise the session ends.  Between
 * messages it may stay silent for as long as it likes.
 *
 * Ring start/stop: the backend is attached to the device (which starts
 * request processing on every ring with a kick fd) once the rings are
 * enabled, and detached (which drains in-flight requests) before a ring is
 * stopped by GET_VRING_BASE, disabled, or reconfigured.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bridge.h"

/* Requests (front-end to back-end). */
enum {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SEND_RARP = 19,
	VU_NET_SET_MTU = 20,
	VU_SET_BACKEND_REQ_FD = 21,
	VU_IOTLB_MSG = 22,
	VU_SET_VRING_ENDIAN = 23,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_CREATE_CRYPTO_SESSION = 26,
	VU_CLOSE_CRYPTO_SESSION = 27,
	VU_POSTCOPY_ADVISE = 28,
	VU_POSTCOPY_LISTEN = 29,
	VU_POSTCOPY_END = 30,
	VU_GET_INFLIGHT_FD = 31,
	VU_SET_INFLIGHT_FD = 32,
	VU_GPU_SET_SOCKET = 33,
	VU_RESET_DEVICE = 34,
	VU_VRING_KICK = 35,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_STATUS = 39,
	VU_GET_STATUS = 40,
	VU_GET_SHARED_OBJECT = 41,
	VU_SET_DEVICE_STATE_FD = 42,
	VU_CHECK_DEVICE_STATE = 43,
	VU_REQ_MAX
};

/* Header flags. */
#define VU_VERSION		0x1
#define VU_VERSION_MASK		0x3
#define VU_FLAG_REPLY		(1u << 2)
#define VU_FLAG_NEED_REPLY	(1u << 3)

/* Virtio feature bit that announces the protocol feature negotiation. */
#define VU_F_PROTOCOL_FEATURES	30

/* Protocol features. */
#define VU_PF_MQ		0
#define VU_PF_LOG_SHMFD		1
#define VU_PF_REPLY_ACK		3
#define VU_PF_BACKEND_REQ	5
#define VU_PF_CONFIG		9
#define VU_PF_RESET_DEVICE	13
#define VU_PF_CONFIGURE_MEM_SLOTS	15
#define VU_PF_STATUS		16

#define VU_PROTOCOL_FEATURES	((1ULL << VU_PF_MQ) | \
				 (1ULL << VU_PF_LOG_SHMFD) | \
				 (1ULL << VU_PF_REPLY_ACK) | \
				 (1ULL << VU_PF_BACKEND_REQ) | \
				 (1ULL << VU_PF_CONFIG) | \
				 (1ULL << VU_PF_RESET_DEVICE) | \
				 (1ULL << VU_PF_CONFIGURE_MEM_SLOTS) | \
				 (1ULL << VU_PF_STATUS))

/* Requests of the back-end channel (back-end to front-end). */
#define VU_BACKEND_CONFIG_CHANGE_MSG	2

/* Kick/call/err payload: ring index in bits 0-7, bit 8 = no fd. */
#define VU_VRING_IDX_MASK	0xffu
#define VU_VRING_NOFD		(1u << 8)

#define VU_MAX_PAYLOAD		4096
#define VU_CONFIG_HDR		12
/* Where old cloud-hypervisor releases read the config (the virtio-pci BAR's). */
#define VU_CONFIG_PCI_OFFSET	0x100
/* GET/SET_CONFIG flags: 0 = written by the front-end; this = a migration's. */
#define VU_CONFIG_F_MIGRATION	1u

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vu_mem_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uaddr;
	uint64_t mmap_offset;
};

struct vu_mem {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region r[MEM_MAX_REGIONS];
};

/* ADD_MEM_REG, REM_MEM_REG: one region. */
struct vu_mem_one {
	uint64_t padding;
	struct vu_mem_region r;
};

/* SET_LOG_BASE with LOG_SHMFD: where the log is in the fd sent along. */
struct vu_log {
	uint64_t size;
	uint64_t offset;
};

/*
 * The largest dirty log taken: one bit per 4 KiB page, so 1 GiB of log
 * covers 32 TiB of guest-physical addresses.
 */
#define VU_LOG_MAX		(1ULL << 30)

struct vu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t region[VU_CONFIG_SPACE];
};

struct vu_msg {
	struct vu_hdr hdr;
	union {
		uint64_t u64;
		struct vhost_vring_state state;
		struct vhost_vring_addr addr;
		struct vu_mem mem;
		struct vu_mem_one one;
		struct vu_log log;
		struct vu_config cfg;
		uint8_t raw[VU_MAX_PAYLOAD];
	} p;
	int fds[MEM_MAX_REGIONS];
	unsigned int nfds;
};

struct vu_ring {
	unsigned int num;
	bool num_set;
	bool addr_set;
	bool kick_set;
	bool enabled;
	bool stopped;		/* GET_VRING_BASE seen since last setup */
	/*
	 * As the front-end sent it, in its own address space: the rings are
	 * translated into ours from this whenever the memory table changes.
	 */
	struct vhost_vring_addr qaddr;
};

struct session {
	struct bridge *br;
	int sock;
	struct vdev dev;
	bool owner;
	bool attached;
	int attached_fd;		/* backend fd the device runs on */
	bool wce;			/* the guest's write-cache setting */
	bool features_set;		/* SET_FEATURES seen */
	uint64_t dev_features;		/* what the kernel device offers */
	uint64_t features;		/* acked by the front-end */
	uint64_t protocol_features;	/* acked */
	uint8_t config[VU_CONFIG_SPACE];
	int backend_req_fd;		/* back-end channel; -1: none */
	/* The capacity changed and the front-end has not read it since. */
	bool config_news;
	struct mem_table mem;
	/* The dirty log of a migration, as mapped here; NULL: none. */
	void *log;
	size_t log_len;
	uint64_t log_size;		/* bytes of log the kernel may mark */
	unsigned int max_regions;	/* GET_MAX_MEM_SLOTS */
	uint8_t status;			/* virtio device status (SET_STATUS) */
	struct vu_ring vr[VHOST_BLK_MAX_QUEUES];
};

/* Result of a handler beyond 0 / -errno: end the session. */
#define VU_FATAL	(-100000)

static const char *const req_names[VU_REQ_MAX] = {
	[VU_GET_FEATURES] = "GET_FEATURES",
	[VU_SET_FEATURES] = "SET_FEATURES",
	[VU_SET_OWNER] = "SET_OWNER",
	[VU_RESET_OWNER] = "RESET_OWNER",
	[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VU_SET_LOG_BASE] = "SET_LOG_BASE",
	[VU_SET_LOG_FD] = "SET_LOG_FD",
	[VU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VU_SEND_RARP] = "SEND_RARP",
	[VU_NET_SET_MTU] = "NET_SET_MTU",
	[VU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
	[VU_IOTLB_MSG] = "IOTLB_MSG",
	[VU_SET_VRING_ENDIAN] = "SET_VRING_ENDIAN",
	[VU_GET_CONFIG] = "GET_CONFIG",
	[VU_SET_CONFIG] = "SET_CONFIG",
	[VU_CREATE_CRYPTO_SESSION] = "CREATE_CRYPTO_SESSION",
	[VU_CLOSE_CRYPTO_SESSION] = "CLOSE_CRYPTO_SESSION",
	[VU_POSTCOPY_ADVISE] = "POSTCOPY_ADVISE",
	[VU_POSTCOPY_LISTEN] = "POSTCOPY_LISTEN",
	[VU_POSTCOPY_END] = "POSTCOPY_END",
	[VU_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VU_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
	[VU_GPU_SET_SOCKET] = "GPU_SET_SOCKET",
	[VU_RESET_DEVICE] = "RESET_DEVICE",
	[VU_VRING_KICK] = "VRING_KICK",
	[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
	[VU_ADD_MEM_REG] = "ADD_MEM_REG",
	[VU_REM_MEM_REG] = "REM_MEM_REG",
	[VU_SET_STATUS] = "SET_STATUS",
	[VU_GET_STATUS] = "GET_STATUS",
	[VU_GET_SHARED_OBJECT] = "GET_SHARED_OBJECT",
	[VU_SET_DEVICE_STATE_FD] = "SET_DEVICE_STATE_FD",
	[VU_CHECK_DEVICE_STATE] = "CHECK_DEVICE_STATE",
};

static const char *req_name(uint32_t req)
{
	if (req < VU_REQ_MAX && req_names[req])
		return req_names[req];
	return "UNKNOWN";
}

/* Requests whose answer is a reply of their own (not a REPLY_ACK). */
static bool has_own_reply(uint32_t req)
{
	switch (req) {
	case VU_GET_FEATURES:
	case VU_GET_PROTOCOL_FEATURES:
	case VU_GET_VRING_BASE:
	case VU_GET_QUEUE_NUM:
	case VU_GET_CONFIG:
	case VU_SET_LOG_BASE:	/* with LOG_SHMFD, QEMU waits for one */
	case VU_CREATE_CRYPTO_SESSION:
	case VU_POSTCOPY_ADVISE:
	case VU_GET_INFLIGHT_FD:
	case VU_GET_MAX_MEM_SLOTS:
	case VU_GET_STATUS:
	case VU_GET_SHARED_OBJECT:
	case VU_SET_DEVICE_STATE_FD:
	case VU_CHECK_DEVICE_STATE:
		return true;
	default:
		return false;
	}
}

static void close_fds(struct vu_msg *m)
{
	unsigned int i;

	for (i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nfds = 0;
}

/* ---- message I/O ------------------------------------------------------ */

static long long timeout_ms(const struct session *s)
{
	return s->br->opts->timeout * 1000LL;
}

/* Read exactly @len bytes before @deadline. */
static int read_full(int sock, void *buf, size_t len, long long deadline)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = recv(sock, (char *)buf + done, len - done,
				 MSG_DONTWAIT);
		int r;

		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		r = bridge_wait(sock, POLLIN, deadline);
		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0)
			return r;
	}
	return 0;
}

static void log_partial(const struct session *s, struct vu_msg *m, int err,
			const char *what)
{
	if (err == -ETIMEDOUT)
		log_msg("malformed message: %s %s: the front-end sent part of it and nothing more for %u s",
			req_name(m->hdr.request), what,
			s->br->opts->timeout);
	else if (err != -EINTR)
		log_msg("malformed message: %s %s: %s",
			req_name(m->hdr.request), what,
			err == -EPIPE ? "truncated" : strerror(-err));
}

/*
 * Read one message.  @idle_deadline bounds the wait for its first byte
 * (-1: none).  Returns 1 on a message, 0 on a clean EOF between messages
 * or when the bridge is stopping, 2 when a resize (SIGHUP) is pending
 * before a message has begun, -1 on a broken, malformed or stalled
 * transfer.
 */
static int vu_recv(struct session *s, struct vu_msg *m,
		   long long idle_deadline)
{
	union {
		char buf[CMSG_SPACE(MEM_MAX_REGIONS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = &m->hdr, .iov_len = sizeof(m->hdr) };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cbuf.buf,
		.msg_controllen = sizeof(cbuf.buf),
	};
	struct cmsghdr *c;
	long long deadline;
	ssize_t n;
	int r;

	m->nfds = 0;
	m->hdr.request = 0;
	for (;;) {
		n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			log_msg("recvmsg: %s", strerror(errno));
			return -1;
		}
		r = bridge_wait_idle(s->sock, idle_deadline);
		if (r == -EINTR)
			return 0;
		if (r == -EAGAIN)
			return 2;
		if (r == 0) {
			log_msg("the front-end sent no message within %u s of connecting",
				s->br->opts->timeout);
			return -1;
		}
		if (r < 0) {
			log_msg("poll: %s", strerror(-r));
			return -1;
		}
	}
	if (n == 0)
		return 0;
	deadline = bridge_now_ms() + timeout_ms(s);
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k, cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(fd));
			if (m->nfds < MEM_MAX_REGIONS)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		log_msg("malformed message: too many fds");
		close_fds(m);
		return -1;
	}
	if (n < (ssize_t)sizeof(m->hdr)) {
		r = read_full(s->sock, (char *)&m->hdr + n,
			      sizeof(m->hdr) - n, deadline);
		if (r) {
			if (r == -EPIPE)
				log_msg("malformed message: short header");
			else
				log_partial(s, m, r, "header");
			close_fds(m);
			return r == -EINTR ? 0 : -1;
		}
	}
	if ((m->hdr.flags & VU_VERSION_MASK) != VU_VERSION ||
	    (m->hdr.flags & VU_FLAG_REPLY)) {
		log_msg("malformed message: %s flags 0x%x",
			req_name(m->hdr.request), m->hdr.flags);
		close_fds(m);
		return -1;
	}
	if (m->hdr.size > VU_MAX_PAYLOAD) {
		log_msg("malformed message: %s payload %u bytes",
			req_name(m->hdr.request), m->hdr.size);
		close_fds(m);
		return -1;
	}
	if (m->hdr.size) {
		r = read_full(s->sock, &m->p, m->hdr.size, deadline);
		if (r) {
			log_partial(s, m, r, "payload");
			close_fds(m);
			return r == -EINTR ? 0 : -1;
		}
	}
	return 1;
}

/* Send a reply; the front-end has --timeout seconds to take it. */
static int vu_send(struct session *s, uint32_t req, const void *payload,
		   uint32_t size)
{
	struct {
		struct vu_hdr h;
		uint8_t p[VU_MAX_PAYLOAD];
	} __attribute__((packed)) buf;
	size_t want = sizeof(buf.h) + size, done = 0;
	long long deadline = bridge_now_ms() + timeout_ms(s);

	if (size > VU_MAX_PAYLOAD)
		return -1;
	buf.h.request = req;
	buf.h.flags = VU_VERSION | VU_FLAG_REPLY;
	buf.h.size = size;
	if (size)
		memcpy(buf.p, payload, size);
	while (done < want) {
		ssize_t n = send(s->sock, (char *)&buf + done, want - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		int r;

		if (n > 0) {
			done += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			log_msg("reply to %s: %s", req_name(req),
				strerror(errno));
			return -1;
		}
		r = bridge_wait(s->sock, POLLOUT, deadline);
		if (r == 0) {
			log_msg("reply to %s: the front-end has not read it for %u s",
				req_name(req), s->br->opts->timeout);
			return -1;
		}
		if (r < 0) {
			if (r != -EINTR)
				log_msg("reply to %s: %s", req_name(req),
					strerror(-r));
			return -1;
		}
	}
	return 0;
}

static int reply_u64(struct session *s, uint32_t req, uint64_t v)
{
	return vu_send(s, req, &v, sizeof(v)) ? VU_FATAL : 0;
}

/* ---- backend attach / detach --------------------------------------------- */

static unsigned int nqueues(const struct session *s)
{
	return s->br->opts->queues;
}

/*
 * Without VIRTIO_BLK_F_FLUSH the guest cannot ask for durability, so every
 * write must be durable at completion (virtio 1.x, 5.2.6): write-through,
 * and the config says so (writeback = 0).  Before SET_FEATURES the
 * guest's setting is shown.
 */
static bool flush_negotiated(const struct session *s)
{
	return !s->features_set ||
	       (s->features & (1ULL << VIRTIO_BLK_F_FLUSH));
}

static bool effective_wce(const struct session *s)
{
	return s->wce && flush_negotiated(s);
}

static void notify_config_change(struct session *s);

static uint64_t config_capacity(const struct session *s)
{
	uint64_t c;

	memcpy(&c, s->config, sizeof(c));
	return le64toh(c);
}

static void set_config_capacity(struct session *s, uint64_t sectors)
{
	uint64_t c = htole64(sectors);

	memcpy(s->config, &c, sizeof(c));
	s->config_news = true;
}

/*
 * The device takes the backend's size as it is when the rings start.  If
 * that is not what the config says (the backend was resized and nobody
 * sent SIGHUP), the config follows; and the front-end is told whenever it
 * has not read a change yet: QEMU drops a change message while its device
 * is stopped, so one sent then is sent again now.
 */
static void sync_capacity(struct session *s)
{
	struct vhost_blk_config cfg;
	uint64_t cap;

	if (vdev_get_config(&s->dev, &cfg))
		return;
	cap = le64toh(cfg.blk.capacity);
	if (cap != config_capacity(s)) {
		log_msg("resize: backend %s: %llu -> %llu sectors (at ring start)",
			s->br->be.path,
			(unsigned long long)config_capacity(s),
			(unsigned long long)cap);
		set_config_capacity(s, cap);
	}
	if (s->config_news)
		notify_config_change(s);
}

/*
 * While the rings run, the backend fd the device uses holds an exclusive
 * flock.  The kernel device keeps that open file, and with it the lock,
 * until it is released, after its last request has completed and been
 * published: a bridge killed and started again finds the lock held until
 * the old device is gone, and waits for it (up to --lock-timeout).
 */
static int lock_backend(struct session *s, int fd)
{
	unsigned int wait = s->br->opts->lock_timeout;
	long long deadline = bridge_now_ms() + wait * 1000LL;
	bool told = false;

	if (!wait)
		return 0;
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		int err = errno;

		if (err != EWOULDBLOCK) {
			log_msg("cannot lock the backend: %s", strerror(err));
			return -err;
		}
		if (bridge_stopping() || bridge_now_ms() >= deadline) {
			log_msg("the backend is still locked after %u s: another device runs on it; not starting the rings",
				wait);
			return -EBUSY;
		}
		if (!told)
			log_msg("the backend is locked by another device (a bridge before this one, completing its requests?): waiting up to %u s",
				wait);
		told = true;
		/* Sleep where SIGTERM is delivered: a stop is not held up. */
		if (bridge_wait(-1, 0, bridge_now_ms() + 10) == -EINTR) {
			log_msg("stopping: not starting the rings");
			return -EINTR;
		}
	}
	if (told)
		log_msg("the backend is free: starting the rings");
	return 0;
}

/*
 * Each ring resumes at its used index.  This device drains its rings
 * whenever they stop, so every request it fetched is in the used ring, and
 * the used index is where the device before it left off.  The front-end's
 * base says the same, but for a back-end that went away without stopping
 * the rings (a bridge killed): QEMU then takes the used index at the
 * moment it sees the connection close, while the old device may still be
 * completing requests, and a base that lags would have them fetched again.
 * With the backend locked, the old device is gone and its index final.
 */
static int resume_rings(struct session *s)
{
	unsigned int i, base;
	uint16_t used;

	for (i = 0; i < nqueues(s); i++) {
		struct vu_ring *vr = &s->vr[i];

		if (!vr->addr_set)
			continue;
		if (vdev_get_vring_base(&s->dev, i, &base))
			return -EIO;
		/* Through the fd: a front-end may have cut it short. */
		if (mem_read(&s->mem, vr->qaddr.used_user_addr + 2, &used,
			     sizeof(used))) {
			log_msg("ring %u: the used ring cannot be read (the front-end shrank guest memory?)",
				i);
			return -EFAULT;
		}
		used = le16toh(used);
		if (used == (uint16_t)base)
			continue;
		log_msg("ring %u: resuming at used index %u, not at base %u: a device before this one completed requests after the front-end last looked",
			i, used, base);
		if (vdev_set_vring_base(&s->dev, i, used))
			return -EIO;
	}
	return 0;
}

static int attach(struct session *s)
{
	struct bridge *br = s->br;
	int fd = backend_fd(&br->be, effective_wce(s));
	int ret;

	if (s->attached)
		return 0;
	ret = lock_backend(s, fd);
	if (ret)
		return ret;
	ret = resume_rings(s);
	if (!ret)
		ret = vdev_set_backend(&s->dev, fd, br->be.readonly,
				       nqueues(s), br->opts->serial);
	if (ret) {
		flock(fd, LOCK_UN);
		return ret;
	}
	s->attached = true;
	s->attached_fd = fd;
	log_dbg("rings started (%s)", effective_wce(s) ?
		"write-back" : "write-through, O_DSYNC");
	sync_capacity(s);
	return 0;
}

static int detach(struct session *s)
{
	int ret;

	if (!s->attached)
		return 0;
	ret = vdev_set_backend(&s->dev, -1, false, nqueues(s), NULL);
	if (!ret) {
		s->attached = false;
		/* Drained: nothing of this device touches the backend now. */
		flock(s->attached_fd, LOCK_UN);
		log_dbg("rings stopped and drained");
	}
	return ret;
}

/*
 * Run the device iff at least one ring is set up and every ring that has a
 * kick fd is enabled and not stopped.
 */
static int update_running(struct session *s)
{
	bool any = false, run = true;
	unsigned int i;

	for (i = 0; i < nqueues(s); i++) {
		const struct vu_ring *vr = &s->vr[i];

		if (!vr->kick_set)
			continue;
		any = true;
		if (!vr->enabled || vr->stopped || !vr->addr_set)
			run = false;
	}
	if (!any || !s->mem.nregions)
		run = false;
	return run ? attach(s) : detach(s);
}

/* ---- session setup ---------------------------------------------------- */

static int session_open_device(struct session *s)
{
	struct bridge *br = s->br;
	struct vhost_blk_config cfg;
	int ret;

	/*
	 * Every session starts with the device's default, write-back: a guest
	 * that switched the cache off speaks only for its own session.
	 */
	s->wce = true;
	s->features_set = false;
	/* The device reads the size as it is now: a resize asked before is done. */
	bridge_take_resize();
	if (backend_refresh_size(&br->be))
		return -EIO;
	ret = vdev_open(&s->dev, br->opts->vhost_path, br->opts->no_kernel);
	if (ret)
		return ret;
	ret = vdev_set_delay(&s->dev, VHOST_BLK_SET_BATCH_DELAY,
			     "VHOST_BLK_SET_BATCH_DELAY", br->opts->batch_delay_us);
	if (!ret)
		ret = vdev_set_delay(&s->dev, VHOST_BLK_SET_IRQ_DELAY,
				     "VHOST_BLK_SET_IRQ_DELAY",
				     br->opts->irq_delay_us);
	if (ret) {
		vdev_close(&s->dev);
		return ret;
	}
	s->dev.dry_capacity = br->be.size / 512;
	s->dev.dry_queues = nqueues(s);
	s->dev.dry_ro = br->be.readonly;

	/* Attach once to learn what the device presents, then stop again. */
	ret = vdev_set_backend(&s->dev, backend_fd(&br->be, true),
			       br->be.readonly, nqueues(s), br->opts->serial);
	if (!ret)
		ret = vdev_get_config(&s->dev, &cfg);
	if (!ret)
		ret = vdev_set_backend(&s->dev, -1, false, nqueues(s), NULL);
	if (ret) {
		vdev_close(&s->dev);
		return ret;
	}
	memset(s->config, 0, sizeof(s->config));
	memcpy(s->config, cfg.raw,
	       cfg.config_len < sizeof(cfg.raw) ? cfg.config_len :
	       sizeof(cfg.raw));
	s->config_news = false;
	s->dev_features = cfg.features;
	if (br->be.readonly)
		s->dev_features |= 1ULL << VIRTIO_BLK_F_RO;
	vdev_spread_workers(&s->dev, nqueues(s));
	s->max_regions = vdev_max_mem_regions(&s->dev);
	/* A reset device gets the guest memory its session kept. */
	if (s->mem.nregions && vdev_set_mem_table(&s->dev, &s->mem)) {
		vdev_close(&s->dev);
		return -EIO;
	}
	log_dbg("device features 0x%llx, capacity %llu sectors",
		(unsigned long long)s->dev_features,
		(unsigned long long)le64toh(cfg.blk.capacity));
	return 0;
}

/*
 * @reset: RESET_OWNER or RESET_DEVICE, the connection goes on.  What
 * belongs to it stays: the back-end channel, and guest memory, which a
 * front-end with CONFIGURE_MEM_SLOTS does not send again (QEMU keeps its
 * own copy of what the back-end has and sends only changes).
 */
static void session_close_device(struct session *s, bool reset)
{
	detach(s);
	vdev_close(&s->dev);
	/* The device is gone: nothing marks the log any more. */
	if (s->log)
		munmap(s->log, s->log_len);
	s->log = NULL;
	if (s->backend_req_fd >= 0 && !reset) {
		close(s->backend_req_fd);
		s->backend_req_fd = -1;
	}
	if (!reset)
		mem_unmap(&s->mem);
	memset(s->vr, 0, sizeof(s->vr));
	s->features = 0;
	s->features_set = false;
}

/* Features offered to the front-end. */
static uint64_t offered_features(const struct session *s)
{
	return s->dev_features | (1ULL << VIRTIO_BLK_F_CONFIG_WCE) |
	       (1ULL << VU_F_PROTOCOL_FEATURES);
}

/* ---- request handlers ------------------------------------------------- */

static bool size_is(const struct vu_msg *m, uint32_t size, unsigned int nfds)
{
	if (m->hdr.size != size || m->nfds != nfds) {
		log_msg("malformed %s: payload %u bytes, %u fds (want %u, %u)",
			req_name(m->hdr.request), m->hdr.size, m->nfds, size,
			nfds);
		return false;
	}
	return true;
}

/* GET_* requests carry no payload (some front-ends send a zero u64). */
static bool no_payload(const struct vu_msg *m)
{
	if ((m->hdr.size == 0 || m->hdr.size == 8) && !m->nfds)
		return true;
	return size_is(m, 0, 0);
}

static struct vu_ring *ring_of(struct session *s, const struct vu_msg *m,
			     unsigned int idx)
{
	if (idx >= nqueues(s)) {
		log_msg("malformed %s: ring %u (device has %u)",
			req_name(m->hdr.request), idx, nqueues(s));
		return NULL;
	}
	return &s->vr[idx];
}

static int do_set_features(struct session *s, struct vu_msg *m)
{
	uint64_t f;
	int ret;

	if (!size_is(m, 8, 0))
		return VU_FATAL;
	f = m->p.u64;
	if (f & ~offered_features(s)) {
		log_msg("SET_FEATURES 0x%llx: not offered: 0x%llx",
			(unsigned long long)f,
			(unsigned long long)(f & ~offered_features(s)));
		return -EINVAL;
	}
	ret = vdev_set_features(&s->dev, f & s->dev_features);
	if (ret)
		return ret;
	s->features = f;
	s->features_set = true;
	if (!flush_negotiated(s))
		log_msg("VIRTIO_BLK_F_FLUSH not negotiated: write-through");
	/* Running on the fd of the other cache mode: switch under a drain. */
	if (s->attached &&
	    s->attached_fd != backend_fd(&s->br->be, effective_wce(s))) {
		ret = detach(s);
		if (!ret)
			ret = update_running(s);
	}
	return ret;
}

/*
 * Our addresses of a ring the front-end placed at @qa (its addresses) with
 * @num entries, each part wholly inside one region; false if any is not.
 */
static bool ring_to_host(const struct mem_table *mt,
			 const struct vhost_vring_addr *qa, unsigned int num,
			 void **desc, void **avail, void **used)
{
	*desc = mem_qva_to_host(mt, qa->desc_user_addr, 16ULL * num);
	*avail = mem_qva_to_host(mt, qa->avail_user_addr, 6 + 2ULL * num);
	*used = mem_qva_to_host(mt, qa->used_user_addr, 6 + 8ULL * num);
	return *desc && *avail && *used;
}

/* A dirty log of @bytes is too small for the guest memory of @mt. */
static bool log_too_small(const struct mem_table *mt, uint64_t bytes)
{
	uint64_t need = mem_log_bytes(mt);

	if (bytes >= need)
		return false;
	log_msg("the dirty log holds %llu bytes; guest memory up to 0x%llx needs %llu",
		(unsigned long long)bytes,
		(unsigned long long)(need * 8 * 4096),
		(unsigned long long)need);
	return true;
}

/*
 * The memory table changed under stopped rings: set every ring up again
 * at its addresses in the new mappings; a ring no longer inside guest
 * memory waits for SET_VRING_ADDR.
 */
static void move_rings(struct session *s)
{
	unsigned int i;

	for (i = 0; i < nqueues(s); i++) {
		struct vu_ring *vr = &s->vr[i];
		void *d, *a, *u;

		if (!vr->addr_set)
			continue;
		if (!ring_to_host(&s->mem, &vr->qaddr, vr->num, &d, &a, &u)) {
			log_msg("ring %u is outside the new memory table", i);
			vr->addr_set = false;
			continue;
		}
		if (vdev_set_vring_addr(&s->dev, i, d, a, u, vr->qaddr.flags,
					vr->qaddr.log_guest_addr)) {
			log_msg("ring %u: cannot move it to the new memory table", i);
			vr->addr_set = false;
		}
	}
}

static void region_of_msg(const struct vu_mem_region *in,
			  struct mem_region *out)
{
	memset(out, 0, sizeof(*out));
	out->gpa = in->gpa;
	out->size = in->size;
	out->qva = in->uaddr;
	out->mmap_offset = in->mmap_offset;
}

/*
 * CONFIGURE_MEM_SLOTS: one region more (memory hotplug).  Nothing mapped
 * goes away, so the rings go on: the kernel's table is replaced in one
 * ioctl, which vhost swaps under each ring's lock.
 */
static int do_add_mem_reg(struct session *s, struct vu_msg *m)
{
	struct mem_region want, gone;
	int ret;

	if (!(s->protocol_features & (1ULL << VU_PF_CONFIGURE_MEM_SLOTS))) {
		log_msg("%s: CONFIGURE_MEM_SLOTS was not negotiated",
			req_name(m->hdr.request));
		return -EINVAL;
	}
	if (!size_is(m, sizeof(m->p.one), 1))
		return VU_FATAL;
	if (s->mem.nregions >= s->max_regions) {
		log_msg("ADD_MEM_REG: the table holds %u regions, the most the kernel takes",
			s->mem.nregions);
		return -ENOSPC;
	}
	region_of_msg(&m->p.one.r, &want);
	ret = mem_add(&s->mem, &want, m->fds[0]);
	if (ret)
		return ret == -EINVAL ? VU_FATAL : ret;
	if (s->log && log_too_small(&s->mem, s->log_size))
		ret = -EINVAL;
	if (!ret)
		ret = vdev_set_mem_table(&s->dev, &s->mem);
	if (ret) {
		/* The kernel still has the table without it. */
		if (!mem_take(&s->mem, &want, &gone))
			mem_region_unmap(&gone);
		return ret;
	}
	log_dbg("memory table: region added, %u region(s)", s->mem.nregions);
	return update_running(s);
}

/*
 * CONFIGURE_MEM_SLOTS: one region less (unplug).  Requests in flight may
 * hold addresses in it: the rings stop and drain first.
 */
static int do_rem_mem_reg(struct session *s, struct vu_msg *m)
{
	struct mem_region which, gone;
	int ret;

	if (!(s->protocol_features & (1ULL << VU_PF_CONFIGURE_MEM_SLOTS))) {
		log_msg("%s: CONFIGURE_MEM_SLOTS was not negotiated",
			req_name(m->hdr.request));
		return -EINVAL;
	}
	/* No fd, though some front-ends send one; it is not used. */
	if (m->hdr.size != sizeof(m->p.one) || m->nfds > 1) {
		size_is(m, sizeof(m->p.one), 0);
		return VU_FATAL;
	}
	region_of_msg(&m->p.one.r, &which);
	ret = detach(s);
	if (ret)
		return ret;
	if (mem_take(&s->mem, &which, &gone)) {
		log_msg("REM_MEM_REG: no region at gpa 0x%llx size 0x%llx",
			(unsigned long long)which.gpa,
			(unsigned long long)which.size);
		update_running(s);
		return -ENOENT;
	}
	ret = vdev_set_mem_table(&s->dev, &s->mem);
	if (ret) {
		/* Keep it mapped: the kernel may still use it. */
		s->mem.r[s->mem.nregions++] = gone;
		return ret;
	}
	move_rings(s);
	mem_region_unmap(&gone);
	log_dbg("memory table: region removed, %u region(s)", s->mem.nregions);
	return update_running(s);
}

static int do_set_mem_table(struct session *s, struct vu_msg *m)
{
	struct mem_table want, got, old;
	unsigned int i, n;
	int ret;

	if (m->hdr.size < 8) {
		size_is(m, 8, m->nfds);
		return VU_FATAL;
	}
	n = m->p.mem.nregions;
	if (n < 1 || n > MEM_MAX_REGIONS ||
	    !size_is(m, 8 + n * sizeof(struct vu_mem_region), n))
		return VU_FATAL;
	memset(&want, 0, sizeof(want));
	want.nregions = n;
	for (i = 0; i < n; i++) {
		want.r[i].gpa = m->p.mem.r[i].gpa;
		want.r[i].size = m->p.mem.r[i].size;
		want.r[i].qva = m->p.mem.r[i].uaddr;
		want.r[i].mmap_offset = m->p.mem.r[i].mmap_offset;
	}
	ret = mem_map(&got, &want, m->fds);
	if (ret)
		return ret == -EINVAL ? VU_FATAL : ret;
	/* The kernel marks the log for every page it writes: it must fit. */
	if (s->log && log_too_small(&got, s->log_size)) {
		mem_unmap(&got);
		return -EINVAL;
	}

	/*
	 * Requests in flight hold addresses in the old mappings (the status
	 * byte is written at completion): stop and drain the rings before the
	 * old mappings go away; update_running() restarts them.
	 */
	ret = detach(s);
	if (ret) {
		mem_unmap(&got);
		return ret;
	}
	ret = vdev_set_mem_table(&s->dev, &got);
	if (ret) {
		mem_unmap(&got);
		return ret;
	}
	old = s->mem;
	s->mem = got;
	move_rings(s);
	mem_unmap(&old);
	log_dbg("memory table: %u region(s)", n);
	return update_running(s);
}

static int do_vring_num(struct session *s, struct vu_msg *m)
{
	struct vu_ring *vr;
	unsigned int num;
	int ret;

	if (!size_is(m, sizeof(m->p.state), 0))
		return VU_FATAL;
	vr = ring_of(s, m, m->p.state.index);
	if (!vr)
		return VU_FATAL;
	num = m->p.state.num;
	if (!num || num > 32768 || (num & (num - 1))) {
		log_msg("SET_VRING_NUM %u: bad ring size %u",
			m->p.state.index, num);
		return -EINVAL;
	}
	ret = detach(s);
	if (ret)
		return ret;
	ret = vdev_set_vring_num(&s->dev, m->p.state.index, num);
	if (!ret && s->br->opts->poll_us >= 0)
		ret = vdev_set_vring_busyloop(&s->dev, m->p.state.index,
					      s->br->opts->poll_us);
	if (ret)
		return ret;
	/* The addresses were checked for the old size: they must come again. */
	if (vr->addr_set && num != vr->num) {
		log_msg("ring %u resized %u -> %u: waiting for SET_VRING_ADDR",
			m->p.state.index, vr->num, num);
		vr->addr_set = false;
	}
	vr->num = num;
	vr->num_set = true;
	vr->stopped = false;
	return 0;
}

static int do_vring_base(struct session *s, struct vu_msg *m)
{
	struct vu_ring *vr;
	int ret;

	if (!size_is(m, sizeof(m->p.state), 0))
		return VU_FATAL;
	vr = ring_of(s, m, m->p.state.index);
	if (!vr)
		return VU_FATAL;
	ret = detach(s);
	if (!ret)
		ret = vdev_set_vring_base(&s->dev, m->p.state.index,
					  m->p.state.num);
	vr->stopped = false;
	return ret;
}

static int do_vring_addr(struct session *s, struct vu_msg *m)
{
	struct vhost_vring_addr *qa = &m->p.addr;
	struct vu_ring *vr;
	void *d, *a, *u;
	int ret;

	if (!size_is(m, sizeof(*qa), 0))
		return VU_FATAL;
	vr = ring_of(s, m, qa->index);
	if (!vr)
		return VU_FATAL;
	if (qa->flags & ~(1u << VHOST_VRING_F_LOG)) {
		log_msg("malformed SET_VRING_ADDR %u: flags 0x%x",
			qa->index, qa->flags);
		return VU_FATAL;
	}
	if (!vr->num_set) {
		log_msg("SET_VRING_ADDR %u before SET_VRING_NUM", qa->index);
		return -EINVAL;
	}
	if (!ring_to_host(&s->mem, qa, vr->num, &d, &a, &u)) {
		log_msg("malformed SET_VRING_ADDR %u: ring outside guest memory (desc 0x%llx avail 0x%llx used 0x%llx)",
			qa->index, (unsigned long long)qa->desc_user_addr,
			(unsigned long long)qa->avail_user_addr,
			(unsigned long long)qa->used_user_addr);
		return VU_FATAL;
	}
	ret = detach(s);
	if (!ret)
		ret = vdev_set_vring_addr(&s->dev, qa->index, d, a, u,
					  qa->flags, qa->log_guest_addr);
	if (ret)
		return ret;
	vr->qaddr = *qa;
	vr->addr_set = true;
	return update_running(s);
}

static int do_vring_fd(struct session *s, struct vu_msg *m)
{
	uint32_t req = m->hdr.request;
	unsigned long ioc;
	struct vu_ring *vr;
	unsigned int idx;
	bool nofd;
	int fd, ret;

	if (m->hdr.size != 8) {
		size_is(m, 8, m->nfds);
		return VU_FATAL;
	}
	nofd = m->p.u64 & VU_VRING_NOFD;
	if ((m->p.u64 & ~(uint64_t)(VU_VRING_IDX_MASK | VU_VRING_NOFD)) ||
	    !size_is(m, 8, nofd ? 0 : 1))
		return VU_FATAL;
	idx = m->p.u64 & VU_VRING_IDX_MASK;
	vr = ring_of(s, m, idx);
	if (!vr)
		return VU_FATAL;
	fd = nofd ? VHOST_FILE_UNBIND : m->fds[0];
	ioc = req == VU_SET_VRING_KICK ? VHOST_SET_VRING_KICK :
	      req == VU_SET_VRING_CALL ? VHOST_SET_VRING_CALL :
	      VHOST_SET_VRING_ERR;
	/* The kernel takes its own reference; we never touch the fd again. */
	ret = vdev_set_vring_fd(&s->dev, ioc, idx, fd);
	if (ret)
		return ret;
	if (req != VU_SET_VRING_KICK)
		return 0;
	if (nofd)
		log_msg("ring %u: polling mode (no kick fd) is not supported",
			idx);
	vr->kick_set = !nofd;
	vr->stopped = false;
	/* Without protocol features a ring is enabled by its kick fd. */
	if (!(s->features & (1ULL << VU_F_PROTOCOL_FEATURES)))
		vr->enabled = !nofd;
	return update_running(s);
}

/*
 * Live migration: QEMU's dirty log (LOG_SHMFD), a bitmap of guest-physical
 * 4 KiB pages in the fd sent along.  vhost_blk marks it itself, so it is
 * mapped here and handed to the kernel; the previous log is unmapped once
 * the kernel uses the new one.  QEMU waits for a reply of this type.
 */
static int do_set_log_base(struct session *s, struct vu_msg *m)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t size, off, skip, status = 0;
	void *p;
	int ret;

	if (!(s->protocol_features & (1ULL << VU_PF_LOG_SHMFD))) {
		/* No fd: a log in QEMU's memory the kernel cannot reach. */
		log_msg("SET_LOG_BASE without LOG_SHMFD: the log would not be shared");
		return VU_FATAL;
	}
	if (!size_is(m, sizeof(m->p.log), 1))
		return VU_FATAL;
	size = m->p.log.size;
	off = m->p.log.offset;
	if (!size || size > VU_LOG_MAX || off > VU_LOG_MAX) {
		log_msg("malformed SET_LOG_BASE: %llu bytes at offset %llu",
			(unsigned long long)size, (unsigned long long)off);
		return VU_FATAL;
	}
	/*
	 * The kernel writes dirty bits up to the log's end for the highest
	 * guest page, bounded by nothing but what is mapped here: the log
	 * must be memory that holds all of it.
	 */
	if (!fd_is_memory("SET_LOG_BASE", m->fds[0], off + size) ||
	    log_too_small(&s->mem, size)) {
		ret = -EINVAL;
		goto reply;
	}
	skip = off % pg;
	p = mmap(NULL, size + skip, PROT_READ | PROT_WRITE, MAP_SHARED,
		 m->fds[0], off - skip);
	if (p == MAP_FAILED) {
		ret = -errno;
		log_msg("SET_LOG_BASE: mapping %llu bytes: %s",
			(unsigned long long)size, strerror(errno));
	} else {
		ret = vdev_set_log_base(&s->dev, (char *)p + skip);
		if (ret) {
			munmap(p, size + skip);
		} else {
			if (s->log)
				munmap(s->log, s->log_len);
			s->log = p;
			s->log_len = size + skip;
			s->log_size = size;
			log_dbg("dirty log: %llu bytes",
				(unsigned long long)size);
		}
	}
reply:
	if (ret)
		status = 1;
	if (vu_send(s, VU_SET_LOG_BASE, &status, sizeof(status)))
		return VU_FATAL;
	return ret;
}

/* The log's eventfd: the kernel signals it after marking the log. */
static int do_set_log_fd(struct session *s, struct vu_msg *m)
{
	/* No payload (some front-ends send a zero u64), one fd. */
	if ((m->hdr.size != 0 && m->hdr.size != 8) || m->nfds != 1) {
		size_is(m, 0, 1);
		return VU_FATAL;
	}
	return vdev_set_log_fd(&s->dev, m->fds[0]);
}

static int do_get_vring_base(struct session *s, struct vu_msg *m)
{
	struct vu_ring *vr;
	struct vhost_vring_state st;
	unsigned int base = 0;

	if (!size_is(m, sizeof(m->p.state), 0))
		return VU_FATAL;
	vr = ring_of(s, m, m->p.state.index);
	if (!vr)
		return VU_FATAL;
	/* Stop: detaching drains every request in flight on all rings. */
	vr->stopped = true;
	vr->enabled = false;
	/*
	 * A base is only true once every request fetched has completed: one
	 * given while requests may still complete would let a migration or a
	 * reconnect resume behind them.  No stop, no answer.
	 */
	if (detach(s)) {
		log_msg("GET_VRING_BASE %u: the device did not stop; ending the session without a base",
			m->p.state.index);
		return VU_FATAL;
	}
	/* A base we cannot read is not answered with a made-up one. */
	if (vdev_get_vring_base(&s->dev, m->p.state.index, &base)) {
		log_msg("GET_VRING_BASE %u: the kernel did not report the ring state; ending the session",
			m->p.state.index);
		return VU_FATAL;
	}
	st.index = m->p.state.index;
	st.num = base;
	log_dbg("ring %u stopped at %u", st.index, base);
	return vu_send(s, VU_GET_VRING_BASE, &st, sizeof(st)) ?
	       VU_FATAL : 0;
}

static int do_vring_enable(struct session *s, struct vu_msg *m)
{
	struct vu_ring *vr;

	if (!size_is(m, sizeof(m->p.state), 0))
		return VU_FATAL;
	vr = ring_of(s, m, m->p.state.index);
	if (!vr)
		return VU_FATAL;
	if (m->p.state.num > 1) {
		log_msg("SET_VRING_ENABLE %u: bad value %u", m->p.state.index,
			m->p.state.num);
		return -EINVAL;
	}
	vr->enabled = m->p.state.num;
	return update_running(s);
}

/*
 * GET_CONFIG and SET_CONFIG: a header (offset, size, flags) and size bytes,
 * no fd; the flags say who writes (the front-end, or a migration's
 * restore), nothing else.
 */
static bool config_msg_ok(const struct vu_msg *m)
{
	const struct vu_config *c = &m->p.cfg;

	if (m->hdr.size < VU_CONFIG_HDR || m->nfds ||
	    c->size > VU_CONFIG_SPACE ||
	    m->hdr.size != VU_CONFIG_HDR + c->size) {
		size_is(m, VU_CONFIG_HDR + (m->hdr.size >= VU_CONFIG_HDR ?
					    c->size : 0), 0);
		return false;
	}
	if (c->flags & ~VU_CONFIG_F_MIGRATION) {
		log_msg("malformed %s: flags 0x%x", req_name(m->hdr.request),
			c->flags);
		return false;
	}
	return true;
}

static int do_get_config(struct session *s, struct vu_msg *m)
{
	struct vu_config *c = &m->p.cfg;
	uint32_t off;

	if (!config_msg_ok(m))
		return VU_FATAL;
	/*
	 * cloud-hypervisor before January 2026 asked for the config at its
	 * offset in the virtio-pci BAR (0x100); the device's config space is
	 * the same bytes.
	 */
	off = c->offset;
	if (off >= VU_CONFIG_PCI_OFFSET)
		off -= VU_CONFIG_PCI_OFFSET;
	if (off > VU_CONFIG_SPACE || c->size > VU_CONFIG_SPACE - off) {
		log_msg("GET_CONFIG offset %u size %u: out of range",
			c->offset, c->size);
		return vu_send(s, VU_GET_CONFIG, NULL, 0) ? VU_FATAL : 0;
	}
	s->config[offsetof(struct virtio_blk_config, wce)] = effective_wce(s);
	memcpy(c->region, s->config + off, c->size);
	if (off < sizeof(uint64_t) && c->size)
		s->config_news = false;
	return vu_send(s, VU_GET_CONFIG, c, m->hdr.size) ? VU_FATAL : 0;
}

static int do_set_config(struct session *s, struct vu_msg *m)
{
	const size_t wce_off = offsetof(struct virtio_blk_config, wce);
	struct vu_config *c = &m->p.cfg;
	bool was_attached = s->attached;
	int ret = 0;

	if (!config_msg_ok(m))
		return VU_FATAL;
	if (c->offset != wce_off || c->size != 1 || c->region[0] > 1) {
		log_msg("SET_CONFIG offset %u size %u: only the wce byte is writable",
			c->offset, c->size);
		return -EPERM;
	}
	if (c->region[0] && !flush_negotiated(s)) {
		log_msg("SET_CONFIG wce=1: refused, VIRTIO_BLK_F_FLUSH is not negotiated");
		return -EINVAL;
	}
	if ((bool)c->region[0] == s->wce)
		return 0;
	/* Switch the backend fd under stopped rings. */
	if (s->attached)
		ret = detach(s);
	if (ret)
		return ret;
	s->wce = c->region[0];
	log_msg("write cache %s", s->wce ? "on (write-back)" :
		"off (write-through, O_DSYNC)");
	if (was_attached) {
		int r2 = update_running(s);

		if (!ret)
			ret = r2;
	}
	return ret;
}

/* The front-end's end of the back-end channel (SET_BACKEND_REQ_FD). */
static int do_set_backend_req_fd(struct session *s, struct vu_msg *m)
{
	if (!size_is(m, 0, 1))
		return VU_FATAL;
	if (!(s->protocol_features & (1ULL << VU_PF_BACKEND_REQ))) {
		log_msg("SET_BACKEND_REQ_FD: BACKEND_REQ was not negotiated");
		return -EINVAL;
	}
	if (s->backend_req_fd >= 0)
		close(s->backend_req_fd);
	/* Taken from the message: close_fds() must not close it. */
	s->backend_req_fd = m->fds[0];
	m->nfds = 0;
	return 0;
}

/*
 * Tell the front-end that the config changed.  Fire and forget: it answers
 * by sending GET_CONFIG on the main channel, which this session serves
 * right after, so waiting here for a reply would deadlock both.
 */
static void notify_config_change(struct session *s)
{
	struct vu_hdr h = {
		.request = VU_BACKEND_CONFIG_CHANGE_MSG,
		.flags = VU_VERSION,
		.size = 0,
	};
	ssize_t n;

	if (s->backend_req_fd < 0 ||
	    !(s->protocol_features & (1ULL << VU_PF_CONFIG))) {
		log_msg("resize: no back-end channel (BACKEND_REQ and CONFIG), the front-end was not told");
		return;
	}
	do {
		n = send(s->backend_req_fd, &h, sizeof(h),
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(h))
		log_msg("resize: CONFIG_CHANGE_MSG: %s",
			n < 0 ? strerror(errno) : "short write");
}

/*
 * SIGHUP: the backend may have grown or shrunk.  The device checks
 * requests against the new capacity first (in the kernel it drains what
 * is in flight meanwhile), then the config the front-end reads says so,
 * then the front-end is told.  A request past the end fails at every
 * step: the guest only sends past the old end once it knows the new one.
 */
static int session_resize(struct session *s)
{
	struct backend *be = &s->br->be;
	uint64_t old, sectors;
	int ret = 0;

	old = config_capacity(s);
	if (backend_refresh_size(be))
		return -EIO;
	sectors = be->size / 512;
	if (sectors == old) {
		log_msg("resize: backend %s unchanged, %llu sectors", be->path,
			(unsigned long long)sectors);
		return 0;
	}
	/* Not attached: the next attach reads the size as it is then. */
	if (s->attached || s->dev.no_kernel)
		ret = vdev_set_capacity(&s->dev, sectors);
	if (ret) {
		log_msg("resize: backend %s: %llu -> %llu sectors refused by the device",
			be->path, (unsigned long long)old,
			(unsigned long long)sectors);
		return ret;
	}
	set_config_capacity(s, sectors);
	log_msg("resize: backend %s: %llu -> %llu sectors", be->path,
		(unsigned long long)old, (unsigned long long)sectors);
	notify_config_change(s);
	return 0;
}

static int refuse(struct session *s, struct vu_msg *m)
{
	log_msg("refusing unsupported request %s (%u)",
		req_name(m->hdr.request), m->hdr.request);
	if (has_own_reply(m->hdr.request))
		return vu_send(s, m->hdr.request, NULL, 0) ?
		       VU_FATAL : 0;
	return -ENOTSUP;
}

/*
 * RESET_OWNER, RESET_DEVICE: a fresh device instance; what belongs to the
 * connection (guest memory, the back-end channel) stays.
 */
static int session_reset(struct session *s)
{
	session_close_device(s, true);
	s->status = 0;
	return session_open_device(s) ? VU_FATAL : 0;
}

static int dispatch(struct session *s, struct vu_msg *m)
{
	uint32_t req = m->hdr.request;

	switch (req) {
	case VU_GET_FEATURES:
		if (!no_payload(m))
			return VU_FATAL;
		return reply_u64(s, req, offered_features(s));
	case VU_SET_FEATURES:
		return do_set_features(s, m);
	case VU_GET_PROTOCOL_FEATURES:
		if (!no_payload(m))
			return VU_FATAL;
		return reply_u64(s, req, VU_PROTOCOL_FEATURES);
	case VU_SET_PROTOCOL_FEATURES:
		if (!size_is(m, 8, 0))
			return VU_FATAL;
		if (m->p.u64 & ~VU_PROTOCOL_FEATURES) {
			log_msg("SET_PROTOCOL_FEATURES 0x%llx: not offered",
				(unsigned long long)m->p.u64);
			return -EINVAL;
		}
		s->protocol_features = m->p.u64;
		return 0;
	case VU_SET_OWNER:
		if (!size_is(m, 0, 0))
			return VU_FATAL;
		if (!s->owner) {
			s->owner = true;
			return 0;
		}
		log_msg("SET_OWNER: already owned");
		return -EBUSY;
	case VU_RESET_OWNER:
		if (!size_is(m, 0, 0))
			return VU_FATAL;
		/* Back to a fresh device, as after connect. */
		s->owner = false;
		return session_reset(s);
	case VU_RESET_DEVICE:
		if (!no_payload(m))
			return VU_FATAL;
		if (!(s->protocol_features & (1ULL << VU_PF_RESET_DEVICE)))
			return refuse(s, m);
		/* As RESET_OWNER, but the front-end stays the owner. */
		return session_reset(s);
	case VU_SET_STATUS:
		if (!size_is(m, 8, 0))
			return VU_FATAL;
		if (!(s->protocol_features & (1ULL << VU_PF_STATUS)))
			return refuse(s, m);
		if (m->p.u64 > 0xff) {
			log_msg("SET_STATUS 0x%llx: not a status byte",
				(unsigned long long)m->p.u64);
			return -EINVAL;
		}
		/*
		 * Kept for GET_STATUS.  The rings' state follows the ring
		 * messages, which QEMU sends around every change of status.
		 */
		s->status = m->p.u64;
		return 0;
	case VU_GET_STATUS:
		if (!no_payload(m))
			return VU_FATAL;
		if (!(s->protocol_features & (1ULL << VU_PF_STATUS)))
			return refuse(s, m);
		return reply_u64(s, req, s->status);
	case VU_GET_QUEUE_NUM:
		if (!no_payload(m))
			return VU_FATAL;
		return reply_u64(s, req, nqueues(s));
	case VU_SET_MEM_TABLE:
		return do_set_mem_table(s, m);
	case VU_GET_MAX_MEM_SLOTS:
		if (!no_payload(m))
			return VU_FATAL;
		return reply_u64(s, req, s->max_regions);
	case VU_ADD_MEM_REG:
		return do_add_mem_reg(s, m);
	case VU_REM_MEM_REG:
		return do_rem_mem_reg(s, m);
	case VU_SET_LOG_BASE:
		return do_set_log_base(s, m);
	case VU_SET_LOG_FD:
		return do_set_log_fd(s, m);
	case VU_SET_VRING_NUM:
		return do_vring_num(s, m);
	case VU_SET_VRING_BASE:
		return do_vring_base(s, m);
	case VU_SET_VRING_ADDR:
		return do_vring_addr(s, m);
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		return do_vring_fd(s, m);
	case VU_GET_VRING_BASE:
		return do_get_vring_base(s, m);
	case VU_SET_VRING_ENABLE:
		return do_vring_enable(s, m);
	case VU_GET_CONFIG:
		return do_get_config(s, m);
	case VU_SET_CONFIG:
		return do_set_config(s, m);
	case VU_SET_BACKEND_REQ_FD:
		return do_set_backend_req_fd(s, m);
	default:
		if (req < VU_REQ_MAX && req_names[req])
			return refuse(s, m);
		log_msg("malformed message: unknown request %u", req);
		return VU_FATAL;
	}
}

int vu_serve(struct bridge *br, int sock)
{
	struct session *s;
	struct vu_msg *m;
	long long idle_deadline;
	int ret = 0;

	s = calloc(1, sizeof(*s));
	m = calloc(1, sizeof(*m));
	if (!s || !m) {
		free(s);
		free(m);
		return -1;
	}
	s->br = br;
	s->sock = sock;
	s->backend_req_fd = -1;
	if (session_open_device(s)) {
		free(s);
		free(m);
		return -1;
	}

	/* A front-end speaks first, at once: a silent client is dropped. */
	idle_deadline = bridge_now_ms() + timeout_ms(s);
	while (!bridge_stopping()) {
		int r = vu_recv(s, m, idle_deadline);

		if (r == 2) {
			if (bridge_take_resize())
				session_resize(s);
			continue;
		}
		if (r <= 0) {
			ret = r;
			break;
		}
		idle_deadline = -1;
		log_dbg("<- %s (%u) flags 0x%x size %u fds %u",
			req_name(m->hdr.request), m->hdr.request,
			m->hdr.flags, m->hdr.size, m->nfds);
		r = dispatch(s, m);
		close_fds(m);
		if (r == VU_FATAL) {
			log_msg("ending session after %s",
				req_name(m->hdr.request));
			ret = -1;
			break;
		}
		if (r)
			log_msg("%s failed: %s", req_name(m->hdr.request),
				strerror(-r));
		if ((m->hdr.flags & VU_FLAG_NEED_REPLY) &&
		    !has_own_reply(m->hdr.request) &&
		    reply_u64(s, m->hdr.request, r ? 1 : 0)) {
			ret = -1;
			break;
		}
	}

	session_close_device(s, false);
	free(s);
	free(m);
	return ret;
}
