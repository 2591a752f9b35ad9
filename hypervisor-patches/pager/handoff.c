/*
 * The QEMU side of the handoff, shared by its two carriers: the
 * LD_PRELOAD shim (uffd_preload.c, any accelerator) and the TCG plugin
 * (uffd_plugin.c).  Both run inside QEMU, since a userfaultfd is bound
 * to the memory map of the process that creates it.
 *
 * Find guest RAM (the largest shared mapping whose path names the
 * backend) and its memfd among our descriptors, create the uffd, send
 * base, length, offset and [uffd, memfd] to the pager with SCM_RIGHTS
 * and wait for its answer.  Messages go to stderr, prefixed
 * "memcanal-uffd:".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "handoff.h"

int memcanal_find_ram(const char *backend, struct memcanal_ram *ram)
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
		if (strcmp(perms, "rw-s") || !strstr(line + path, backend))
			continue;
		if (end - start > ram->len) {
			*ram = (struct memcanal_ram){ start, end - start, off,
						      ino };
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

/*
 * Not UFFD_USER_MODE_ONLY: faults taken inside syscalls, by QEMU's I/O
 * threads and by KVM must reach the pager too.  O_NONBLOCK: poll on a
 * blocking uffd reports only POLLERR.  The syscall needs CAP_SYS_PTRACE;
 * a QEMU without it (libvirt's) may still open /dev/userfaultfd, whose
 * file permissions decide instead.
 */
static int new_uffd(void)
{
	int uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int dev, saved;

	if (uffd >= 0 || errno != EPERM)
		return uffd;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		errno = EPERM;
		return -1;
	}
	uffd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	saved = errno;
	close(dev);
	errno = saved;
	return uffd;
}

static int send_handoff(const char *path, const struct memcanal_ram *ram,
			int uffd, int memfd)
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

int memcanal_hand_over(const char *path, const struct memcanal_ram *ram,
		       int uffd)
{
	int memfd = find_fd(ram->inode);

	if (memfd < 0) {
		fprintf(stderr, "memcanal-uffd: no descriptor for inode "
			"%llu\n", (unsigned long long)ram->inode);
		errno = EBADF;
		return -1;
	}
	return send_handoff(path, ram, uffd, memfd);
}

int memcanal_hand_off(const char *path, const struct memcanal_ram *ram)
{
	int uffd = new_uffd();

	if (uffd < 0) {
		perror("memcanal-uffd: userfaultfd");
		return -1;
	}
	if (memcanal_hand_over(path, ram, uffd) < 0) {
		fprintf(stderr, "memcanal-uffd: handoff to %s failed: %s\n",
			path, strerror(errno));
		close(uffd);
		return -1;
	}
	fprintf(stderr, "memcanal-uffd: %llu MiB at %#llx handed to %s\n",
		(unsigned long long)ram->len >> 20,
		(unsigned long long)ram->base, path);
	return uffd;
}
