// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_blk_bio: virtio-blk guest driver with a blk-mq request path and a
 * bio (->submit_bio) path.
 */
#include <linux/module.h>
#include <linux/virtio.h>
#include <linux/virtio_blk.h>

#include "kcompat.h"

static bool use_bio;
module_param(use_bio, bool, 0444);
MODULE_PARM_DESC(use_bio, "Use the bio path (->submit_bio) instead of blk-mq requests (default N)");

static int virtblk_bio_probe(struct virtio_device *vdev)
{
	dev_info(&vdev->dev, "virtio_blk_bio: %s path\n", use_bio ? "bio" : "request");
	return 0;
}

static void virtblk_bio_remove(struct virtio_device *vdev)
{
	virtio_reset_device(vdev);
	vdev->config->del_vqs(vdev);
}

static const struct virtio_device_id id_table[] = {
	{ VIRTIO_ID_BLOCK, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static struct virtio_driver virtio_blk_bio_driver = {
	.driver.name	= KBUILD_MODNAME,
	.driver.owner	= THIS_MODULE,
	.id_table	= id_table,
	.probe		= virtblk_bio_probe,
	.remove		= virtblk_bio_remove,
};

module_virtio_driver(virtio_blk_bio_driver);

MODULE_DEVICE_TABLE(virtio, id_table);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Virtio block driver with request and bio submission paths");
