// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module: the stand-in, in a stock 7.3 kernel, for the first patch
 * of make upstream's series, which exports bio_iov_iter_get_pages() from the
 * block layer.  7.3 keeps it to itself, so the series' vhost_blk.ko cannot be
 * loaded into the unpatched test kernel without it.  This exports a function
 * of that name and signature built from the shim that the out-of-tree
 * module uses on 7.3 (include/kcompat.h, from what 7.3 does export), so that
 * selftests/l2/21-upstream-series.sh can load and exercise the modules built
 * from the series.  Never installed.
 */
#define KCOMPAT_VHOST_BLK
#include <linux/module.h>
#include "kcompat.h"

#undef bio_iov_iter_get_pages

int bio_iov_iter_get_pages(struct bio *bio, struct iov_iter *iter,
			   unsigned int mem_align_mask,
			   unsigned int len_align_mask)
{
	return kcompat_bio_iov_iter_get_pages(bio, iter, mem_align_mask,
					      len_align_mask);
}
EXPORT_SYMBOL_GPL(bio_iov_iter_get_pages);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test only: bio_iov_iter_get_pages() exported for the upstream series' vhost_blk");
