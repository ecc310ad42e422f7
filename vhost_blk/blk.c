// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk: an in-kernel virtio-blk device on the vhost core.
 *
 * /dev/vhost-blk: one open file is one device.  The vhost core owns the
 * rings, the memory table, the eventfds and the workers; this file holds
 * the device lifetime and its ioctls, req.c the request path.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/blkdev.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/virtio_byteorder.h>

#include "blk.h"

unsigned int vhost_blk_max_inflight = 128;
module_param_named(max_inflight, vhost_blk_max_inflight, uint, 0444);
MODULE_PARM_DESC(max_inflight,
		 "Requests in flight per queue (1-1024, default 128)");

static atomic_t vhost_blk_ids = ATOMIC_INIT(0);

static int vhost_blk_open(struct inode *inode, struct file *f)
{
	struct vhost_blk *blk;
	int i;

	/* Charged to the opener: the VMM that will own the device. */
	blk = kvzalloc_obj(*blk, GFP_KERNEL_ACCOUNT);
	if (!blk)
		return -ENOMEM;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_blk_vq *bvq = &blk->vqs[i];

		bvq->blk = blk;
		bvq->index = i;
		init_llist_head(&bvq->done);
		atomic_set(&bvq->pending, 0);
		vhost_work_init(&bvq->done_work, vhost_blk_done_work);
		vhost_blk_batch_init(bvq);
		vhost_blk_irq_init(bvq);
		bvq->vq.handle_kick = vhost_blk_handle_kick;
		blk->vqp[i] = &bvq->vq;
	}
	vhost_dev_init(&blk->dev, blk->vqp, VHOST_BLK_MAX_QUEUES, UIO_MAXIOV,
		       VHOST_BLK_WEIGHT, VHOST_BLK_BYTE_WEIGHT, true, NULL);
	init_waitqueue_head(&blk->pending_wait);
	mutex_init(&blk->sync_mutex);
	spin_lock_init(&blk->sync_lock);
	blk->num_queues = 1;
	blk->batch_delay_us = min_t(u32, READ_ONCE(vhost_blk_batch_delay_us),
				    VHOST_BLK_BATCH_DELAY_MAX);
	blk->irq_delay_us = min_t(u32, READ_ONCE(vhost_blk_irq_delay_us),
				  VHOST_BLK_IRQ_DELAY_MAX);
	vhost_blk_poll_init(blk);
	blk->id = atomic_inc_return(&vhost_blk_ids);
	vhost_blk_stats_add(blk);
	f->private_data = blk;
	return 0;
}

/*
 * Stop all queues and wait for every request in flight.  On return no
 * request refers to the backend and every request fetched is in the used
 * rings, even when the workers died with their owner.
 * Called with dev.mutex held or on release.
 */
static void vhost_blk_drain(struct vhost_blk *blk)
{
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_virtqueue *vq = &blk->vqs[i].vq;

		mutex_lock(&vq->mutex);
		blk->vqs[i].be = NULL;
		vhost_vq_set_backend(vq, NULL);
		mutex_unlock(&vq->mutex);
		/* A timer now finds no backend; none is left running. */
		vhost_blk_batch_stop(&blk->vqs[i]);
	}
	/* No handle_kick is running or will submit anything now. */
	vhost_dev_flush(&blk->dev);
	wait_event(blk->pending_wait, !vhost_blk_pending(blk));
	/* Completion callbacks have left their RCU sections. */
	synchronize_rcu();
	/*
	 * No interrupt is held past the flush: what the workers retire now is
	 * all that was in flight, and so is sent at once.
	 */
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		vhost_blk_irq_stop(&blk->vqs[i]);
#ifdef VHOST_BLK_FAULT_INJECTION
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		vhost_blk_fault_check_orphan(&blk->vqs[i]);
#endif
	/* The workers retire what completed. */
	vhost_dev_flush(&blk->dev);
	vhost_blk_retire_orphans(blk);
	/*
	 * The requests kept for reuse go back too: they are charged to the
	 * owner, and the next backend may have another (VHOST_RESET_OWNER).
	 */
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_virtqueue *vq = &blk->vqs[i].vq;

		mutex_lock(&vq->mutex);
		vhost_blk_spare_free(&blk->vqs[i]);
		mutex_unlock(&vq->mutex);
	}
}

static void vhost_blk_backend_free(struct vhost_blk_backend_file *be)
{
	if (be) {
		fput(be->file);
		put_cred(be->cred);
		mem_cgroup_put(be->memcg);
		kfree(be);
	}
}

static int vhost_blk_release(struct inode *inode, struct file *f)
{
	struct vhost_blk *blk = f->private_data;

	vhost_blk_drain(blk);
	vhost_dev_stop(&blk->dev);
	vhost_dev_cleanup(&blk->dev);
	vhost_blk_backend_free(blk->be);
	vhost_blk_stats_del(blk);
	mutex_destroy(&blk->sync_mutex);
	kvfree(blk);
	return 0;
}

/* The backend's size now, in 512-byte sectors. */
static u64 vhost_blk_backend_size(struct vhost_blk_backend_file *be)
{
	struct inode *inode = be->file->f_mapping->host;

	if (be->bdev)
		return bdev_nr_bytes(I_BDEV(inode)) >> SECTOR_SHIFT;
	return i_size_read(inode) >> SECTOR_SHIFT;
}

static struct vhost_blk_backend_file *
vhost_blk_backend_open(int fd, const struct vhost_blk_backend *arg)
{
	struct vhost_blk_backend_file *be;
	struct block_device *bdev = NULL;
	struct file *file;
	struct inode *inode;
	int ret = -EINVAL;

	file = fget(fd);
	if (!file)
		return ERR_PTR(-EBADF);
	inode = file->f_mapping->host;
	if (!(file->f_mode & FMODE_READ) || !file->f_op->read_iter)
		goto err;
	/* Appending writes would all land at the end of the file. */
	if (file->f_flags & O_APPEND)
		goto err;
	if (S_ISBLK(inode->i_mode))
		bdev = I_BDEV(inode);
	else if (!S_ISREG(inode->i_mode))
		goto err;
	/*
	 * The guest would see a conventional disk: its writes anywhere but
	 * at a sequential zone's write pointer would fail.
	 */
	if (bdev && bdev_is_zoned(bdev)) {
		pr_warn_ratelimited("vhost-blk: zoned block devices cannot be backends\n");
		ret = -EOPNOTSUPP;
		goto err;
	}

	ret = -ENOMEM;
	be = kzalloc_obj(*be, GFP_KERNEL_ACCOUNT);
	if (!be)
		goto err;
	be->file = file;
	be->bdev = !!bdev;
	be->capacity = vhost_blk_backend_size(be);
	be->direct = file->f_flags & O_DIRECT;
	be->bio = vhost_blk_bio_usable(be);
	be->ro = (arg->flags & VHOST_BLK_BACKEND_F_RO) ||
		 !(file->f_mode & FMODE_WRITE) || !file->f_op->write_iter ||
		 (bdev && bdev_read_only(bdev));
	be->blk_size = arg->blk_size;
	if (!be->blk_size)
		be->blk_size = bdev ? bdev_logical_block_size(bdev) :
			       SECTOR_SIZE;
	if (bdev && be->blk_size < bdev_logical_block_size(bdev)) {
		kfree(be);
		ret = -EINVAL;
		goto err;
	}
	/* The caller is the owner: its identity for work done for the guest. */
	be->cred = get_current_cred();
	be->memcg = get_mem_cgroup_from_mm(current->mm);
	return be;
err:
	fput(file);
	return ERR_PTR(ret);
}

/* Read and check SET_BACKEND's argument (the caller is the owner). */
static long vhost_blk_backend_arg(struct vhost_blk_backend *arg,
				  struct vhost_blk_backend __user *uarg)
{
	u32 usize;
	long ret;

	if (get_user(usize, &uarg->size))
		return -EFAULT;
	if (usize < offsetofend(struct vhost_blk_backend, fd))
		return -EINVAL;
	/* As clone3() and openat2(): a page is more than it will ever need. */
	if (usize > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(arg, sizeof(*arg), uarg, usize);
	if (ret)
		return ret;
	if (arg->flags & ~VHOST_BLK_BACKEND_F_ALL || arg->reserved0 ||
	    arg->reserved1 || memchr_inv(arg->reserved2, 0,
					 sizeof(arg->reserved2)))
		return -EINVAL;
	if (arg->num_queues > VHOST_BLK_MAX_QUEUES)
		return -EINVAL;
	if (arg->blk_size && (!is_power_of_2(arg->blk_size) ||
			      arg->blk_size < SECTOR_SIZE ||
			      arg->blk_size > VHOST_BLK_MAX_BLK_SIZE))
		return -EINVAL;
	if (arg->fd < -1)
		return -EBADF;
	return 0;
}

/*
 * Let the queues run again on @be (an attach, or after a drain) and pick up
 * what the guest queued meanwhile.  Under dev.mutex, after vhost_blk_drain()
 * when another backend was attached.
 */
static void vhost_blk_resume_queues(struct vhost_blk *blk,
				    struct vhost_blk_backend_file *be)
{
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_virtqueue *vq = &blk->vqs[i].vq;

		mutex_lock(&vq->mutex);
		blk->vqs[i].be = be;
		if (be && vq->kick)
			vhost_poll_queue(&vq->poll);
		mutex_unlock(&vq->mutex);
	}
}

static long vhost_blk_set_backend(struct vhost_blk *blk,
				  struct vhost_blk_backend __user *uarg)
{
	struct vhost_blk_backend_file *be = NULL, *old = NULL;
	struct vhost_blk_backend arg;
	long ret;

	mutex_lock(&blk->dev.mutex);
	/* Anybody else learns nothing, not even about the argument. */
	ret = vhost_dev_check_owner(&blk->dev);
	if (!ret)
		ret = vhost_blk_backend_arg(&arg, uarg);
	if (!ret && arg.fd >= 0) {
		be = vhost_blk_backend_open(arg.fd, &arg);
		if (IS_ERR(be)) {
			ret = PTR_ERR(be);
			be = NULL;
		}
	}
	if (ret)
		goto unlock;
	old = blk->be;
	if (old)
		vhost_blk_drain(blk);
	blk->be = be;
	if (be) {
		blk->num_queues = arg.num_queues ? arg.num_queues : 1;
		memcpy(blk->serial, arg.serial, sizeof(blk->serial));
		vhost_blk_resume_queues(blk, be);
	}
unlock:
	mutex_unlock(&blk->dev.mutex);
	vhost_blk_backend_free(old);
	return ret;
}

/*
 * The backend stays immutable while queues use it: the capacity changes
 * with every queue stopped and drained, so a request sees one capacity
 * from its check to its completion.
 */
static long vhost_blk_set_capacity(struct vhost_blk *blk, u64 __user *uarg)
{
	struct vhost_blk_backend_file *be;
	u64 sectors, size;
	long ret;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (!ret && get_user(sectors, uarg))
		ret = -EFAULT;
	be = blk->be;
	if (!ret && !be)
		ret = -ENXIO;
	if (ret)
		goto unlock;
	size = vhost_blk_backend_size(be);
	if (!sectors)
		sectors = size;
	if (sectors > size) {
		ret = -EINVAL;
		goto unlock;
	}
	if (sectors != be->capacity) {
		vhost_blk_drain(blk);
		be->capacity = sectors;
		vhost_blk_resume_queues(blk, be);
	}
unlock:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/* Drop the backend, the rings and the owner: the device is as if new. */
static long vhost_blk_reset_owner(struct vhost_blk *blk)
{
	struct vhost_blk_backend_file *old = NULL;
	struct vhost_iotlb *umem;
	long err;
	int i;

	mutex_lock(&blk->dev.mutex);
	err = vhost_dev_check_owner(&blk->dev);
	if (err)
		goto done;
	umem = vhost_dev_reset_owner_prepare();
	if (!umem) {
		err = -ENOMEM;
		goto done;
	}
	vhost_blk_drain(blk);
	old = blk->be;
	blk->be = NULL;
	vhost_dev_stop(&blk->dev);
	vhost_dev_reset_owner(&blk->dev, umem);
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		blk->vqs[i].throttled = false;
	/* The core's reset cleared the queues' busy poll timeouts. */
	vhost_blk_poll_init(blk);
done:
	mutex_unlock(&blk->dev.mutex);
	vhost_blk_backend_free(old);
	return err;
}

/* Under dev.mutex. */
static u64 vhost_blk_features(struct vhost_blk *blk)
{
	u64 features = VHOST_BLK_FEATURES;

	if (blk->be && blk->be->ro)
		features |= 1ULL << VIRTIO_BLK_F_RO;
	return features;
}

static long vhost_blk_get_config(struct vhost_blk *blk,
				 struct vhost_blk_config __user *uarg)
{
	struct vhost_blk_backend_file *be;
	struct virtio_blk_config *c;
	struct vhost_blk_config *kc;
	u32 usize;
	long ret = 0;

	if (get_user(usize, &uarg->size))
		return -EFAULT;
	if (usize < offsetofend(struct vhost_blk_config, flags))
		return -EINVAL;
	kc = kzalloc_obj(*kc, GFP_KERNEL);
	if (!kc)
		return -ENOMEM;
	c = &kc->blk;
	kc->size = sizeof(*kc);
	kc->config_len = sizeof(*c);

	mutex_lock(&blk->dev.mutex);
	be = blk->be;
	kc->features = vhost_blk_features(blk);
	c->size_max = __cpu_to_virtio32(true, VHOST_BLK_SIZE_MAX);
	c->seg_max = __cpu_to_virtio32(true, VHOST_BLK_SEG_MAX);
	c->num_queues = __cpu_to_virtio16(true, blk->num_queues);
	c->blk_size = __cpu_to_virtio32(true, SECTOR_SIZE);
	if (be) {
		kc->flags |= VHOST_BLK_CONFIG_F_BACKEND;
		if (be->ro)
			kc->flags |= VHOST_BLK_CONFIG_F_RO;
		if (be->direct)
			kc->flags |= VHOST_BLK_CONFIG_F_DIRECT;
		if (be->bdev)
			kc->flags |= VHOST_BLK_CONFIG_F_BDEV;
		c->capacity = __cpu_to_virtio64(true, be->capacity);
		c->blk_size = __cpu_to_virtio32(true, be->blk_size);
		c->discard_sector_alignment =
			__cpu_to_virtio32(true, be->blk_size >> SECTOR_SHIFT);
	}
	c->max_discard_sectors = __cpu_to_virtio32(true,
						   VHOST_BLK_MAX_DWZ_SECTORS);
	c->max_discard_seg = __cpu_to_virtio32(true, VHOST_BLK_MAX_DWZ_SEG);
	c->max_write_zeroes_sectors =
		__cpu_to_virtio32(true, VHOST_BLK_MAX_DWZ_SECTORS);
	c->max_write_zeroes_seg = __cpu_to_virtio32(true,
						    VHOST_BLK_MAX_DWZ_SEG);
	c->write_zeroes_may_unmap = 1;
	mutex_unlock(&blk->dev.mutex);

	if (copy_to_user(uarg, kc, min_t(size_t, usize, sizeof(*kc))))
		ret = -EFAULT;
	kfree(kc);
	return ret;
}

/*
 * A request logs its writes if logging was on when it completed.  Turning
 * logging on or off drains the queues first: a request fetched before
 * logging was asked for finishes before VHOST_SET_FEATURES returns (the
 * front-end's dirty tracking starts after that), and none logs into a log
 * the front-end may drop once logging is off.
 */
static long vhost_blk_set_features(struct vhost_blk *blk, u64 features)
{
	bool log = features & (1ULL << VHOST_F_LOG_ALL);
	bool drain;
	long ret = 0;
	int i;

	if (features & ~(VHOST_BLK_FEATURES | (1ULL << VIRTIO_BLK_F_RO)))
		return -EOPNOTSUPP;

	mutex_lock(&blk->dev.mutex);
	if (log && !vhost_log_access_ok(&blk->dev)) {
		ret = -EFAULT;
		goto unlock;
	}
	drain = blk->be &&
		log != vhost_has_feature(&blk->vqs[0].vq, VHOST_F_LOG_ALL);
	if (drain)
		vhost_blk_drain(blk);
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_virtqueue *vq = &blk->vqs[i].vq;

		mutex_lock(&vq->mutex);
		vq->acked_features = features;
		mutex_unlock(&vq->mutex);
	}
	if (drain)
		vhost_blk_resume_queues(blk, blk->be);
unlock:
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/*
 * Set one of the device's delays (microseconds, at most @max) from a u32 the
 * owner passes: the batch delay and the interrupt delay share this.
 */
static long vhost_blk_set_delay(struct vhost_blk *blk, u32 __user *uarg,
				u32 max, u32 *field)
{
	u32 us;
	long ret;

	mutex_lock(&blk->dev.mutex);
	ret = vhost_dev_check_owner(&blk->dev);
	if (!ret && get_user(us, uarg))
		ret = -EFAULT;
	if (!ret && us > max)
		ret = -EINVAL;
	if (!ret)
		WRITE_ONCE(*field, us);
	mutex_unlock(&blk->dev.mutex);
	return ret;
}

/* The device's own ioctls match by type and number: their size may grow. */
static bool vhost_blk_ioctl_is(unsigned int ioctl, unsigned int cmd)
{
	return _IOC_TYPE(ioctl) == _IOC_TYPE(cmd) &&
	       _IOC_NR(ioctl) == _IOC_NR(cmd) &&
	       _IOC_DIR(ioctl) == _IOC_DIR(cmd);
}

static long vhost_blk_ioctl(struct file *f, unsigned int ioctl,
			    unsigned long arg)
{
	struct vhost_blk *blk = f->private_data;
	void __user *argp = (void __user *)arg;
	u64 __user *featurep = argp;
	u64 features;
	long r;

	if (vhost_blk_ioctl_is(ioctl, VHOST_BLK_SET_BACKEND))
		return vhost_blk_set_backend(blk, argp);
	if (vhost_blk_ioctl_is(ioctl, VHOST_BLK_GET_CONFIG))
		return vhost_blk_get_config(blk, argp);

	switch (ioctl) {
	case VHOST_GET_FEATURES:
		mutex_lock(&blk->dev.mutex);
		features = vhost_blk_features(blk);
		mutex_unlock(&blk->dev.mutex);
		if (copy_to_user(featurep, &features, sizeof(features)))
			return -EFAULT;
		return 0;
	case VHOST_SET_FEATURES:
		if (copy_from_user(&features, featurep, sizeof(features)))
			return -EFAULT;
		return vhost_blk_set_features(blk, features);
	case VHOST_RESET_OWNER:
		return vhost_blk_reset_owner(blk);
	case VHOST_BLK_SET_BATCH_DELAY:
		return vhost_blk_set_delay(blk, argp, VHOST_BLK_BATCH_DELAY_MAX,
					   &blk->batch_delay_us);
	case VHOST_BLK_SET_CAPACITY:
		return vhost_blk_set_capacity(blk, argp);
	case VHOST_BLK_SET_IRQ_DELAY:
		return vhost_blk_set_delay(blk, argp, VHOST_BLK_IRQ_DELAY_MAX,
					   &blk->irq_delay_us);
#ifdef VHOST_NEW_WORKER
	case VHOST_NEW_WORKER:
	case VHOST_FREE_WORKER:
	case VHOST_ATTACH_VRING_WORKER:
	case VHOST_GET_VRING_WORKER:
		mutex_lock(&blk->dev.mutex);
		r = vhost_worker_ioctl(&blk->dev, ioctl, argp);
		mutex_unlock(&blk->dev.mutex);
		return r;
#endif
	default:
		mutex_lock(&blk->dev.mutex);
		r = vhost_dev_ioctl(&blk->dev, ioctl, argp);
		if (r == -ENOIOCTLCMD)
			r = vhost_vring_ioctl(&blk->dev, ioctl, argp);
		mutex_unlock(&blk->dev.mutex);
		return r;
	}
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
	int ret;

	BUILD_BUG_ON((u64)VHOST_BLK_SEG_MAX * VHOST_BLK_SIZE_MAX > MAX_RW_COUNT);
	/* vhost_blk_req.in_first and .in_num index iov[]. */
	BUILD_BUG_ON(VHOST_BLK_IOV_MAX > U8_MAX);
	vhost_blk_max_inflight = clamp(vhost_blk_max_inflight, 1U, 1024U);
	ret = vhost_blk_req_init();
	if (ret)
		return ret;
	vhost_blk_stats_init();
	ret = misc_register(&vhost_blk_misc);
	if (ret) {
		vhost_blk_stats_exit();
		vhost_blk_req_exit();
	}
	return ret;
}

static void __exit vhost_blk_exit(void)
{
	misc_deregister(&vhost_blk_misc);
	vhost_blk_stats_exit();
	vhost_blk_req_exit();
}

module_init(vhost_blk_init);
module_exit(vhost_blk_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Host kernel accelerator for virtio-blk");
MODULE_AUTHOR("The vhost-blk developers");
MODULE_VERSION("0.1.0");
