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
 * pager to come back) instead of reading zeros.
 *
 * MEMCANAL_PAGER_BACKEND (default "memfd:") is the text the mapping's
 * path must contain.  Messages go to stderr, prefixed "memcanal-uffd:".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "handoff.h"

#define POLL_MS 5
#define GIVE_UP_S 120

struct ram {
	uint64_t base, len, offset, inode;
};

/* The largest rw-s mapping whose path contains `name`; 0 if none yet. */
static int find_ram(const char *name, struct ram *ram)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[4096];
	int found = 0;

	if (!maps)
		return 0;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end, off, ino;
		char perms[8];
		int path = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*x:%*x %lu %n", &start,
			   &end, perms, &off, &ino, &path) < 5 || !path)
			continue;
		if (strcmp(perms, "rw-s") || !strstr(line + path, name))
			continue;
		if (end - start > ram->len) {
			*ram = (struct ram){ start, end - start, off, ino };
			found = 1;
		}
	}
	fclose(maps);
	return found;
}

/* Our descriptor of the file with inode `inode`, or -1. */
static int find_fd(uint64_t inode)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int fd = -1;

	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		struct stat st;
		int n = atoi(e->d_name);

		if (e->d_name[0] == '.' || n == dirfd(dir))
			continue;
		if (!fstat(n, &st) && st.st_ino == inode && S_ISREG(st.st_mode)) {
			fd = n;
			break;
		}
	}
	closedir(dir);
	return fd;
}

static int send_handoff(const char *path, const struct ram *ram, int uffd,
			int memfd)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct memcanal_handoff h = { .magic = MEMCANAL_HANDOFF_MAGIC,
		.pid = getpid(), .base = ram->base, .len = ram->len,
		.offset = ram->offset };
	struct iovec iov = { &h, sizeof(h) };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int fds[2] = { uffd, memfd }, s, rc;
	char ack;

	memset(u.buf, 0, sizeof(u.buf));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	rc = connect(s, (struct sockaddr *)&addr, sizeof(addr));
	if (!rc)
		rc = sendmsg(s, &msg, 0) == sizeof(h) ? 0 : -1;
	/* The pager answers once the range is registered. */
	if (!rc)
		rc = read(s, &ack, 1) == 1 ? 0 : -1;
	close(s);
	return rc;
}

static void *handoff_thread(void *arg)
{
	const char *path = getenv("MEMCANAL_PAGER_SOCKET");
	const char *name = getenv("MEMCANAL_PAGER_BACKEND");
	struct timespec pause = { 0, POLL_MS * 1000000L };
	struct ram ram = { 0 };
	int tries, memfd, uffd;

	if (!name || !*name)
		name = "memfd:";
	for (tries = 0; !find_ram(name, &ram); tries++) {
		if (tries * POLL_MS > GIVE_UP_S * 1000) {
			fprintf(stderr, "memcanal-uffd: no shared mapping "
				"of %s appeared\n", name);
			return NULL;
		}
		nanosleep(&pause, NULL);
	}
	memfd = find_fd(ram.inode);
	if (memfd < 0) {
		fprintf(stderr, "memcanal-uffd: no descriptor for inode "
			"%llu\n", (unsigned long long)ram.inode);
		return NULL;
	}
	/* Not UFFD_USER_MODE_ONLY: faults taken inside syscalls and by
	 * QEMU's I/O threads must reach the pager too.  O_NONBLOCK: poll
	 * on a blocking uffd reports only POLLERR. */
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0) {
		perror("memcanal-uffd: userfaultfd");
		return NULL;
	}
	if (send_handoff(path, &ram, uffd, memfd) < 0) {
		fprintf(stderr, "memcanal-uffd: handoff to %s failed: %s\n",
			path, strerror(errno));
		close(uffd);
		return NULL;
	}
	/* uffd stays open on purpose: see the header comment. */
	fprintf(stderr, "memcanal-uffd: %llu MiB at %#llx handed to %s\n",
		(unsigned long long)ram.len >> 20,
		(unsigned long long)ram.base, path);
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
