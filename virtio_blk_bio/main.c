// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_blk_bio: virtio-blk guest driver with a blk-mq request path and a
 * bio (->submit_bio) path, chosen for each device when it is probed by the
 * use_bio parameter as it is then (set at load time, writable at run time).
 *
 * This file: module parameters, probe/remove, virtqueue setup, device
 * configuration (limits, capacity, cache mode) and the sysfs attributes.
 */
#include <linux/hdreg.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/sizes.h>
#include <linux/string.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "vbb.h"

#define VBB_PART_BITS	4
#define VBB_MINORS	(1 << VBB_PART_BITS)

static bool use_bio;
module_param(use_bio, bool, 0644);
MODULE_PARM_DESC(use_bio, "Use the bio path (->submit_bio) instead of blk-mq requests (default N; read when a device is probed)");

static unsigned int num_request_queues;
module_param(num_request_queues, uint, 0444);
MODULE_PARM_DESC(num_request_queues, "Limit the number of request queues (0: one per CPU, at most what the device offers)");

static unsigned int poll_queues;
module_param(poll_queues, uint, 0444);
MODULE_PARM_DESC(poll_queues, "Number of polled queues on the blk-mq path (default 0)");

unsigned int vbb_queue_depth;
module_param_named(queue_depth, vbb_queue_depth, uint, 0444);
MODULE_PARM_DESC(queue_depth, "blk-mq queue depth (0: fill the ring)");

static unsigned int io_timeout = 30;
module_param(io_timeout, uint, 0644);
MODULE_PARM_DESC(io_timeout, "Seconds a request may be held before the driver looks at the device: completes what it returned, fails its I/O if it is gone, notifies it again and waits if it still answers (0: never look; read when a device is probed)");

static bool give_up_on_timeout;
module_param(give_up_on_timeout, bool, 0644);
MODULE_PARM_DESC(give_up_on_timeout, "Fail fast: give a device up, failing all its I/O, once it holds a request for io_timeout seconds, even if it still answers (for md raid1 or multipath legs; default N: wait; acts at once)");

static int vbb_major;
static DEFINE_IDA(vbb_index_ida);
struct workqueue_struct *vbb_wq;

/*
 * The result of a request the device has returned: its status byte alone.
 * The used length is not read, as the stock driver does not: devices
 * report 0, the data alone, or data and status, and all of them work.
 */
blk_status_t vbb_status_to_blk(u8 status)
{
	switch (status) {
	case VIRTIO_BLK_S_OK:
		return BLK_STS_OK;
	case VIRTIO_BLK_S_UNSUPP:
		return BLK_STS_NOTSUPP;
	default:
		return BLK_STS_IOERR;
	}
}

/* The smallest ring of the device's virtqueues. */
unsigned int vbb_ring_size(struct vbb_dev *vb)
{
	unsigned int i, ring = UINT_MAX;

	for (i = 0; i < vb->num_vqs; i++)
		ring = min(ring, virtqueue_get_vring_size(vb->vqs[i].vq));
	return ring;
}

/* Has the device taken every buffer back (nothing in flight on @q)? */
bool vbb_ring_empty(struct vbb_vq *q)
{
	return q->vq->num_free == virtqueue_get_vring_size(q->vq);
}

/* The transport broke the device (surprise removal): nothing completes. */
static bool vbb_vqs_broken(struct vbb_dev *vb)
{
	unsigned int i;

	for (i = 0; i < vb->num_vqs; i++)
		if (virtqueue_is_broken(vb->vqs[i].vq))
			return true;
	return false;
}

/*
 * Give up on the device: a request timed out (the device no longer answers)
 * or the transport broke it. The virtqueues are broken first (nothing more is
 * added, notified or completed), the device is reset unless it is gone
 * (@reset false), so that it no longer reads or writes what it holds; then
 * every request it holds, or that waits for ring space, fails, and so does
 * everything after (vb->killed). Process context.
 */
void vbb_kill(struct vbb_dev *vb, bool reset, const char *why)
{
	struct virtio_device *vdev;
	struct vbb_mq_req *mq_chain = NULL;
	struct vbb_breq *bio_chain = NULL;

	mutex_lock(&vb->vdev_mutex);
	vdev = vb->vdev;
	if (!vdev || !vb->vqs || vb->killed) {
		mutex_unlock(&vb->vdev_mutex);
		return;
	}
	dev_err(&vdev->dev, "[%s] %s: giving the device up, its I/O fails\n",
		vb->disk->disk_name, why);
	WRITE_ONCE(vb->killed, true);
	virtio_break_device(vdev);
	if (reset)
		virtio_reset_device(vdev);
	else
		vb->gone = true;
	if (vb->bio_path)
		bio_chain = vbb_bio_take_all(vb);
	else
		mq_chain = vbb_mq_take_all(vb);
	mutex_unlock(&vb->vdev_mutex);

	/* outside the mutex: completions may submit again (and fail) */
	if (vb->bio_path)
		vbb_bio_fail_all(vb, bio_chain);
	else
		vbb_mq_fail_all(vb, mq_chain);
}

/*
 * A request has been on a ring for io_timeout seconds; the caller has
 * completed what the device returned meanwhile. A device that is gone (the
 * transport broke it, it reads as all ones: no longer on the bus) or stopped
 * (its status asks for a reset, or lost DRIVER_OK) is given up, and so is any
 * device in the give_up_on_timeout mode. A device that is still
 * there may only be slow, or have missed a notification: every ring is
 * notified again and the request waited for. Process context. Returns true
 * if the device was given up (its I/O failed), false to keep waiting.
 */
bool vbb_timed_out(struct vbb_dev *vb)
{
	struct virtio_device *vdev;
	const char *why = NULL;
	bool reset = true;
	unsigned int i;
	u8 status;

	mutex_lock(&vb->vdev_mutex);
	vdev = vb->vdev;
	if (!vdev || !vb->vqs || vb->killed) {
		mutex_unlock(&vb->vdev_mutex);
		return READ_ONCE(vb->killed);
	}
	if (vbb_vqs_broken(vb)) {
		why = "device broken";
		reset = false;
	} else {
		status = vdev->config->get_status(vdev);
		if (status == 0xff) {
			why = "device gone";
			reset = false;
		} else if (status & VIRTIO_CONFIG_S_NEEDS_RESET) {
			why = "device needs reset";
		} else if (!(status & VIRTIO_CONFIG_S_DRIVER_OK)) {
			/* QEMU clears it when bus mastering is turned off */
			why = "device stopped";
		} else if (READ_ONCE(give_up_on_timeout)) {
			why = "request timed out";
		}
	}
	if (!why) {
		for (i = 0; i < vb->num_vqs; i++)
			virtqueue_notify(vb->vqs[i].vq);
		dev_warn_ratelimited(&vdev->dev,
				     "[%s] request held for %lu s: device notified again, waiting\n",
				     vb->disk->disk_name,
				     vb->timeout / HZ);
	}
	mutex_unlock(&vb->vdev_mutex);
	if (!why)
		return false;
	vbb_kill(vb, reset, why);
	return true;
}

/* Notify the device outside the vq lock if virtqueue_kick_prepare said so. */
void vbb_notify_prepared(struct vbb_vq *vq, bool kick)
{
	if (kick)
		virtqueue_notify(vq->vq);
}

bool vbb_cache_writeback(struct virtio_device *vdev)
{
	u8 wce;

	if (virtio_cread_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE,
				 struct virtio_blk_config, wce, &wce))
		return virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH);
	return wce && virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH);
}

/* cache_type can be switched only if a write-back cache can be flushed. */
static bool vbb_cache_switchable(struct virtio_device *vdev)
{
	return virtio_has_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE) &&
	       virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH);
}

/*
 * The virtio spec has a device with CONFIG_WCE but without FLUSH start in
 * write-through mode. One that does not is switched to it: the driver could
 * never flush its cache, and reports the disk write-through anyway.
 */
static void vbb_check_cache_mode(struct virtio_device *vdev)
{
	u8 wce;

	if (virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH) ||
	    virtio_cread_feature(vdev, VIRTIO_BLK_F_CONFIG_WCE,
				 struct virtio_blk_config, wce, &wce) || !wce)
		return;
	dev_warn(&vdev->dev,
		 "write-back cache (wce=%u) without FLUSH: switching it to write through\n",
		 wce);
	virtio_cwrite8(vdev, offsetof(struct virtio_blk_config, wce), 0);
}

/*
 * The bio path completes FUA writes by a flush after the write, so it
 * advertises FUA and gets one write + flush instead of the block layer's
 * write + post-flush sequencing. The blk-mq path leaves FUA to the flush
 * state machine.
 */
unsigned int vbb_disk_features(struct vbb_dev *vb)
{
	unsigned int feat = VBB_FEAT_IO_STAT;

	if (vbb_cache_writeback(vb->vdev)) {
		feat |= VBB_FEAT_WRITE_CACHE;
		if (vb->bio_path)
			feat |= VBB_FEAT_FUA;
	}
	/* REQ_POLLED bios are taken, and looked for by ->poll_bio */
	if (vb->bio_path)
		feat |= VBB_FEAT_NOWAIT | VBB_FEAT_POLL;
	return feat;
}

void vbb_limits_default(struct vbb_dev *vb, struct queue_limits *lim)
{
	memset(lim, 0, sizeof(*lim));
	lim->logical_block_size = SECTOR_SIZE;
}

/*
 * Physical block sizes above this are refused as nonsense (the exponent
 * alone could ask for a 2^255-byte block).
 */
#define VBB_MAX_PHYS_BLOCK_SIZE	SZ_2M

/* TOPOLOGY: physical block size, alignment offset, io_min, io_opt. */
static void vbb_read_topology(struct virtio_device *vdev,
			      struct queue_limits *lim)
{
	u32 lbs = lim->logical_block_size, pbs = lbs, opt_io, v;
	u16 min_io;
	u8 pexp, align;

	if (!virtio_has_feature(vdev, VIRTIO_BLK_F_TOPOLOGY))
		return;
	virtio_cread(vdev, struct virtio_blk_config, physical_block_exp, &pexp);
	virtio_cread(vdev, struct virtio_blk_config, alignment_offset, &align);
	virtio_cread(vdev, struct virtio_blk_config, min_io_size, &min_io);
	virtio_cread(vdev, struct virtio_blk_config, opt_io_size, &opt_io);

	if (pexp) {
		if (pexp < 32 && (u64)lbs << pexp <= VBB_MAX_PHYS_BLOCK_SIZE) {
			pbs = lbs << pexp;
			lim->physical_block_size = pbs;
		} else {
			dev_warn(&vdev->dev,
				 "physical_block_exp %u too large, ignored\n",
				 pexp);
		}
	}
	/* in logical blocks; a misalignment is less than a physical block */
	if (align) {
		v = lbs * align;	/* at most 255 * PAGE_SIZE */
		if (v < pbs)
			lim->alignment_offset = v;
		else
			dev_warn(&vdev->dev,
				 "alignment_offset %u not below the physical block, ignored\n",
				 align);
	}
	if (min_io) {
		if (!check_mul_overflow(lbs, (u32)min_io, &v))
			lim->io_min = v;
		else
			dev_warn(&vdev->dev, "min_io_size %u overflows, ignored\n",
				 min_io);
	}
	if (opt_io) {
		if (!check_mul_overflow(lbs, opt_io, &v))
			lim->io_opt = v;
		else
			dev_warn(&vdev->dev, "opt_io_size %u overflows, ignored\n",
				 opt_io);
	}
}

/*
 * A maximum size in 512-byte sectors for discard or write zeroes: 0 means
 * no limit; rounded down to whole logical blocks. Returns 0 (the operation
 * is not used) for a limit below one logical block.
 */
static u32 vbb_max_sectors(struct virtio_device *vdev, const char *op,
			   u32 v, u32 lbs)
{
	u32 max = v ? v : UINT_MAX;

	max = rounddown(max, lbs >> SECTOR_SHIFT);
	if (!max)
		dev_warn(&vdev->dev,
			 "%s limit of %u sectors is below one logical block: %s disabled\n",
			 op, v, op);
	return max;
}

static void vbb_read_discard(struct vbb_dev *vb, struct queue_limits *lim,
			     u32 seg_max)
{
	struct virtio_device *vdev = vb->vdev;
	u32 lbs = lim->logical_block_size, align, segs, max, gran;

	virtio_cread(vdev, struct virtio_blk_config, max_discard_sectors, &max);
	virtio_cread(vdev, struct virtio_blk_config, max_discard_seg, &segs);
	virtio_cread(vdev, struct virtio_blk_config, discard_sector_alignment,
		     &align);

	max = vbb_max_sectors(vdev, "discard", max, lbs);
	if (!max)
		return;
	/*
	 * The granularity (in sectors) must fit 32 bits in bytes, be whole
	 * logical blocks and not exceed the largest discard: the block layer
	 * does not split discards at all if it does.
	 */
	gran = lbs;
	if (align) {
		if (check_shl_overflow(align, SECTOR_SHIFT, &gran) ||
		    gran % lbs || align > max) {
			dev_warn(&vdev->dev,
				 "discard_sector_alignment %u unusable, using the logical block size\n",
				 align);
			gran = lbs;
		}
	}
	if (!segs)
		segs = seg_max;
	/* one bio is one range on the bio path */
	if (vb->bio_path)
		segs = 1;
	lim->max_hw_discard_sectors = max;
	lim->max_discard_segments = min(segs, VBB_MAX_DISCARD_SEGS);
	lim->discard_granularity = gran;
}

int vbb_read_limits(struct vbb_dev *vb, struct queue_limits *lim)
{
	struct virtio_device *vdev = vb->vdev;
	u32 seg_max, size_max, blk_size, v;
	size_t dma_max;
	unsigned int ring;

	if (virtio_cread_feature(vdev, VIRTIO_BLK_F_SEG_MAX,
				 struct virtio_blk_config, seg_max, &seg_max) ||
	    !seg_max)
		seg_max = 1;
	/* header and status take two descriptors in a direct chain */
	ring = vbb_ring_size(vb);
	if (!virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC)) {
		if (ring < 3) {
			dev_err(&vdev->dev,
				"ring of %u entries cannot hold a request\n",
				ring);
			return -EINVAL;
		}
		seg_max = min(seg_max, ring - 2);
	}
	/* no virtqueue holds more than 32768 descriptors, indirect or not */
	seg_max = min(seg_max, VBB_MAX_SEG_MAX);
	if (vb->bio_path)
		seg_max = min_t(u32, seg_max, VBB_BIO_MAX_SEGS);
	lim->max_segments = seg_max;
	lim->max_hw_sectors = UINT_MAX;

	dma_max = virtio_max_dma_size(vdev);
	size_max = dma_max > U32_MAX ? U32_MAX : dma_max;
	if (!virtio_cread_feature(vdev, VIRTIO_BLK_F_SIZE_MAX,
				  struct virtio_blk_config, size_max, &v) && v)
		size_max = min(size_max, v);
	/*
	 * The block layer cannot build segments smaller than a page: such a
	 * device would get segments larger than it takes. Refused.
	 */
	if (size_max < PAGE_SIZE) {
		dev_err(&vdev->dev,
			"segment size limit %u is below the page size (%lu): device not usable\n",
			size_max, PAGE_SIZE);
		return -EINVAL;
	}
	lim->max_segment_size = size_max;

	if (!virtio_cread_feature(vdev, VIRTIO_BLK_F_BLK_SIZE,
				  struct virtio_blk_config, blk_size,
				  &blk_size)) {
		if (blk_size < SECTOR_SIZE || blk_size > PAGE_SIZE ||
		    !is_power_of_2(blk_size)) {
			dev_err(&vdev->dev, "unsupported block size %u\n",
				blk_size);
			return -EINVAL;
		}
		lim->logical_block_size = blk_size;
	}

	vbb_read_topology(vdev, lim);

	if (virtio_has_feature(vdev, VIRTIO_BLK_F_DISCARD))
		vbb_read_discard(vb, lim, seg_max);

	if (virtio_has_feature(vdev, VIRTIO_BLK_F_WRITE_ZEROES)) {
		virtio_cread(vdev, struct virtio_blk_config,
			     max_write_zeroes_sectors, &v);
		lim->max_write_zeroes_sectors =
			vbb_max_sectors(vdev, "write zeroes", v,
					lim->logical_block_size);
	}
	return 0;
}

#define VBB_MAX_CAPACITY	((u64)LLONG_MAX >> SECTOR_SHIFT)

static void vbb_update_capacity(struct vbb_dev *vb, bool resize)
{
	struct virtio_device *vdev = vb->vdev;
	u64 capacity;

	virtio_cread(vdev, struct virtio_blk_config, capacity, &capacity);
	/* the size in bytes must fit loff_t */
	if (capacity > VBB_MAX_CAPACITY) {
		dev_warn(&vdev->dev, "capacity %llu sectors capped at %llu\n",
			 capacity, VBB_MAX_CAPACITY);
		capacity = VBB_MAX_CAPACITY;
	}
	if (resize)
		dev_info(&vdev->dev, "[%s] new size: %llu 512-byte logical blocks\n",
			 vb->disk->disk_name, capacity);
	set_capacity_and_notify(vb->disk, capacity);
}

static void vbb_config_work(struct work_struct *work)
{
	struct vbb_dev *vb = container_of(work, struct vbb_dev, config_work);

	if (!READ_ONCE(vb->killed))
		vbb_update_capacity(vb, true);
}

static void vbb_config_changed(struct virtio_device *vdev)
{
	struct vbb_dev *vb = vdev->priv;

	queue_work(vbb_wq, &vb->config_work);
}

/*
 * How many request queues to build: one per queue the device offers (one
 * without VIRTIO_BLK_F_MQ), but no more than there are CPUs, nor than
 * num_request_queues if set. A device with VIRTIO_BLK_F_MQ and a num_queues
 * of 0 offers no queue at all.
 */
static int vbb_queue_count(struct virtio_device *vdev, unsigned int *count)
{
	unsigned int offered = 1, limit = nr_cpu_ids;

	if (virtio_has_feature(vdev, VIRTIO_BLK_F_MQ)) {
		offered = virtio_cread16(vdev,
					 offsetof(struct virtio_blk_config,
						  num_queues));
		if (!offered) {
			dev_err(&vdev->dev,
				"VIRTIO_BLK_F_MQ with num_queues 0: no request queue to use\n");
			return -EINVAL;
		}
	}
	if (num_request_queues && num_request_queues < limit)
		limit = num_request_queues;
	*count = min(offered, limit);
	return 0;
}

static int vbb_init_vqs(struct vbb_dev *vb)
{
	struct virtio_device *vdev = vb->vdev;
	struct irq_affinity desc = { 0, };
	vq_callback_t **callbacks = NULL;
	const char **names = NULL;
	struct virtqueue **vqs = NULL;
	unsigned int i, nr, npoll = 0;
	int err;

	err = vbb_queue_count(vdev, &nr);
	if (err)
		return err;
	/* poll queues are blk-mq's; one queue at least keeps its interrupt */
	if (!vb->bio_path && nr > 1)
		npoll = min(poll_queues, nr - 1);

	vb->io_queues[HCTX_TYPE_DEFAULT] = nr - npoll;
	vb->io_queues[HCTX_TYPE_READ] = 0;
	vb->io_queues[HCTX_TYPE_POLL] = npoll;

	vb->vqs = kcalloc(nr, sizeof(*vb->vqs), GFP_KERNEL);
	callbacks = kcalloc(nr, sizeof(*callbacks), GFP_KERNEL);
	names = kcalloc(nr, sizeof(*names), GFP_KERNEL);
	vqs = kcalloc(nr, sizeof(*vqs), GFP_KERNEL);
	if (!vb->vqs || !callbacks || !names || !vqs) {
		err = -ENOMEM;
		goto out;
	}

	for (i = 0; i < nr; i++) {
		struct vbb_vq *q = &vb->vqs[i];

		if (i < nr - npoll) {
			callbacks[i] = vb->bio_path ? vbb_bio_done : vbb_mq_done;
			snprintf(q->name, sizeof(q->name), "req.%u", i);
		} else {
			snprintf(q->name, sizeof(q->name), "req_poll.%u", i);
		}
		names[i] = q->name;
		spin_lock_init(&q->lock);
		INIT_LIST_HEAD(&q->waiters);
		INIT_LIST_HEAD(&q->busy);
	}

	err = vbb_find_vqs(vdev, nr, vqs, callbacks, names, &desc);
	if (err)
		goto out;

	for (i = 0; i < nr; i++)
		vb->vqs[i].vq = vqs[i];
	/* vbb_poll() reads the rings once it sees the count */
	smp_store_release(&vb->num_vqs, nr);
	dev_info(&vdev->dev, "%s path, %u/%u default/poll queues\n",
		 vb->bio_path ? "bio" : "request", nr - npoll, npoll);
out:
	kfree(vqs);
	kfree(names);
	kfree(callbacks);
	if (err) {
		kfree(vb->vqs);
		vb->vqs = NULL;
	}
	return err;
}

/* "vd" + a, b, ..., z, aa, ab, ...: the naming scheme of virtio disks */
static int vbb_format_name(char *buf, size_t len, int index)
{
	char tmp[DISK_NAME_LEN];
	int n = 0;

	do {
		if (n >= (int)sizeof(tmp) - 1)
			return -EINVAL;
		tmp[n++] = 'a' + index % 26;
		index = index / 26 - 1;
	} while (index >= 0);

	if (n + 3 > len)
		return -EINVAL;
	buf[0] = 'v';
	buf[1] = 'd';
	for (index = 0; index < n; index++)
		buf[2 + index] = tmp[n - 1 - index];
	buf[2 + n] = '\0';
	return 0;
}

/* The CHS geometry the device offers (VIRTIO_BLK_F_GEOMETRY), if any. */
static bool vbb_device_geometry(struct virtio_device *vdev,
				struct hd_geometry *geo)
{
	if (!virtio_has_feature(vdev, VIRTIO_BLK_F_GEOMETRY))
		return false;
	geo->cylinders = virtio_cread16(vdev, offsetof(struct virtio_blk_config,
						       geometry.cylinders));
	geo->heads = virtio_cread8(vdev, offsetof(struct virtio_blk_config,
						  geometry.heads));
	geo->sectors = virtio_cread8(vdev, offsetof(struct virtio_blk_config,
						    geometry.sectors));
	return true;
}

/* Without a device geometry: 64 heads of 32 sectors, 1 MiB per cylinder. */
#define VBB_CHS_HEADS	64
#define VBB_CHS_SECTORS	32

/* HDIO_GETGEO, for the partitioning tools that still ask for one. */
static int vbb_getgeo(struct gendisk *disk, struct hd_geometry *geo)
{
	struct vbb_dev *vb = disk->private_data;
	int err = 0;

	mutex_lock(&vb->vdev_mutex);
	if (!vb->vdev) {
		err = -ENXIO;	/* removed */
	} else if (!vbb_device_geometry(vb->vdev, geo)) {
		geo->heads = VBB_CHS_HEADS;
		geo->sectors = VBB_CHS_SECTORS;
		geo->cylinders = get_capacity(disk) /
				 (VBB_CHS_HEADS * VBB_CHS_SECTORS);
	}
	mutex_unlock(&vb->vdev_mutex);
	return err;
}

KCOMPAT_DEFINE_GETGEO(vbb_getgeo);

/*
 * Free the device's structure and what it still holds: from ->free_disk once
 * the last reference to the disk is gone (the disk's index, hence its name
 * and minors, stays taken until then), or from a probe that failed before
 * the disk was added.
 */
static void vbb_release(struct vbb_dev *vb)
{
	if (vb->bio_path)
		vbb_bio_destroy(vb);
	kfree(vb->hctx);
	kfree(vb->vqs);
	ida_free(&vbb_index_ida, vb->index);
	mutex_destroy(&vb->vdev_mutex);
	kfree(vb);
}

static void vbb_free_disk(struct gendisk *disk)
{
	vbb_release(disk->private_data);
}

static const struct block_device_operations vbb_mq_fops = {
	.owner		= THIS_MODULE,
	.getgeo		= KCOMPAT_GETGEO(vbb_getgeo),
	.free_disk	= vbb_free_disk,
};

static const struct block_device_operations vbb_bio_fops = {
	.owner		= THIS_MODULE,
	.submit_bio	= vbb_bio_submit,
	.poll_bio	= vbb_bio_poll,
	.getgeo		= KCOMPAT_GETGEO(vbb_getgeo),
	.free_disk	= vbb_free_disk,
};

static ssize_t serial_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	struct vbb_dev *vb = dev_to_disk(dev)->private_data;
	char *id;
	int err;

	id = kzalloc(VIRTIO_BLK_ID_BYTES + 1, GFP_KERNEL);
	if (!id)
		return -ENOMEM;
	if (vb->bio_path)
		err = vbb_bio_get_id(vb, id);
	else if (READ_ONCE(vb->killed))
		err = -EIO;
	else
		err = vbb_mq_get_id(vb, id);
	if (!err)
		err = sysfs_emit(buf, "%s\n", id);
	kfree(id);
	return err;
}
static DEVICE_ATTR_RO(serial);

static const char *const vbb_cache_types[] = {
	"write through", "write back"
};

static ssize_t cache_type_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct vbb_dev *vb = dev_to_disk(dev)->private_data;

	return sysfs_emit(buf, "%s\n",
			  vbb_cache_types[vbb_cache_writeback(vb->vdev)]);
}

static ssize_t cache_type_store(struct device *dev,
				struct device_attribute *attr,
				const char *buf, size_t count)
{
	struct gendisk *disk = dev_to_disk(dev);
	struct vbb_dev *vb = disk->private_data;
	int i, err;

	if (!vbb_cache_switchable(vb->vdev))
		return -EPERM;
	i = sysfs_match_string(vbb_cache_types, buf);
	if (i < 0)
		return i;
	virtio_cwrite8(vb->vdev, offsetof(struct virtio_blk_config, wce), i);
	err = vbb_set_write_cache(disk->queue, vbb_cache_writeback(vb->vdev),
				  vb->bio_path);
	return err ? err : count;
}
static DEVICE_ATTR_RW(cache_type);

/* Counters of the submission side, for tests and benchmarks. */
static ssize_t driver_stats_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct vbb_dev *vb = dev_to_disk(dev)->private_data;
	u64 added = 0, tries = 0, notifies = 0, full = 0;
	unsigned int i, nr;

	/* the rings come and go with ->freeze and ->restore */
	mutex_lock(&vb->vdev_mutex);
	nr = vb->num_vqs;
	for (i = 0; i < nr; i++) {
		struct vbb_vq *q = &vb->vqs[i];

		spin_lock_irq(&q->lock);
		added += q->added;
		tries += q->kick_tries;
		notifies += q->notifies;
		full += q->full;
		spin_unlock_irq(&q->lock);
	}
	mutex_unlock(&vb->vdev_mutex);
	return sysfs_emit(buf,
			  "path %s\nqueues %u\nadded %llu\nkick_tries %llu\nnotifies %llu\nring_full %llu\npreflushes %lld\nfua_flushes %lld\nflushes %lld\n",
			  vb->bio_path ? "bio" : "mq", nr, added,
			  tries, notifies, full,
			  (long long)atomic64_read(&vb->preflushes),
			  (long long)atomic64_read(&vb->fua_flushes),
			  (long long)atomic64_read(&vb->flushes));
}
static DEVICE_ATTR_RO(driver_stats);

static struct attribute *vbb_attrs[] = {
	&dev_attr_serial.attr,
	&dev_attr_cache_type.attr,
	&dev_attr_driver_stats.attr,
	NULL,
};

static umode_t vbb_attr_visible(struct kobject *kobj, struct attribute *a,
				int n)
{
	struct vbb_dev *vb = dev_to_disk(kobj_to_dev(kobj))->private_data;

	if (a == &dev_attr_cache_type.attr && !vbb_cache_switchable(vb->vdev))
		return 0444;
	return a->mode;
}

static const struct attribute_group vbb_attr_group = {
	.attrs		= vbb_attrs,
	.is_visible	= vbb_attr_visible,
};

static const struct attribute_group *vbb_attr_groups[] = {
	&vbb_attr_group,
	NULL,
};

static int vbb_probe(struct virtio_device *vdev)
{
	struct queue_limits lim;
	struct vbb_dev *vb;
	int err, index;

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config access disabled\n");
		return -EINVAL;
	}

	index = ida_alloc_range(&vbb_index_ida, 0,
				(1 << (MINORBITS - VBB_PART_BITS)) - 1,
				GFP_KERNEL);
	if (index < 0)
		return index;

	vb = kzalloc_obj(*vb, GFP_KERNEL);
	if (!vb) {
		ida_free(&vbb_index_ida, index);
		return -ENOMEM;
	}
	vdev->priv = vb;
	vb->vdev = vdev;
	vb->index = index;
	vb->bio_path = READ_ONCE(use_bio);
	vb->timeout = (unsigned long)READ_ONCE(io_timeout) * HZ;
	mutex_init(&vb->vdev_mutex);
	INIT_WORK(&vb->config_work, vbb_config_work);

	err = vbb_init_vqs(vb);
	if (err)
		goto out_release;

	vbb_limits_default(vb, &lim);
	err = vbb_read_limits(vb, &lim);
	if (err)
		goto out_del_vqs;
	vbb_check_cache_mode(vdev);

	if (vb->bio_path)
		vb->disk = vbb_bio_create_disk(vb, &lim);
	else
		vb->disk = vbb_mq_create_disk(vb, &lim);
	if (IS_ERR(vb->disk)) {
		err = PTR_ERR(vb->disk);
		vb->disk = NULL;
		goto out_del_vqs;
	}

	err = vbb_format_name(vb->disk->disk_name, DISK_NAME_LEN, index);
	if (err)
		goto out_put_disk;
	vb->disk->major = vbb_major;
	vb->disk->first_minor = index << VBB_PART_BITS;
	vb->disk->minors = VBB_MINORS;
	vb->disk->private_data = vb;
	vb->disk->fops = vb->bio_path ? &vbb_bio_fops : &vbb_mq_fops;

	if (virtio_has_feature(vdev, VIRTIO_BLK_F_RO))
		set_disk_ro(vb->disk, true);

	vbb_update_capacity(vb, false);
	virtio_device_ready(vdev);

	err = device_add_disk(&vdev->dev, vb->disk, vbb_attr_groups);
	if (err)
		goto out_reset;
	return 0;

out_reset:
	virtio_reset_device(vdev);
out_put_disk:
	/* never added: ->free_disk will not run, vb is still ours */
	put_disk(vb->disk);
	if (!vb->bio_path)
		vbb_mq_destroy(vb);
out_del_vqs:
	vdev->config->del_vqs(vdev);
out_release:
	vdev->priv = NULL;
	vbb_release(vb);
	return err;
}

static void vbb_remove(struct virtio_device *vdev)
{
	struct vbb_dev *vb = vdev->priv;

	/* a surprise removal: what the device holds never completes */
	if (vbb_vqs_broken(vb))
		vbb_kill(vb, false, "device broken");
	flush_work(&vb->config_work);
	del_gendisk(vb->disk);
	if (vb->bio_path) {
		vbb_bio_set_state(vb, VBB_DEAD);
		vbb_bio_drain(vb);
	} else {
		vbb_mq_destroy(vb);
	}

	mutex_lock(&vb->vdev_mutex);
	/*
	 * A device that is gone is not reset: a modern virtio-pci reset waits
	 * for a status of 0, which a device that is not there never reads.
	 */
	if (!vb->gone)
		virtio_reset_device(vdev);
	if (vb->vqs)
		vdev->config->del_vqs(vdev);
	vb->vdev = NULL;
	kfree(vb->vqs);
	vb->vqs = NULL;
	vb->num_vqs = 0;
	mutex_unlock(&vb->vdev_mutex);

	/* the last reference frees vb (vbb_free_disk()) */
	put_disk(vb->disk);
}

#ifdef CONFIG_PM_SLEEP
/*
 * Suspend and hibernation: the virtio core resets the device before
 * ->restore, so every request must be finished and the rings gone before,
 * and the rings are built again after. Nothing is held across the two
 * calls: blk-mq keeps new requests in a quiesced queue, the bio path keeps
 * new bios waiting at its entry (vbb_enter()).
 */
static int vbb_freeze(struct virtio_device *vdev)
{
	struct vbb_dev *vb = vdev->priv;
	struct request_queue *q = vb->disk->queue;
	unsigned int memflags;

	if (vb->bio_path) {
		/* a device given up stays dead: submitters fail, not wait */
		vbb_bio_set_state(vb, READ_ONCE(vb->killed) ? VBB_DEAD :
				  VBB_SUSPENDED);
		vbb_bio_drain(vb);
	} else {
		/* the freeze waits for requests in flight, quiesce for dispatch */
		memflags = blk_mq_freeze_queue(q);
		blk_mq_quiesce_queue(q);
		blk_mq_unfreeze_queue(q, memflags);
	}
	flush_work(&vb->config_work);

	mutex_lock(&vb->vdev_mutex);
	/* ->poll may still be called: it looks for rings under RCU */
	vb->frozen_vqs = vb->num_vqs;
	WRITE_ONCE(vb->num_vqs, 0);
	synchronize_rcu();
	if (!vb->gone)
		virtio_reset_device(vdev);
	if (vb->vqs)
		vdev->config->del_vqs(vdev);
	kfree(vb->vqs);
	vb->vqs = NULL;
	mutex_unlock(&vb->vdev_mutex);
	dev_info(&vdev->dev, "[%s] frozen\n", vb->disk->disk_name);
	return 0;
}

static int vbb_restore(struct virtio_device *vdev)
{
	struct vbb_dev *vb = vdev->priv;
	struct request_queue *q = vb->disk->queue;
	int err = 0;

	mutex_lock(&vb->vdev_mutex);
	if (!vb->killed)
		err = vbb_init_vqs(vb);
	if (!vb->killed && !err && vb->num_vqs != vb->frozen_vqs) {
		/* the hardware queues and the CPU map were built for the old count */
		dev_err(&vdev->dev, "restore: %u queues instead of %u\n",
			vb->num_vqs, vb->frozen_vqs);
		/* the count was published: wait out ->poll as ->freeze does */
		WRITE_ONCE(vb->num_vqs, 0);
		synchronize_rcu();
		virtio_reset_device(vdev);
		vdev->config->del_vqs(vdev);
		kfree(vb->vqs);
		vb->vqs = NULL;
		err = -EIO;
	}
	if (err) {
		vb->num_vqs = 0;
		WRITE_ONCE(vb->killed, true);
	} else if (!vb->killed) {
		virtio_device_ready(vdev);
	}
	mutex_unlock(&vb->vdev_mutex);

	/* without rings every request fails: none waits for ever */
	if (err)
		dev_err(&vdev->dev, "[%s] not restored (%d): I/O fails\n",
			vb->disk->disk_name, err);
	else if (!vb->killed)
		dev_info(&vdev->dev, "[%s] restored\n", vb->disk->disk_name);
	if (vb->bio_path) {
		if (vb->killed) {
			vbb_bio_set_state(vb, VBB_DEAD);
		} else {
			vbb_bio_reopen(vb);
			vbb_bio_set_state(vb, VBB_LIVE);
		}
	} else {
		blk_mq_unquiesce_queue(q);
	}
	return err;
}
#endif

static const struct virtio_device_id vbb_id_table[] = {
	{ VIRTIO_ID_BLOCK, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static unsigned int vbb_features[] = {
	VIRTIO_BLK_F_SEG_MAX, VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_GEOMETRY,
	VIRTIO_BLK_F_RO, VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_FLUSH,
	VIRTIO_BLK_F_TOPOLOGY, VIRTIO_BLK_F_CONFIG_WCE, VIRTIO_BLK_F_MQ,
	VIRTIO_BLK_F_DISCARD, VIRTIO_BLK_F_WRITE_ZEROES,
};

static struct virtio_driver vbb_driver = {
	.feature_table		= vbb_features,
	.feature_table_size	= ARRAY_SIZE(vbb_features),
	.feature_table_legacy	= vbb_features,
	.feature_table_size_legacy = ARRAY_SIZE(vbb_features),
	.driver.name		= KBUILD_MODNAME,
	.driver.owner		= THIS_MODULE,
	.id_table		= vbb_id_table,
	.probe			= vbb_probe,
	.remove			= vbb_remove,
	.config_changed		= vbb_config_changed,
#ifdef CONFIG_PM_SLEEP
	.freeze			= vbb_freeze,
	.restore		= vbb_restore,
#endif
};

static int __init vbb_init(void)
{
	int err;

	/* the bio path's watchdog fails I/O: it must run under memory pressure */
	vbb_wq = alloc_workqueue("virtio_blk_bio", WQ_MEM_RECLAIM | WQ_PERCPU, 0);
	if (!vbb_wq)
		return -ENOMEM;
	err = vbb_bio_cache_init();
	if (err)
		goto out_wq;
	vbb_major = register_blkdev(0, "virtblk_bio");
	if (vbb_major < 0) {
		err = vbb_major;
		goto out_cache;
	}
	err = register_virtio_driver(&vbb_driver);
	if (err)
		goto out_blkdev;
	return 0;

out_blkdev:
	unregister_blkdev(vbb_major, "virtblk_bio");
out_cache:
	vbb_bio_cache_exit();
out_wq:
	destroy_workqueue(vbb_wq);
	return err;
}

static void __exit vbb_exit(void)
{
	unregister_virtio_driver(&vbb_driver);
	unregister_blkdev(vbb_major, "virtblk_bio");
	vbb_bio_cache_exit();
	destroy_workqueue(vbb_wq);
}
module_init(vbb_init);
module_exit(vbb_exit);

MODULE_DEVICE_TABLE(virtio, vbb_id_table);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Virtio block driver with request and bio submission paths");
MODULE_AUTHOR("The vhost-blk developers");
MODULE_VERSION("0.1.0");
