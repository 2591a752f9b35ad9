/*
 * What QEMU (libmemcanal-uffd.so or libmemcanal-uffd-plugin.so) sends
 * memcanal-pager over the Unix socket: this header, with the descriptors
 * [uffd, memfd_0, ..., memfd_{n-1}] as SCM_RIGHTS (one memfd per region,
 * every memory backend: each NUMA cell, any size).  A relay (the agent's
 * handoff listener) forwards it with its accepted connection from QEMU
 * appended as the last descriptor.  The pager answers one byte once the
 * regions are registered, and then keeps QEMU's connection to send it
 * zap requests (below).
 */
#ifndef MEMCANAL_HANDOFF_H
#define MEMCANAL_HANDOFF_H

#include <stdint.h>

#define MEMCANAL_HANDOFF_MAGIC 0x6d6375666664320aULL /* "mcuffd2\n" */
#define MEMCANAL_MAX_REGIONS 8

/* Guest RAM of one backend in QEMU's memory map; offset in its memfd. */
struct memcanal_region {
	uint64_t base, len, offset;
};

struct memcanal_handoff {
	uint64_t magic;
	uint64_t pid;       /* QEMU (receivers trust SO_PEERCRED instead) */
	uint64_t nregions;  /* 1..MEMCANAL_MAX_REGIONS, QEMU's address order */
	struct memcanal_region region[MEMCANAL_MAX_REGIONS]; /* unused: 0 */
};

/*
 * A zap request (pager -> QEMU): this header, then nruns pairs
 * {uint64_t first, count} of page indexes (regions concatenated in
 * order).  QEMU's handoff thread madvise(MADV_DONTNEED)s each run in its
 * mapping, so the next access faults (MINOR: the memfd keeps the data),
 * and answers struct memcanal_zapped: pages zapped, the first error
 * (-errno, 0 if none), the time it took.
 */
#define MEMCANAL_ZAP_MAGIC 0x70617a6c63656d0aULL
struct memcanal_zap {
	uint64_t magic, nruns;
};
struct memcanal_zapped {
	uint64_t magic, pages;
	int64_t error;
	uint64_t ns;
};

#define MEMCANAL_DEFAULT_BACKEND "memfd:"

/* Guest RAM as QEMU maps it (handoff.c, linked into both carriers). */
struct memcanal_ram {
	uint64_t nregions;
	struct memcanal_region region[MEMCANAL_MAX_REGIONS];
	uint64_t inode[MEMCANAL_MAX_REGIONS];
};

/* The regions (every shared mapping of at least 2 MiB whose path
 * contains `backend`, address order) into `ram`; returns how many. */
int memcanal_find_ram(const char *backend, struct memcanal_ram *ram);

/* Create a uffd for `ram`, send it and the memfds to the pager at
 * `path` and wait for its answer.  Returns the uffd, which the caller
 * keeps open so that a dead pager hangs the guest instead of zeroing its
 * pages, with *conn the pager's connection (serve it with
 * memcanal_serve); -1 on error (said on stderr).  With `wait`, nothing
 * listening on `path` yet is no error: the offer is made again every
 * 200 ms until something listens (an agent that learns of a guest only
 * once it runs, as nova's are, listens within a report interval). */
int memcanal_hand_off(const char *path, const struct memcanal_ram *ram,
		      int *conn, int wait);

/* Send `uffd` (already handed off and registered) and the memfds again:
 * a pager taking over from one that died listens on `path`.  The
 * connection once it answered, -1 (errno set) if no pager listens there
 * or it refused. */
int memcanal_hand_over(const char *path, const struct memcanal_ram *ram,
		       int uffd);

/* For ever: answer the pager's zap requests on `conn`; when it closes
 * (the pager died or quit), offer `uffd` every 200 ms on `path` to a
 * pager taking over, and serve that one. */
void memcanal_serve(const char *path, const struct memcanal_ram *ram,
		    int uffd, int conn);

#endif
