// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the backing file or block device.
 *
 * The bridge opens the backend and hands the fd to /dev/vhost-blk, which
 * takes its own reference; the bridge keeps its fd to re-attach it on the
 * next ring start.  Write-through mode (guest cleared config.wce) is an
 * O_DSYNC reopen of the same path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"

static int backend_flags(const struct backend *be, bool wce)
{
	int fl = O_CLOEXEC | O_LARGEFILE;

	fl |= be->readonly ? O_RDONLY : O_RDWR;
	if (!be->buffered)
		fl |= O_DIRECT;
	if (!wce && !be->readonly)
		fl |= O_DSYNC;
	return fl;
}

static int backend_open_fd(struct backend *be, bool wce)
{
	int fd = open(be->path, backend_flags(be, wce));

	if (fd < 0) {
		int err = errno;

		log_msg("cannot open backend %s: %s%s", be->path,
			strerror(err),
			err == EINVAL && !be->buffered ?
			" (O_DIRECT not supported here? try --buffered)" : "");
		return -err;
	}
	return fd;
}

int backend_open(struct backend *be, const char *path, bool readonly,
		 bool buffered)
{
	struct stat st;
	int fd;

	memset(be, 0, sizeof(*be));
	be->fd = -1;
	be->path = path;
	be->readonly = readonly;
	be->buffered = buffered;
	be->wce = true;

	if (stat(path, &st) < 0) {
		log_msg("backend %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		log_msg("backend %s: not a regular file or block device", path);
		return -1;
	}
	fd = backend_open_fd(be, true);
	if (fd < 0)
		return -1;
	be->fd = fd;
	be->is_bdev = S_ISBLK(st.st_mode);
	if (be->is_bdev) {
		unsigned long long sz;

		if (ioctl(fd, BLKGETSIZE64, &sz) < 0) {
			log_msg("backend %s: BLKGETSIZE64: %s", path,
				strerror(errno));
			backend_close(be);
			return -1;
		}
		be->size = sz;
	} else {
		be->size = st.st_size;
	}
	if (be->size < 512)
		log_msg("warning: backend %s is smaller than one sector", path);
	return 0;
}

int backend_set_wce(struct backend *be, bool wce)
{
	int fd;

	if (wce == be->wce)
		return 0;
	fd = backend_open_fd(be, wce);
	if (fd < 0)
		return fd;
	close(be->fd);
	be->fd = fd;
	be->wce = wce;
	log_msg("write cache %s", wce ? "on (write-back)" :
		"off (write-through, O_DSYNC)");
	return 0;
}

void backend_close(struct backend *be)
{
	if (be->fd >= 0)
		close(be->fd);
	be->fd = -1;
}
