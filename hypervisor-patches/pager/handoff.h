/*
 * What libmemcanal-uffd.so sends memcanal-pager over the Unix socket:
 * this header, with the descriptors [uffd, memfd] as SCM_RIGHTS.  The
 * pager answers one byte once the range is registered.
 */
#ifndef MEMCANAL_HANDOFF_H
#define MEMCANAL_HANDOFF_H

#include <stdint.h>

#define MEMCANAL_HANDOFF_MAGIC 0x6d6375666664310aULL /* "mcuffd1\n" */

struct memcanal_handoff {
	uint64_t magic;
	uint64_t pid;     /* QEMU */
	uint64_t base;    /* guest RAM in QEMU's memory map */
	uint64_t len;
	uint64_t offset;  /* of base in the memfd */
};

#endif
