// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper for virtio_blk_bio (selftests/virtio_blk_bio/hibernate-guest.sh):
 * a kernel thread, which the freezer leaves running, that reads the first
 * 4 KiB of one disk over and over while the system hibernates, so that I/O
 * reaches the driver between its ->freeze and its ->restore as a stacked
 * driver's worker would (user tasks are frozen then).
 *
 * poll=1: the reads are REQ_POLLED and the thread polls for them; after each
 * read it polls the previous one again too, as io_uring's iopoll may poll a
 * bio another CPU already completed: that reaches the driver's ->poll while
 * the disk is frozen.
 *
 * Loaded with disk=/dev/vdX [poll=1]; the counts are read back from the
 * module's parameters ok, failed and polls; rmmod stops the thread.
 */
#include <linux/module.h>
#include <linux/kthread.h>
#include <linux/blkdev.h>
#include <linux/bio.h>
#include <linux/delay.h>
#include <linux/fs.h>

static char *disk;
module_param(disk, charp, 0444);
MODULE_PARM_DESC(disk, "The disk to read (/dev/vdX)");
static bool poll;
module_param(poll, bool, 0444);
MODULE_PARM_DESC(poll, "Polled reads (REQ_POLLED), polled again once done");
static unsigned int ok, failed, polls;
module_param(ok, uint, 0444);
MODULE_PARM_DESC(ok, "Reads that succeeded");
module_param(failed, uint, 0444);
MODULE_PARM_DESC(failed, "Reads that failed");
module_param(polls, uint, 0444);
MODULE_PARM_DESC(polls, "Calls of bio_poll()");

static struct file *bdev_file;
static struct block_device *bdev;
static struct task_struct *thread;
static struct page *page;

static void pm_io_end(struct bio *bio)
{
	atomic_t *done = bio->bi_private;

	if (bio->bi_status)
		WRITE_ONCE(failed, failed + 1);
	else
		WRITE_ONCE(ok, ok + 1);
	atomic_set_release(done, 1);
	bio_put(bio);
}

static void pm_io_poll(struct bio *bio)
{
	bio_poll(bio, NULL, 0);
	WRITE_ONCE(polls, polls + 1);
}

static int pm_io_fn(void *unused)
{
	blk_opf_t opf = REQ_OP_READ | (poll ? REQ_POLLED : 0);
	struct bio *prev = NULL, *bio;
	atomic_t done;

	while (!kthread_should_stop()) {
		bio = bio_alloc(bdev, 1, opf, GFP_KERNEL);
		__bio_add_page(bio, page, PAGE_SIZE, 0);
		bio->bi_iter.bi_sector = 0;
		bio->bi_end_io = pm_io_end;
		bio->bi_private = &done;
		atomic_set(&done, 0);
		/* kept after its completion, to be polled again */
		bio_get(bio);
		submit_bio(bio);
		while (!atomic_read_acquire(&done)) {
			if (poll) {
				pm_io_poll(bio);
				if (prev)
					pm_io_poll(prev);
			}
			usleep_range(200, 400);
		}
		if (prev)
			bio_put(prev);
		prev = bio;
		usleep_range(200, 400);
	}
	if (prev)
		bio_put(prev);
	return 0;
}

static int __init pm_io_init(void)
{
	int err;

	if (!disk)
		return -EINVAL;
	page = alloc_page(GFP_KERNEL);
	if (!page)
		return -ENOMEM;
	/* opened as a file: the same calls on every kernel */
	bdev_file = filp_open(disk, O_RDONLY, 0);
	err = PTR_ERR_OR_ZERO(bdev_file);
	if (err)
		goto free_page;
	bdev = I_BDEV(bdev_file->f_mapping->host);
	thread = kthread_run(pm_io_fn, NULL, "vbb_pm_io");
	err = PTR_ERR_OR_ZERO(thread);
	if (!err)
		return 0;
	filp_close(bdev_file, NULL);
free_page:
	__free_page(page);
	return err;
}

static void __exit pm_io_exit(void)
{
	kthread_stop(thread);
	filp_close(bdev_file, NULL);
	__free_page(page);
}

module_init(pm_io_init);
module_exit(pm_io_exit);
MODULE_DESCRIPTION("virtio_blk_bio test helper: I/O from a kernel thread across hibernation");
MODULE_LICENSE("GPL");
