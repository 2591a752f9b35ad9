/*
 * libmemcanal-uffd-plugin.so: hand QEMU's guest RAM to memcanal-pager,
 * as a TCG plugin.
 *
 *   qemu-system-x86_64 -accel tcg \
 *     -plugin libmemcanal-uffd-plugin.so,socket=/run/x.sock[,backend=memfd:] \
 *     -object memory-backend-memfd,id=mem,size=256M,share=on \
 *     -machine q35,memory-backend=mem ...
 *
 * QEMU loads plugins after the memory backend is mapped and before any
 * vCPU exists, so qemu_plugin_install does the handoff (handoff.c) at
 * once and waits for the pager: the range is registered before the
 * guest runs.  A plugin failing to install stops QEMU, so a guest meant
 * to be paged never runs unpaged.  Then a thread of its own answers the
 * pager's zap requests (access sampling) and, once the pager is gone,
 * offers the uffd to the next one, as the shim does (handoff.c).  TCG
 * only; the LD_PRELOAD shim (uffd_preload.c) is the carrier for KVM.
 *
 * The uffd stays open for QEMU's lifetime: if the pager dies, guest
 * accesses to pages it dropped hang instead of reading zeros.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <qemu-plugin.h>

#include "handoff.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* What the serving thread needs: it outlives qemu_plugin_install. */
static struct {
	char socket[108];
	struct memcanal_ram ram;
	int uffd, conn;
} handed;

static void *serve(void *arg)
{
	memcanal_serve(handed.socket, &handed.ram, handed.uffd, handed.conn);
	return NULL;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *socket = NULL, *backend = MEMCANAL_DEFAULT_BACKEND;
	pthread_attr_t attr;
	pthread_t thread;
	int i, failed;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "socket=", 7))
			socket = argv[i] + 7;
		else if (!strncmp(argv[i], "backend=", 8))
			backend = argv[i] + 8;
		else {
			fprintf(stderr, "memcanal-uffd: unknown argument %s\n",
				argv[i]);
			return -1;
		}
	}
	if (!socket || !info->system_emulation) {
		fprintf(stderr, "memcanal-uffd: needs socket=PATH and "
			"system emulation\n");
		return -1;
	}
	if (!memcanal_find_ram(backend, &handed.ram)) {
		fprintf(stderr, "memcanal-uffd: no shared mapping of %s "
			"(-object memory-backend-memfd,share=on)\n", backend);
		return -1;
	}
	snprintf(handed.socket, sizeof(handed.socket), "%s", socket);
	handed.uffd = memcanal_hand_off(socket, &handed.ram, &handed.conn,
					    0);
	if (handed.uffd < 0)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	failed = pthread_create(&thread, &attr, serve, NULL);
	pthread_attr_destroy(&attr);
	if (failed)
		fprintf(stderr, "memcanal-uffd: no thread: the pager cannot "
			"sample, nor be taken over\n");
	return 0;
}
