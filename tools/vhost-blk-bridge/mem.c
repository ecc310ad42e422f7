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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"

void mem_unmap(struct mem_table *mt)
{
	unsigned int i;

	for (i = 0; i < mt->nregions; i++) {
		if (mt->r[i].map)
			munmap(mt->r[i].map, mt->r[i].map_len);
	}
	memset(mt, 0, sizeof(*mt));
}

static bool overflows(uint64_t a, uint64_t b)
{
	return a + b < a;
}

/* A memfd or a regular file that holds [offset, offset + size). */
static bool fd_is_memory(unsigned int i, int fd, uint64_t offset,
			 uint64_t size)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		log_msg("memory region %u: fstat: %s", i, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		log_msg("memory region %u: the fd is not a memfd or regular file (mode 0%o)",
			i, (unsigned int)(st.st_mode & S_IFMT));
		return false;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < offset + size) {
		log_msg("memory region %u: the fd holds %lld bytes, the region ends at 0x%llx",
			i, (long long)st.st_size,
			(unsigned long long)(offset + size));
		return false;
	}
	return true;
}

int mem_map(struct mem_table *dst, const struct mem_table *src,
	    const int *fds)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned int i, j;

	memset(dst, 0, sizeof(*dst));
	if (src->nregions > MEM_MAX_REGIONS)
		return -EINVAL;
	for (i = 0; i < src->nregions; i++) {
		const struct mem_region *s = &src->r[i];
		struct mem_region *d = &dst->r[i];
		void *p;

		if (!s->size || overflows(s->gpa, s->size) ||
		    overflows(s->qva, s->size) ||
		    overflows(s->mmap_offset, s->size) ||
		    (s->gpa | s->size) & (pg - 1)) {
			log_msg("memory region %u invalid (gpa 0x%llx size 0x%llx qva 0x%llx off 0x%llx)",
				i, (unsigned long long)s->gpa,
				(unsigned long long)s->size,
				(unsigned long long)s->qva,
				(unsigned long long)s->mmap_offset);
			goto fail_inval;
		}
		for (j = 0; j < i; j++) {
			const struct mem_region *o = &src->r[j];

			if (s->gpa < o->gpa + o->size &&
			    o->gpa < s->gpa + s->size) {
				log_msg("memory regions %u and %u overlap", j, i);
				goto fail_inval;
			}
		}
		if (!fd_is_memory(i, fds[i], s->mmap_offset, s->size))
			goto fail_inval;
		*d = *s;
		d->map_len = s->mmap_offset + s->size;
		p = mmap(NULL, d->map_len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_NORESERVE, fds[i], 0);
		if (p == MAP_FAILED) {
			int err = errno;

			log_msg("mmap of memory region %u (0x%zx bytes): %s",
				i, d->map_len, strerror(err));
			d->map = NULL;
			dst->nregions = i;
			mem_unmap(dst);
			return -err;
		}
		d->map = p;
		d->host = (uint8_t *)p + s->mmap_offset;
		dst->nregions = i + 1;
		log_dbg("region %u: gpa 0x%llx size 0x%llx qva 0x%llx -> %p", i,
			(unsigned long long)d->gpa, (unsigned long long)d->size,
			(unsigned long long)d->qva, (void *)d->host);
	}
	return 0;

fail_inval:
	mem_unmap(dst);
	return -EINVAL;
}

void *mem_qva_to_host(const struct mem_table *mt, uint64_t qva, uint64_t len)
{
	unsigned int i;

	if (!len || overflows(qva, len))
		return NULL;
	for (i = 0; i < mt->nregions; i++) {
		const struct mem_region *r = &mt->r[i];

		if (qva >= r->qva && qva - r->qva < r->size &&
		    len <= r->size - (qva - r->qva))
			return r->host + (qva - r->qva);
	}
	return NULL;
}
