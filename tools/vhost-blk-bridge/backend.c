// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the backing file or block device.
 *
 * The path is resolved exactly once, at startup, to an O_PATH descriptor;
 * the descriptors used for I/O are opened from that one through
 * /proc/self/fd, so they are the same inode whatever happens to the path
 * later (renamed, replaced, a symlink switched).  Two of them: write-back
 * (plain) and write-through (O_DSYNC), chosen per session by the guest's
 * write-cache setting.  /dev/vhost-blk takes its own reference of the one
 * attached; the bridge keeps both for the next session.
 *
 * Both are opened O_NOATIME where the bridge may (it owns the file, or has
 * CAP_FOWNER): a guest's reads then leave the backend's access time alone,
 * and the kernel skips deciding, for every read, whether to update it.
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
	int fl = O_CLOEXEC | O_LARGEFILE | O_NOCTTY | O_NOATIME;

	fl |= be->readonly ? O_RDONLY : O_RDWR;
	if (!be->buffered)
		fl |= O_DIRECT;
	if (!wce)
		fl |= O_DSYNC;
	return fl;
}

/* Open the inode behind @pathfd (an O_PATH fd) again with @flags. */
static int reopen(const struct backend *be, int pathfd, int flags)
{
	char proc[64];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pathfd);
	fd = open(proc, flags);
	/* Not the owner, nor CAP_FOWNER: access times as for anyone. */
	if (fd < 0 && errno == EPERM && flags & O_NOATIME)
		fd = open(proc, flags & ~O_NOATIME);
	if (fd < 0) {
		int err = errno;

		log_msg("cannot open backend %s: %s%s", be->path,
			strerror(err),
			err == EINVAL && !be->buffered ?
			" (O_DIRECT not supported here? try --buffered)" :
			err == ENOENT ? " (is /proc mounted?)" : "");
		return -err;
	}
	return fd;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_rdev == b->st_rdev;
}

int fd_size(int fd, uint64_t *bytes)
{
	unsigned long long sz;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &sz) < 0)
			return -errno;
		*bytes = sz;
	} else {
		*bytes = st.st_size;
	}
	return 0;
}

int backend_refresh_size(struct backend *be)
{
	int ret = fd_size(be->fd_wb, &be->size);

	if (ret)
		log_msg("backend %s: size: %s", be->path, strerror(-ret));
	return ret ? -1 : 0;
}

int backend_open(struct backend *be, const char *path, bool readonly,
		 bool buffered)
{
	struct stat st, st2;
	int pathfd, fd;

	memset(be, 0, sizeof(*be));
	be->fd_wb = -1;
	be->fd_wt = -1;
	be->path = path;
	be->readonly = readonly;
	be->buffered = buffered;

	/* O_PATH: no open side effects before the type is known. */
	pathfd = open(path, O_PATH | O_CLOEXEC);
	if (pathfd < 0) {
		log_msg("backend %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(pathfd, &st) < 0) {
		log_msg("backend %s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		log_msg("backend %s: not a regular file or block device", path);
		goto fail;
	}
	be->is_bdev = S_ISBLK(st.st_mode);

	fd = reopen(be, pathfd, backend_flags(be, true));
	if (fd < 0)
		goto fail;
	be->fd_wb = fd;
	if (!readonly) {
		fd = reopen(be, pathfd, backend_flags(be, false));
		if (fd < 0)
			goto fail;
		be->fd_wt = fd;
	}
	close(pathfd);
	pathfd = -1;

	if (fstat(be->fd_wb, &st2) < 0 || !same_file(&st, &st2) ||
	    (be->fd_wt >= 0 &&
	     (fstat(be->fd_wt, &st2) < 0 || !same_file(&st, &st2)))) {
		log_msg("backend %s: reopened descriptors are not the same file",
			path);
		goto fail;
	}
	if (backend_refresh_size(be))
		goto fail;
	if (be->size < 512)
		log_msg("warning: backend %s is smaller than one sector", path);
	return 0;

fail:
	if (pathfd >= 0)
		close(pathfd);
	backend_close(be);
	return -1;
}

int backend_fd(const struct backend *be, bool wce)
{
	return wce || be->fd_wt < 0 ? be->fd_wb : be->fd_wt;
}

void backend_close(struct backend *be)
{
	if (be->fd_wb >= 0)
		close(be->fd_wb);
	if (be->fd_wt >= 0)
		close(be->fd_wt);
	be->fd_wb = -1;
	be->fd_wt = -1;
}
