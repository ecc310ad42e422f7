/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The vhost core's worker ioctls (Linux 6.5 and later) for programs built
 * against an older <linux/vhost.h>: Debian 12's linux-libc-dev is 6.1's,
 * whatever kernel the machine runs.  Without these the code that asks for a
 * worker per queue would be compiled out, and a 6.12 kernel never asked.
 * With them, one binary gets its workers on a kernel that has the ioctls
 * and ENOTTY on one that does not.  The values are the kernel's ABI.
 */
#ifndef VB_VHOST_WORKERS_H
#define VB_VHOST_WORKERS_H

#include <linux/vhost.h>

#ifndef VHOST_NEW_WORKER
struct vhost_worker_state {
	unsigned int worker_id;
};

struct vhost_vring_worker {
	unsigned int index;
	unsigned int worker_id;
};

#define VHOST_NEW_WORKER		_IOR(VHOST_VIRTIO, 0x8, struct vhost_worker_state)
#define VHOST_FREE_WORKER		_IOW(VHOST_VIRTIO, 0x9, struct vhost_worker_state)
#define VHOST_ATTACH_VRING_WORKER	_IOW(VHOST_VIRTIO, 0x15, struct vhost_vring_worker)
#define VHOST_GET_VRING_WORKER		_IOWR(VHOST_VIRTIO, 0x16, struct vhost_vring_worker)
#endif

#endif
