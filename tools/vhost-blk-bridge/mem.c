// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: guest memory regions.
 *
 * SET_MEM_TABLE brings one fd per region (QEMU's memfd RAM) with the
 * region's guest-physical address, size, QEMU virtual address and offset
 * in the fd.  Only a memfd or a regular file is accepted as guest memory
 * (no device node, pipe or socket: whatever a front-end sends, the kernel
 * reaches nothing but memory), and it must hold the whole region.  The
 * bridge maps each fd shared; /dev/vhost-blk then reaches
 * guest memory through these mappings (it runs in the bridge's mm), and
 * ring addresses, which QEMU gives in its own address space, are
 * translated into ours.
 *
 * The bridge itself never loads from these mappings: what it reads of guest
 * memory (a used index when a ring resumes) it reads through a copy of the
 * region's fd, which a front-end may shrink at any time without taking the
 * bridge down with SIGBUS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"

static void region_unmap(struct mem_region *r);

void mem_unmap(struct mem_table *mt)
{
	unsigned int i;

	for (i = 0; i < mt->nregions; i++)
		region_unmap(&mt->r[i]);
	memset(mt, 0, sizeof(*mt));
}

static bool overflows(uint64_t a, uint64_t b)
{
	return a + b < a;
}

bool fd_is_memory(const char *what, int fd, uint64_t end)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		log_msg("%s: fstat: %s", what, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		log_msg("%s: the fd is not a memfd or regular file (mode 0%o)",
			what, (unsigned int)(st.st_mode & S_IFMT));
		return false;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < end) {
		log_msg("%s: the fd holds %lld bytes, it must hold 0x%llx",
			what, (long long)st.st_size, (unsigned long long)end);
		return false;
	}
	return true;
}

static void region_unmap(struct mem_region *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
	r->map = NULL;
	r->fd = -1;
}

int mem_add(struct mem_table *mt, const struct mem_region *s, int fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned int i = mt->nregions, j;
	struct mem_region *d;
	char what[32];
	void *p;
	int err;

	if (i >= MEM_MAX_SLOTS) {
		log_msg("memory region %u: the table is full (%u regions)", i,
			MEM_MAX_SLOTS);
		return -ENOSPC;
	}
	if (!s->size || overflows(s->gpa, s->size) ||
	    overflows(s->qva, s->size) ||
	    overflows(s->mmap_offset, s->size) ||
	    (s->gpa | s->size) & (pg - 1)) {
		log_msg("memory region %u invalid (gpa 0x%llx size 0x%llx qva 0x%llx off 0x%llx)",
			i, (unsigned long long)s->gpa,
			(unsigned long long)s->size,
			(unsigned long long)s->qva,
			(unsigned long long)s->mmap_offset);
		return -EINVAL;
	}
	for (j = 0; j < i; j++) {
		const struct mem_region *o = &mt->r[j];

		if (s->gpa < o->gpa + o->size && o->gpa < s->gpa + s->size) {
			log_msg("memory regions %u and %u overlap", j, i);
			return -EINVAL;
		}
	}
	snprintf(what, sizeof(what), "memory region %u", i);
	if (!fd_is_memory(what, fd, s->mmap_offset + s->size))
		return -EINVAL;
	d = &mt->r[i];
	*d = *s;
	d->map = NULL;
	d->map_len = s->mmap_offset + s->size;
	d->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d->fd < 0) {
		err = errno;
		log_msg("memory region %u: dup: %s", i, strerror(err));
		return -err;
	}
	p = mmap(NULL, d->map_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		err = errno;
		log_msg("mmap of memory region %u (0x%zx bytes): %s",
			i, d->map_len, strerror(err));
		region_unmap(d);
		return -err;
	}
	d->map = p;
	d->host = (uint8_t *)p + s->mmap_offset;
	mt->nregions = i + 1;
	log_dbg("region %u: gpa 0x%llx size 0x%llx qva 0x%llx -> %p", i,
		(unsigned long long)d->gpa, (unsigned long long)d->size,
		(unsigned long long)d->qva, (void *)d->host);
	return 0;
}

int mem_map(struct mem_table *dst, const struct mem_table *src,
	    const int *fds)
{
	unsigned int i;
	int ret;

	memset(dst, 0, sizeof(*dst));
	for (i = 0; i < src->nregions; i++) {
		ret = mem_add(dst, &src->r[i], fds[i]);
		if (ret) {
			mem_unmap(dst);
			return ret;
		}
	}
	return 0;
}

int mem_take(struct mem_table *mt, const struct mem_region *which,
	     struct mem_region *out)
{
	unsigned int i;

	for (i = 0; i < mt->nregions; i++) {
		struct mem_region *r = &mt->r[i];

		if (r->gpa != which->gpa || r->size != which->size ||
		    r->qva != which->qva)
			continue;
		*out = *r;
		memmove(r, r + 1, (mt->nregions - i - 1) * sizeof(*r));
		mt->nregions--;
		return 0;
	}
	return -ENOENT;
}

void mem_region_unmap(struct mem_region *r)
{
	region_unmap(r);
}

static const struct mem_region *region_of(const struct mem_table *mt,
					  uint64_t qva, uint64_t len)
{
	unsigned int i;

	if (!len || overflows(qva, len))
		return NULL;
	for (i = 0; i < mt->nregions; i++) {
		const struct mem_region *r = &mt->r[i];

		if (qva >= r->qva && qva - r->qva < r->size &&
		    len <= r->size - (qva - r->qva))
			return r;
	}
	return NULL;
}

void *mem_qva_to_host(const struct mem_table *mt, uint64_t qva, uint64_t len)
{
	const struct mem_region *r = region_of(mt, qva, len);

	return r ? r->host + (qva - r->qva) : NULL;
}

int mem_read(const struct mem_table *mt, uint64_t qva, void *buf, size_t len)
{
	const struct mem_region *r = region_of(mt, qva, len);
	ssize_t n;

	if (!r)
		return -EFAULT;
	do {
		n = pread(r->fd, buf, len, r->mmap_offset + (qva - r->qva));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* Short: the front-end cut the fd below the region. */
	return (size_t)n == len ? 0 : -EFAULT;
}

uint64_t mem_log_bytes(const struct mem_table *mt)
{
	uint64_t end = 0, pages;
	unsigned int i;

	for (i = 0; i < mt->nregions; i++) {
		if (mt->r[i].gpa + mt->r[i].size > end)
			end = mt->r[i].gpa + mt->r[i].size;
	}
	pages = (end + 4095) / 4096;
	return (pages + 7) / 8;
}
