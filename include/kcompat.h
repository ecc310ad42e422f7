/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compatibility shims between the supported kernels (6.1 LTS and 6.12 LTS).
 * Every version test of the project lives in this header.
 */
#ifndef _VHOST_BLK_KCOMPAT_H
#define _VHOST_BLK_KCOMPAT_H

#include <linux/version.h>

/* ---- vhost_blk: vhost core shims (owner: vhost_blk) ---- */
#ifdef KCOMPAT_VHOST_BLK
#include <linux/vhost.h>
#include "vhost.h"

/*
 * 6.5 brought per-virtqueue workers together with the multi-worker ioctls,
 * so the uapi VHOST_NEW_WORKER tells the two vhost cores apart.
 */
#ifdef VHOST_NEW_WORKER
/*
 * Queue a work on the worker serving @vq.  Returns false once the worker
 * was killed together with its owner.
 */
static inline bool vhost_blk_vq_work_queue(struct vhost_virtqueue *vq,
					   struct vhost_work *work)
{
	return vhost_vq_work_queue(vq, work);
}

static inline bool vhost_blk_is_worker_ioctl(unsigned int ioctl)
{
	return ioctl == VHOST_NEW_WORKER || ioctl == VHOST_FREE_WORKER ||
	       ioctl == VHOST_ATTACH_VRING_WORKER ||
	       ioctl == VHOST_GET_VRING_WORKER;
}

static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	return vhost_worker_ioctl(dev, ioctl, argp);
}
#else
/* One device-wide kthread, alive until vhost_dev_cleanup(). */
static inline bool vhost_blk_vq_work_queue(struct vhost_virtqueue *vq,
					   struct vhost_work *work)
{
	vhost_work_queue(vq->dev, work);
	return true;
}

static inline bool vhost_blk_is_worker_ioctl(unsigned int ioctl)
{
	return false;
}

static inline long vhost_blk_worker_ioctl(struct vhost_dev *dev,
					  unsigned int ioctl,
					  void __user *argp)
{
	return -ENOIOCTLCMD;
}
#endif
#endif /* KCOMPAT_VHOST_BLK */
/* ---- end vhost_blk ---- */

#endif /* _VHOST_BLK_KCOMPAT_H */
