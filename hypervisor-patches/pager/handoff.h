/*
 * What QEMU (libmemcanal-uffd.so or libmemcanal-uffd-plugin.so) sends
 * memcanal-pager over the Unix socket: this header, with the descriptors
 * [uffd, memfd] as SCM_RIGHTS.  The pager answers one byte once the
 * range is registered.
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

#define MEMCANAL_DEFAULT_BACKEND "memfd:"

/* Guest RAM as QEMU maps it (handoff.c, linked into both carriers). */
struct memcanal_ram {
	uint64_t base, len, offset, inode;
};

/* 1 and `ram` set once the largest shared mapping whose path contains
 * `backend` is mapped; 0 before. */
int memcanal_find_ram(const char *backend, struct memcanal_ram *ram);

/* Create a uffd for `ram`, send it and the memfd to the pager at `path`
 * and wait for its answer: the uffd, which the caller keeps open so that
 * a dead pager hangs the guest instead of zeroing its pages; -1 on error
 * (said on stderr). */
int memcanal_hand_off(const char *path, const struct memcanal_ram *ram);

/* Send `uffd` (already handed off and registered) and the memfd again:
 * a pager taking over from one that died listens on `path`.  0 once it
 * answered, -1 (errno set) if no pager listens there or it refused. */
int memcanal_hand_over(const char *path, const struct memcanal_ram *ram,
		       int uffd);

#endif
