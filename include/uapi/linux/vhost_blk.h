/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * /dev/vhost-blk: in-kernel virtio-blk device on the vhost core.
 * The generic VHOST_* ioctls of <linux/vhost.h> apply; these are the device's own.
 */
#ifndef _UAPI_LINUX_VHOST_BLK_H
#define _UAPI_LINUX_VHOST_BLK_H

#include <linux/types.h>
#include <linux/vhost.h>

#endif /* _UAPI_LINUX_VHOST_BLK_H */
