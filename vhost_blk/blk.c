// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk: an in-kernel virtio-blk device on the vhost core.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/slab.h>

#include "vhost.h"
#include <linux/vhost_blk.h>

static int vhost_blk_open(struct inode *inode, struct file *f)
{
	return 0;
}

static int vhost_blk_release(struct inode *inode, struct file *f)
{
	return 0;
}

static long vhost_blk_ioctl(struct file *f, unsigned int ioctl,
			    unsigned long arg)
{
	return -ENOIOCTLCMD;
}

static const struct file_operations vhost_blk_fops = {
	.owner		= THIS_MODULE,
	.open		= vhost_blk_open,
	.release	= vhost_blk_release,
	.unlocked_ioctl	= vhost_blk_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice vhost_blk_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "vhost-blk",
	.fops	= &vhost_blk_fops,
};

static int __init vhost_blk_init(void)
{
	return misc_register(&vhost_blk_misc);
}

static void __exit vhost_blk_exit(void)
{
	misc_deregister(&vhost_blk_misc);
}

module_init(vhost_blk_init);
module_exit(vhost_blk_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Host kernel accelerator for virtio-blk");
MODULE_ALIAS("devname:vhost-blk");
