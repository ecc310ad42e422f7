/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * /dev/vhost-blk: in-kernel virtio-blk device on the vhost core.
 * The generic VHOST_* ioctls of <linux/vhost.h> apply; these are the device's own.
 *
 * One open file is one virtio-blk device with up to VHOST_BLK_MAX_QUEUES
 * virtqueues (vring indexes 0 .. VHOST_BLK_MAX_QUEUES - 1).  Typical use:
 *
 *	fd = open("/dev/vhost-blk", O_RDWR);
 *	ioctl(fd, VHOST_SET_OWNER);
 *	ioctl(fd, VHOST_BLK_SET_BACKEND, &backend);	   (any time after owner)
 *	ioctl(fd, VHOST_BLK_GET_CONFIG, &config);	   (what the guest sees)
 *	ioctl(fd, VHOST_BLK_SET_CAPACITY, &sectors);	   (backend resized)
 *	ioctl(fd, VHOST_GET_FEATURES, &features);
 *	ioctl(fd, VHOST_SET_FEATURES, &acked);
 *	ioctl(fd, VHOST_SET_MEM_TABLE, mem);
 *	per queue: VHOST_SET_VRING_NUM/BASE/ADDR/CALL/KICK
 *	(6.5+: VHOST_NEW_WORKER + VHOST_ATTACH_VRING_WORKER to spread queues)
 *	...
 *	backend.fd = -1; ioctl(fd, VHOST_BLK_SET_BACKEND, &backend);   (drain)
 *	ioctl(fd, VHOST_GET_VRING_BASE, &state);
 *	ioctl(fd, VHOST_RESET_OWNER);	   (optional: drain, forget everything)
 *
 * Requests are processed on a queue once a backend is attached and the
 * queue's kick eventfd is set; requests already in the ring are picked up
 * when the backend is attached.
 *
 * Extensibility: every argument struct starts with a __u32 size field that
 * userspace sets to sizeof() of the struct as it knows it.  The kernel
 * matches these ioctls by type and number only (not by the size encoded in
 * the command), accepts a smaller (older) struct and treats missing fields
 * as zero, and accepts a larger (newer) one, up to the page size, only if
 * the bytes it does not know are zero (the copy_struct_from_user()
 * convention).  Reserved fields must be zero.
 *
 * Work done for the guest runs on the owner's vhost workers, with the
 * owner's credentials and in its cgroups.  Without VIRTIO_BLK_F_FLUSH
 * negotiated, every write is on stable storage when it completes.
 */
#ifndef _UAPI_LINUX_VHOST_BLK_H
#define _UAPI_LINUX_VHOST_BLK_H

#include <linux/types.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

/* Maximum number of virtqueues (= request queues) of one device. */
#define VHOST_BLK_MAX_QUEUES	16

/* Length of the GET_ID (serial) string, as in VIRTIO_BLK_ID_BYTES. */
#define VHOST_BLK_SERIAL_LEN	20

/*
 * Virtio features the device offers (VHOST_GET_FEATURES).  VIRTIO_BLK_F_RO
 * is added when the attached backend is read-only.  FLUSH is an fdatasync of
 * the backend; a driver that does not ack VIRTIO_BLK_F_FLUSH gets
 * write-through semantics.  VHOST_SET_FEATURES
 * accepts any subset (EOPNOTSUPP for other bits); drivers are expected to
 * ack VIRTIO_F_VERSION_1 (virtio 1.0 little-endian layout).
 *
 * VHOST_F_LOG_ALL (live migration): with it acked, every page of guest
 * memory a request writes (read data, status byte) is marked in the dirty
 * log of VHOST_SET_LOG_BASE once written, before the request's used entry;
 * the used ring is logged as the vhost core does (VHOST_VRING_F_LOG).  Set
 * the log first (EFAULT when the vhost core finds it unusable for the memory
 * table).  Switching logging on or off
 * drains the queues first, so when VHOST_SET_FEATURES returns no request
 * fetched under the other setting is still in flight.
 */
#define VHOST_BLK_FEATURES					\
	((1ULL << VIRTIO_BLK_F_SIZE_MAX) |			\
	 (1ULL << VIRTIO_BLK_F_SEG_MAX) |			\
	 (1ULL << VIRTIO_BLK_F_BLK_SIZE) |			\
	 (1ULL << VIRTIO_BLK_F_FLUSH) |				\
	 (1ULL << VIRTIO_BLK_F_MQ) |				\
	 (1ULL << VIRTIO_BLK_F_DISCARD) |			\
	 (1ULL << VIRTIO_BLK_F_WRITE_ZEROES) |			\
	 (1ULL << VIRTIO_RING_F_INDIRECT_DESC) |		\
	 (1ULL << VIRTIO_RING_F_EVENT_IDX) |			\
	 (1ULL << VIRTIO_F_VERSION_1) |				\
	 (1ULL << VHOST_F_LOG_ALL))

/* Largest vhost_blk_backend.blk_size. */
#define VHOST_BLK_MAX_BLK_SIZE	4096

/* vhost_blk_backend.flags */
/* Present the device read-only (also implied when fd is not writable). */
#define VHOST_BLK_BACKEND_F_RO		(1U << 0)
#define VHOST_BLK_BACKEND_F_ALL		VHOST_BLK_BACKEND_F_RO

/*
 * VHOST_BLK_SET_BACKEND argument: attach a backend to the device, replace
 * the current one, or (fd == -1) stop and drain.
 *
 * Attaching or detaching first stops request processing on all queues and
 * waits until every request in flight on the old backend has completed and
 * been returned to the used ring; on return the kernel holds no reference
 * to the old backend file and GET_VRING_BASE gives a consistent index.
 */
struct vhost_blk_backend {
	/* sizeof(struct vhost_blk_backend) as known by the caller. */
	__u32 size;
	/*
	 * Backend: an fd open on a regular file or a block device, or -1 to
	 * detach; not O_APPEND.  An fd opened with O_DIRECT gets direct async I/O
	 * (IOCB_DIRECT); otherwise I/O goes through the page cache.  The
	 * capacity is the file/device size rounded down to 512 bytes; an fd
	 * not open for writing makes the device read-only.  The kernel takes
	 * its own reference: the caller may close fd afterwards.
	 */
	__s32 fd;
	/* VHOST_BLK_BACKEND_F_*; unknown bits are refused (EINVAL). */
	__u32 flags;
	/*
	 * Number of request queues presented in config.num_queues
	 * (1 .. VHOST_BLK_MAX_QUEUES); 0 means 1.  The device services every
	 * vring that is set up, whatever this says.
	 */
	__u16 num_queues;
	/* Must be 0. */
	__u16 reserved0;
	/*
	 * Logical block size presented in config.blk_size (power of two,
	 * 512 .. VHOST_BLK_MAX_BLK_SIZE); 0: the block device's logical block
	 * size, or 512 for a regular file.
	 */
	__u32 blk_size;
	/* Must be 0. */
	__u32 reserved1;
	/*
	 * GET_ID string: up to 20 bytes, padded with NULs, not necessarily
	 * NUL terminated.  All zero: an empty serial.
	 */
	__u8 serial[VHOST_BLK_SERIAL_LEN];
	/* Must be 0. */
	__u8 reserved2[28];
};

/* vhost_blk_config.flags (output) */
/* A backend is attached. */
#define VHOST_BLK_CONFIG_F_BACKEND	(1U << 0)
/* The device is read-only (VIRTIO_BLK_F_RO is offered). */
#define VHOST_BLK_CONFIG_F_RO		(1U << 1)
/* The backend fd is O_DIRECT: requests use direct async I/O. */
#define VHOST_BLK_CONFIG_F_DIRECT	(1U << 2)
/* The backend is a block device (else a regular file). */
#define VHOST_BLK_CONFIG_F_BDEV		(1U << 3)

/* Size of the config space area of struct vhost_blk_config. */
#define VHOST_BLK_CONFIG_SPACE		128

/*
 * VHOST_BLK_GET_CONFIG argument: the virtio_blk_config the device presents
 * to the guest.  Valid without a backend (capacity 0, flags 0).
 */
struct vhost_blk_config {
	/* In: sizeof(struct vhost_blk_config) as known by the caller. */
	__u32 size;
	/* Out: VHOST_BLK_CONFIG_F_*. */
	__u32 flags;
	/* Out: the features the device offers (as VHOST_GET_FEATURES). */
	__u64 features;
	/*
	 * Out: number of valid bytes in config space (a prefix of
	 * struct virtio_blk_config; fields after it are zero).
	 */
	__u32 config_len;
	/* Out: 0. */
	__u32 reserved;
	/*
	 * Out: the config space, little endian as a VIRTIO_F_VERSION_1 guest
	 * reads it: capacity (512-byte sectors), size_max, seg_max, blk_size,
	 * num_queues, max_discard_sectors, max_discard_seg,
	 * discard_sector_alignment, max_write_zeroes_sectors,
	 * max_write_zeroes_seg, write_zeroes_may_unmap.  The geometry and
	 * topology fields are 0 (their features are not offered).
	 * The raw array fixes the struct size independently of the
	 * virtio_blk_config of the installed headers.
	 */
	union {
		struct virtio_blk_config blk;
		__u8 raw[VHOST_BLK_CONFIG_SPACE];
	};
};

/*
 * Attach/replace (fd >= 0) or detach and drain (fd == -1) the backend.
 * Errors: EPERM not the owner (checked first), EBADF bad fd, EINVAL bad
 * field/flags or unsupported file (neither regular file nor block device,
 * not readable, or O_APPEND), EOPNOTSUPP a zoned block device, E2BIG size
 * above the page size or unknown non-zero trailing bytes of a larger struct.
 */
#define VHOST_BLK_SET_BACKEND	_IOW(VHOST_VIRTIO, 0x90, struct vhost_blk_backend)
/*
 * Read the config the device presents; any holder of the fd may.  Errors:
 * EFAULT, EINVAL size below 8 (size and flags).
 */
#define VHOST_BLK_GET_CONFIG	_IOWR(VHOST_VIRTIO, 0x91, struct vhost_blk_config)
/*
 * Batching, for every queue of the device: the longest (microseconds, at
 * most VHOST_BLK_BATCH_DELAY_MAX) a queue the guest keeps busy waits, with
 * the guest's notifications off, for the guest's next burst of requests to
 * end before it fetches them, unless the guest sends them slower than that
 * (then twice its own time for the burst, VHOST_BLK_BATCH_DELAY_MAX at
 * most); 0 answers every notification at once.  A new device takes the
 * module parameter batch_delay_us.  Errors: EPERM not the owner, EFAULT,
 * EINVAL above the maximum.
 */
#define VHOST_BLK_BATCH_DELAY_MAX	10000
#define VHOST_BLK_SET_BATCH_DELAY	_IOW(VHOST_VIRTIO, 0x92, __u32)
/*
 * Busy polling is the vhost core's VHOST_SET_VRING_BUSYLOOP_TIMEOUT, per
 * queue (microseconds, 0 off): a queue whose ring ran empty spins on it
 * for up to that long since it last found a request before it turns the
 * guest's notifications back on.  The device uses at most
 * VHOST_BLK_BUSYLOOP_MAX_US of a larger value.  A new device (and one
 * reset with VHOST_RESET_OWNER) takes the module parameter poll_us.
 */
#define VHOST_BLK_BUSYLOOP_MAX_US	10000
/*
 * Online resize: the capacity (512-byte sectors) the device presents and
 * checks requests against, after the backend file or device has grown or
 * shrunk.  0 takes the backend's size now (rounded down to 512 bytes).
 * Request processing stops, every request in flight completes and is
 * returned to the used ring, the new capacity takes effect and the queues
 * resume: a request is checked against either the old capacity or the new
 * one, never a mix, and none beyond the new one is in flight on return.
 * Telling the guest is the caller's job (a config change interrupt; the
 * VMM owns the config space).  Errors: EPERM not the owner, EFAULT, ENXIO
 * no backend attached, EINVAL above the backend's size now.
 */
#define VHOST_BLK_SET_CAPACITY		_IOW(VHOST_VIRTIO, 0x93, __u64)
/*
 * Interrupt moderation, for every queue of the device: the longest
 * (microseconds, at most VHOST_BLK_IRQ_DELAY_MAX) a queue may hold the
 * guest's interrupt for completed requests while more of its requests are
 * still in flight than completed since the guest's last interrupt; the
 * interrupt is sent at once when that is no longer so.  0 sends it after
 * every run of completions.  A new device takes the module parameter
 * irq_delay_us.  Errors: EPERM not the owner, EFAULT, EINVAL above the
 * maximum.
 */
#define VHOST_BLK_IRQ_DELAY_MAX		10000
#define VHOST_BLK_SET_IRQ_DELAY		_IOW(VHOST_VIRTIO, 0x94, __u32)

#endif /* _UAPI_LINUX_VHOST_BLK_H */
