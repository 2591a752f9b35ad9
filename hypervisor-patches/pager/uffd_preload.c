/*
 * libmemcanal-uffd.so: hand QEMU's guest RAM to memcanal-pager.
 *
 *   MEMCANAL_PAGER_SOCKET=/run/x.sock LD_PRELOAD=libmemcanal-uffd.so \
 *     qemu-system-x86_64 -machine q35,memory-backend=mem \
 *       -object memory-backend-memfd,id=mem,size=256M,share=on ...
 *
 * A userfaultfd is bound to the memory map of the process that creates
 * it, so it must be made inside QEMU; an LD_PRELOAD shim does that under
 * any accelerator, with no QEMU patch.  A thread polls /proc/self/maps
 * until the shared mappings of memfds (the RAM backends: every NUMA
 * cell) have appeared and stayed the same for SETTLE_MS, finds those
 * memfds among our descriptors by inode, creates the uffd and sends the
 * regions and [uffd, memfds...] to the pager with SCM_RIGHTS.  The
 * thread then answers the pager's zap requests (access sampling) on the
 * same connection.
 *
 * The shim keeps its copy of the uffd open for QEMU's lifetime: if the
 * pager dies, guest accesses to pages it dropped hang (waiting for a
 * pager to come back) instead of reading zeros.  Once the pager's
 * connection closes, the shim offers the same uffd every 200 ms to a
 * pager listening on the socket again: one started to take over
 * (memcanal-pager --state).
 *
 * MEMCANAL_PAGER_BACKEND (default "memfd:") is the text the mappings'
 * paths must contain.  Messages go to stderr, prefixed "memcanal-uffd:".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handoff.h"

#define POLL_MS 5
#define GIVE_UP_S 120
/* QEMU maps its backends one after the other, before machine init:
 * once none appeared for this long, all have. */
#define SETTLE_MS 100

/* 1 once `ram` holds regions that stayed the same for SETTLE_MS. */
static int settled(const char *name, struct memcanal_ram *ram, int *stable)
{
	struct memcanal_ram now;

	if (!memcanal_find_ram(name, &now) || memcmp(&now, ram, sizeof(now))) {
		*ram = now;
		*stable = 0;
		return 0;
	}
	return ++*stable * POLL_MS >= SETTLE_MS;
}

static void *handoff_thread(void *arg)
{
	const char *path = getenv("MEMCANAL_PAGER_SOCKET");
	const char *name = getenv("MEMCANAL_PAGER_BACKEND");
	struct timespec pause = { 0, POLL_MS * 1000000L };
	struct memcanal_ram ram = { 0 };
	int tries, stable = 0, uffd, conn;

	if (!name || !*name)
		name = MEMCANAL_DEFAULT_BACKEND;
	for (tries = 0; !settled(name, &ram, &stable); tries++) {
		if (tries * POLL_MS > GIVE_UP_S * 1000) {
			fprintf(stderr, "memcanal-uffd: no shared mapping "
				"of %s appeared\n", name);
			return NULL;
		}
		nanosleep(&pause, NULL);
	}
	uffd = memcanal_hand_off(path, &ram, &conn, 1);
	if (uffd >= 0)
		memcanal_serve(path, &ram, uffd, conn);
	return NULL;
}

__attribute__((constructor)) static void memcanal_uffd_init(void)
{
	const char *path = getenv("MEMCANAL_PAGER_SOCKET");
	pthread_attr_t attr;
	pthread_t thread;

	if (!path || !*path)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, handoff_thread, NULL))
		fprintf(stderr, "memcanal-uffd: no thread\n");
	pthread_attr_destroy(&attr);
}
