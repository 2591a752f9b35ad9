/*
 * memcanal-pager's side of QEMU (guest.c): receiving the handoff (from
 * the shim, or relayed by the agent), taking it out of a running QEMU
 * after a pager died, answering it, and zap requests to the shim.
 */
#ifndef GUEST_H
#define GUEST_H

#include <stdint.h>
#include <sys/types.h>

#include "handoff.h"

struct guest {
	struct memcanal_handoff h;          /* the regions */
	int uffd, memfd[MEMCANAL_MAX_REGIONS];
	int shim;       /* QEMU's connection (zap requests), or -1 */
	int relay;      /* the relay's connection, to answer, or -1 */
	pid_t pid;      /* QEMU: SO_PEERCRED, or the state file's */
};

/* A Unix socket listening on path (replaced if it exists), or -1. */
int guest_listen(const char *path);

/*
 * Accept one connection on `s` within timeout_ms (-1: no limit) and
 * receive a handoff into g: 1, 0 on timeout, -1 if the connection did
 * not carry a handoff (it is closed; listen on).
 */
int guest_accept(int s, int timeout_ms, struct guest *g);

/*
 * The registration a state file describes, if its QEMU still runs: the
 * uffd and every region's memfd duplicated out of it (pidfd_getfd,
 * root), found among its descriptors by kind and by inode.  0, or -1.
 */
int guest_recover(const char *state_path, struct guest *g);

/* Tell QEMU (and the relay) the regions are registered.  0, or -1 if
 * QEMU's connection is gone. */
int guest_answer(struct guest *g);

/* pager_zap_fn on the shim's connection: arg is the struct guest.  A
 * broken connection is closed (the shim then offers its uffd to the
 * next pager) and every later zap fails at once. */
int guest_zap(void *arg, const uint64_t *runs, size_t nruns,
	      uint64_t *zapped);

#endif
