// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_test: plays the guest against /dev/vhost-blk, no VM needed.
 *
 *   vhost_blk_test [BACKEND OPTIONS]                     functional + hostile
 *   vhost_blk_test [BACKEND OPTIONS] --functional|--hostile
 *   vhost_blk_test [BACKEND OPTIONS] --fuzz SEED COUNT
 *   vhost_blk_test [BACKEND OPTIONS] --flood SECONDS    a worker under a flood
 *   vhost_blk_test --file PATH_ON_EXT4 --context         owner context, durability
 *   vhost_blk_test --bdev SLOW_DEV --direct --nodata --owner-killed
 *                   the owner killed with reads in flight (a backend whose
 *                   reads take a second: null_blk irqmode=2)
 *   vhost_blk_test --bdev SLOW_DEV --direct --nodata --irq-moderation
 *                   held interrupts on the same slow backend
 *   vhost_blk_test [BACKEND OPTIONS] --load [LOAD OPTIONS]   (see --load --help)
 *   vhost_blk_test [BACKEND OPTIONS] --review wz-nounmap|long-chain|zoned|irq-release|bio-stale
 *                   the review's defects (issue 47, review.c)
 *
 * Backend options:
 *   --file PATH     backing file (created/extended to --size; default
 *                   /tmp/vhost_blk_test.img)
 *   --bdev PATH     backing block device (its data is overwritten)
 *   --size MIB      size of a created backing file (default 64)
 *   --direct        open the backend with O_DIRECT
 *   --nodata        the backend does not keep data (null_blk): skip compares
 * Output is TAP; the exit status is 0 when every test passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "vbt.h"

struct vbt_cfg cfg = {
	.path = "/tmp/vhost_blk_test.img",
	.size = 64ULL << 20,
};

static void usage(void)
{
	fprintf(stderr,
		"usage: vhost_blk_test [--file PATH|--bdev PATH] [--size MIB] [--direct] [--nodata]\n"
		"                      [--functional|--hostile|--fuzz SEED COUNT|--flood SECONDS|\n"
		"                       --context|--owner-killed|--irq-moderation|--load ...|\n"
		"                       --review wz-nounmap|long-chain|zoned|irq-release|bio-stale]\n");
	exit(2);
}

static int prepare_backend(void)
{
	struct stat st;
	int fd;

	if (cfg.bdev) {
		uint64_t sz;

		fd = open(cfg.path, O_RDWR);
		if (fd < 0 || ioctl(fd, BLKGETSIZE64, &sz)) {
			perror(cfg.path);
			return -1;
		}
		cfg.size = sz & ~511ULL;
		close(fd);
		return 0;
	}
	fd = open(cfg.path, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		perror(cfg.path);
		return -1;
	}
	if ((uint64_t)st.st_size != cfg.size && ftruncate(fd, cfg.size)) {
		perror("ftruncate");
		return -1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	enum { ALL, FUNC, HOSTILE, FUZZ, FLOOD, CONTEXT, KILLED, MODERATE, LOAD,
	       REVIEW } mode = ALL;
	const char *review = NULL;
	unsigned long long seed = 1, count = 100, seconds = 25;
	struct vbt_mem mem;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--file") && i + 1 < argc) {
			cfg.path = argv[++i];
		} else if (!strcmp(argv[i], "--bdev") && i + 1 < argc) {
			cfg.path = argv[++i];
			cfg.bdev = true;
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			cfg.size = strtoull(argv[++i], NULL, 0) << 20;
		} else if (!strcmp(argv[i], "--direct")) {
			cfg.direct = true;
		} else if (!strcmp(argv[i], "--nodata")) {
			cfg.nodata = true;
		} else if (!strcmp(argv[i], "-v")) {
			cfg.verbose++;
		} else if (!strcmp(argv[i], "--functional")) {
			mode = FUNC;
		} else if (!strcmp(argv[i], "--hostile")) {
			mode = HOSTILE;
		} else if (!strcmp(argv[i], "--fuzz") && i + 2 < argc) {
			mode = FUZZ;
			seed = strtoull(argv[++i], NULL, 0);
			count = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--flood") && i + 1 < argc) {
			mode = FLOOD;
			seconds = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--context")) {
			mode = CONTEXT;
		} else if (!strcmp(argv[i], "--owner-killed")) {
			mode = KILLED;
		} else if (!strcmp(argv[i], "--irq-moderation")) {
			mode = MODERATE;
		} else if (!strcmp(argv[i], "--review") && i + 1 < argc) {
			mode = REVIEW;
			review = argv[++i];
		} else if (!strcmp(argv[i], "--load")) {
			mode = LOAD;
			i++;
			break;
		} else {
			usage();
		}
	}
	if (prepare_backend())
		return 1;
	vbt_mem_init(&mem);
	tap_diag("backend %s (%s%s), %llu MiB", cfg.path,
		 cfg.bdev ? "block device" : "file", cfg.direct ? ", O_DIRECT" : "",
		 (unsigned long long)(cfg.size >> 20));

	switch (mode) {
	case LOAD:
		return vbt_load(&mem, argc - i, argv + i);
	case FUZZ:
		vbt_fuzz(&mem, seed, count);
		break;
	case FUNC:
		vbt_functional(&mem);
		break;
	case FLOOD:
		vbt_flood(&mem, seconds);
		break;
	case CONTEXT:
		vbt_context(&mem);
		break;
	case KILLED:
		vbt_owner_killed();
		break;
	case MODERATE:
		vbt_irq_moderation(&mem);
		break;
	case HOSTILE:
		vbt_hostile(&mem);
		break;
	case REVIEW:
		if (vbt_review(&mem, review))
			usage();
		break;
	default:
		vbt_functional(&mem);
		vbt_hostile(&mem);
		break;
	}
	return tap_done();
}
