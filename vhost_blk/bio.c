// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk direct bios: a read or write on a block device opened with
 * O_DIRECT goes to the device as one bio built on the guest's pages, the
 * bio and its vector table inside the request, instead of through the
 * block device file's ->read_iter/->write_iter (its size checks, its own
 * bio from a mempool, the kiocb's completion on top of the bio's).
 *
 * Only what the file path would do the same way takes it: no page of the
 * range in the device's page cache (the file path writes back and
 * invalidates those around direct I/O; udev's probes leave some at the
 * ends of a new device), the range inside the device and aligned to its
 * logical block size, buffers aligned as the device wants them, at most
 * VHOST_BLK_BIO_VECS pages, and for a write a device neither read-only
 * nor a swap device now; anything else falls back to the file path, which
 * answers as it does, before a bio is submitted.  The I/O accounting, the
 * write hint and the file times are the file path's too.  The guest's
 * pages stay pinned until the queue's worker retires the request, which
 * marks a read's pages dirty there, and after a write drops what a
 * buffered reader cached of the range meanwhile (both may sleep; a bio
 * completes in interrupt context).
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/task_io_accounting_ops.h>

#include "blk.h"

static bool vhost_blk_direct_bio = true;
module_param_named(direct_bio, vhost_blk_direct_bio, bool, 0644);
MODULE_PARM_DESC(direct_bio,
		 "Submit bios directly to block device backends opened with O_DIRECT, as they are attached (default on)");

/* At attach: may @be take direct bios? */
bool vhost_blk_bio_usable(struct vhost_blk_backend_file *be)
{
	return be->bdev && be->direct && READ_ONCE(vhost_blk_direct_bio);
}

static void vhost_blk_bio_end_io(struct bio *bio)
{
	struct vhost_blk_req *req = container_of(bio, struct vhost_blk_req,
						 bio);

	vhost_blk_rw_end(req, bio->bi_status ?
			 blk_status_to_errno(bio->bi_status) : (long)req->len);
}

/*
 * Submit @req (IN or OUT, its length checked against the capacity) as a
 * bio on @iter.  False, with @iter as it was, if the file path must do it.
 * After init_sync_kiocb() and rw_verify_area() on req->iocb.
 */
bool vhost_blk_bio_submit(struct vhost_blk_req *req, struct iov_iter *iter)
{
	struct address_space *mapping = req->be->file->f_mapping;
	struct block_device *bdev = I_BDEV(mapping->host);
	loff_t pos = req->sector << SECTOR_SHIFT;
	struct bio *bio = &req->bio;
	struct iov_iter saved = *iter;
	blk_opf_t opf = REQ_OP_READ;

	/* The device shrank under the capacity: the file path's answer. */
	if (pos + req->len > bdev_nr_bytes(bdev))
		return false;
	if (pos & (bdev_logical_block_size(bdev) - 1))
		return false;
	if (READ_ONCE(mapping->nrpages) &&
	    filemap_range_has_page(mapping, pos, pos + req->len - 1))
		return false;
	if (iov_iter_npages(iter, VHOST_BLK_BIO_VECS + 1) > VHOST_BLK_BIO_VECS)
		return false;
	if (req->op == VHOST_BLK_OP_OUT) {
		/* The file path refuses these, each time. */
		if (bdev_read_only(bdev) || IS_SWAPFILE(mapping->host))
			return false;
		/* The file path dates the write first, and fails as this did. */
		if (file_update_time(req->be->file))
			return false;
		/* As the file path writes with O_DIRECT (and O_DSYNC). */
		opf = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE;
		if (iocb_is_dsync(&req->iocb))
			opf |= REQ_FUA;
	}
#ifdef VHOST_BLK_FAULT_INJECTION
	vhost_blk_fault_bio_delay();
#endif
	bio_init(bio, bdev, req->bvec, VHOST_BLK_BIO_VECS, opf);
	bio->bi_iter.bi_sector = req->sector;
	bio->bi_end_io = vhost_blk_bio_end_io;
	/*
	 * All of it or nothing: a bio that took part of the pages goes back,
	 * and so does a buffer the device cannot take as it is (-EINVAL).
	 */
	if (bio_iov_iter_get_pages(bio, iter, bdev_dma_alignment(bdev),
				   bdev_logical_block_size(bdev) - 1) ||
	    iov_iter_count(iter)) {
		bio_release_pages(bio, false);
		bio_uninit(bio);
		*iter = saved;
		return false;
	}
	req->bio_pinned = true;
	req->bvq->stats.bios++;
	/*
	 * What else the file path does: a write is charged to the worker here
	 * (submit_bio() charges reads) and carries the inode's write hint; a
	 * read updates the access time.
	 */
	if (req->op == VHOST_BLK_OP_OUT) {
#ifdef _LINUX_RW_HINT_H
		/* Bios carry the inode's write hint again since 6.9. */
		bio->bi_write_hint = file_inode(req->be->file)->i_write_hint;
#endif
		task_io_account_write(req->len);
	} else {
		file_accessed(req->be->file);
	}
	submit_bio(bio);
	return true;
}

/* Has the read @bio a page not marked dirty yet? */
static bool vhost_blk_bio_clean(struct bio *bio)
{
	struct folio_iter fi;

	bio_for_each_folio_all(fi, bio)
		if (!folio_test_dirty(fi.folio))
			return true;
	return false;
}

/*
 * A write reached the device: drop what the page cache holds of its range,
 * as the file path does after an O_DIRECT write.  A buffered reader may
 * have cached the old data after the check at submission.  A page that
 * cannot go (-EBUSY: mapped and being written to) stays, as it would
 * there.  May sleep.
 */
static void vhost_blk_bio_invalidate(struct vhost_blk_req *req)
{
	struct address_space *mapping = req->be->file->f_mapping;
	loff_t pos = req->sector << SECTOR_SHIFT;

	if (!req->len || !READ_ONCE(mapping->nrpages))
		return;
	invalidate_inode_pages2_range(mapping, pos >> PAGE_SHIFT,
				      (pos + req->len - 1) >> PAGE_SHIFT);
}

/*
 * The request is retired or dropped: its pages go back, a read's marked
 * dirty (each under its folio lock) unless they all are already, as guest
 * memory mostly is; after a write the device's page cache of the range is
 * dropped.  May sleep.
 */
void vhost_blk_bio_release(struct vhost_blk_req *req)
{
	struct bio *bio = &req->bio;

	if (req->op == VHOST_BLK_OP_OUT)
		vhost_blk_bio_invalidate(req);

	bio_release_pages(bio, req->op == VHOST_BLK_OP_IN &&
			  vhost_blk_bio_clean(bio));
	bio_uninit(bio);
	req->bio_pinned = false;
}
