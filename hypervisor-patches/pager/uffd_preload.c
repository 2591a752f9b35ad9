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
 * until the largest shared mapping of a memfd appears (the RAM backend),
 * finds that memfd among our descriptors by inode, creates the uffd and
 * sends base, length, offset and [uffd, memfd] to the pager with
 * SCM_RIGHTS.
 *
 * The shim keeps its copy of the uffd open for QEMU's lifetime: if the
 * pager dies, guest accesses to pages it dropped hang (waiting for a
 * pager to come back) instead of reading zeros.  Every RESEND_MS it
 * offers the same uffd to a pager listening on the socket again: one
 * started to take over (memcanal-pager --state).
 *
 * MEMCANAL_PAGER_BACKEND (default "memfd:") is the text the mapping's
 * path must contain.  Messages go to stderr, prefixed "memcanal-uffd:".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "handoff.h"

#define POLL_MS 5
#define GIVE_UP_S 120
#define RESEND_MS 200

static void *handoff_thread(void *arg)
{
	const char *path = getenv("MEMCANAL_PAGER_SOCKET");
	const char *name = getenv("MEMCANAL_PAGER_BACKEND");
	struct timespec pause = { 0, POLL_MS * 1000000L };
	struct timespec resend = { 0, RESEND_MS * 1000000L };
	struct memcanal_ram ram = { 0 };
	int tries;

	if (!name || !*name)
		name = MEMCANAL_DEFAULT_BACKEND;
	for (tries = 0; !memcanal_find_ram(name, &ram); tries++) {
		if (tries * POLL_MS > GIVE_UP_S * 1000) {
			fprintf(stderr, "memcanal-uffd: no shared mapping "
				"of %s appeared\n", name);
			return NULL;
		}
		nanosleep(&pause, NULL);
	}
	/* The uffd stays open on purpose: see the header comment.  The
	 * pager unlinks its socket once it has it; a pager listening there
	 * again is taking over from one that died: it gets the same uffd. */
	for (int uffd = memcanal_hand_off(path, &ram); uffd >= 0;) {
		nanosleep(&resend, NULL);
		if (!memcanal_hand_over(path, &ram, uffd))
			fprintf(stderr, "memcanal-uffd: handed over again to "
				"%s\n", path);
	}
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
