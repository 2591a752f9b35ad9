/*
 * The QEMU side of the handoff, shared by its two carriers: the
 * LD_PRELOAD shim (uffd_preload.c, any accelerator) and the TCG plugin
 * (uffd_plugin.c).  Both run inside QEMU, since a userfaultfd is bound
 * to the memory map of the process that creates it, and so does zapping
 * QEMU's page tables for the pager's access sampling (madvise acts on
 * the caller's own memory map only).
 *
 * Find guest RAM (every shared mapping whose path names the backend)
 * and the memfds among our descriptors, create the uffd, send the
 * regions and [uffd, memfds...] to the pager with SCM_RIGHTS and wait
 * for its answer; then answer its zap requests on the same connection
 * until it goes away, and offer the uffd again to the next pager.
 * Messages go to stderr, prefixed "memcanal-uffd:".
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "handoff.h"
#include "io_all.h"

#define PAGE 4096ULL
/* Smaller shared mappings of a memfd are not guest RAM. */
#define MIN_REGION (2ULL << 20)
#define RESEND_MS 200
#define ZAP_CHUNK 1024   /* runs read, and zapped by one call, at a time */
/* process_madvise, like readv, stops at 2 GiB - 4 KiB a call. */
#define ZAP_BYTES (1ULL << 30)

int memcanal_find_ram(const char *backend, struct memcanal_ram *ram)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[4096];
	uint64_t n = 0;

	memset(ram, 0, sizeof(*ram));
	if (!maps)
		return 0;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end, off, ino;
		struct memcanal_region *last = n ? &ram->region[n - 1] : NULL;
		char perms[8];
		int path = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*x:%*x %lu %n", &start,
			   &end, perms, &off, &ino, &path) < 5 || !path)
			continue;
		if (strcmp(perms, "rw-s") || !strstr(line + path, backend))
			continue;
		/* One backend split into several VMAs is still one region. */
		if (last && ram->inode[n - 1] == ino &&
		    last->base + last->len == start &&
		    last->offset + last->len == off) {
			last->len += end - start;
			continue;
		}
		if (n && ram->region[n - 1].len < MIN_REGION)
			n--;
		if (n == MEMCANAL_MAX_REGIONS) {
			fprintf(stderr, "memcanal-uffd: more than %d regions: "
				"the rest is not paged\n", MEMCANAL_MAX_REGIONS);
			break;
		}
		ram->region[n] = (struct memcanal_region){ start, end - start,
							   off };
		ram->inode[n++] = ino;
	}
	if (n && ram->region[n - 1].len < MIN_REGION)
		n--;
	fclose(maps);
	memset(&ram->region[n], 0,
	       (MEMCANAL_MAX_REGIONS - n) * sizeof(ram->region[0]));
	ram->nregions = n;
	return n;
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

/* The pager's connection once it answered, or -1. */
static int send_handoff(const char *path, const struct memcanal_ram *ram,
			const int *fds)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct memcanal_handoff h = { .magic = MEMCANAL_HANDOFF_MAGIC,
		.pid = getpid(), .nregions = ram->nregions };
	struct iovec iov = { &h, sizeof(h) };
	size_t nfds = ram->nregions + 1;
	union {
		char buf[CMSG_SPACE((MEMCANAL_MAX_REGIONS + 1) * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
	struct cmsghdr *c;
	int s, rc;
	char ack;

	memcpy(h.region, ram->region, sizeof(h.region));
	memset(u.buf, 0, sizeof(u.buf));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	rc = connect(s, (struct sockaddr *)&addr, sizeof(addr));
	if (!rc)
		rc = sendmsg(s, &msg, MSG_NOSIGNAL) == sizeof(h) ? 0 : -1;
	/* The pager answers once the regions are registered. */
	if (!rc)
		rc = read(s, &ack, 1) == 1 ? 0 : -1;
	if (!rc)
		return s;
	close(s);
	return -1;
}

int memcanal_hand_over(const char *path, const struct memcanal_ram *ram,
		       int uffd)
{
	int fds[MEMCANAL_MAX_REGIONS + 1] = { uffd };

	for (uint64_t i = 0; i < ram->nregions; i++) {
		fds[i + 1] = find_fd(ram->inode[i]);
		if (fds[i + 1] < 0) {
			fprintf(stderr, "memcanal-uffd: no descriptor for "
				"inode %llu\n",
				(unsigned long long)ram->inode[i]);
			errno = EBADF;
			return -1;
		}
	}
	return send_handoff(path, ram, fds);
}

/* Nothing listens on the socket (yet): no file, or no one accepting. */
static int nobody_listens(void)
{
	return errno == ENOENT || errno == ECONNREFUSED;
}

int memcanal_hand_off(const char *path, const struct memcanal_ram *ram,
		      int *conn, int wait)
{
	struct timespec resend = { 0, RESEND_MS * 1000000L };
	int uffd = new_uffd();
	uint64_t mib = 0;

	if (uffd < 0) {
		perror("memcanal-uffd: userfaultfd");
		return -1;
	}
	*conn = memcanal_hand_over(path, ram, uffd);
	if (*conn < 0 && wait && nobody_listens()) {
		fprintf(stderr, "memcanal-uffd: waiting for a pager on %s\n",
			path);
		do
			nanosleep(&resend, NULL);
		while ((*conn = memcanal_hand_over(path, ram, uffd)) < 0
		       && nobody_listens());
	}
	if (*conn < 0) {
		fprintf(stderr, "memcanal-uffd: handoff to %s failed: %s\n",
			path, strerror(errno));
		close(uffd);
		return -1;
	}
	for (uint64_t i = 0; i < ram->nregions; i++)
		mib += ram->region[i].len >> 20;
	fprintf(stderr, "memcanal-uffd: %llu MiB in %llu regions at %#llx "
		"handed to %s\n", (unsigned long long)mib,
		(unsigned long long)ram->nregions,
		(unsigned long long)ram->region[0].base, path);
	return uffd;
}

static ssize_t read_step(int fd, void *buf, size_t len, off_t at)
{
	(void)at;
	return read(fd, buf, len);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Ranges of our mapping to zap, and how: process_madvise on ourselves
 * (Linux 6.13) zaps a whole batch in one call, with one TLB flush from
 * 6.16; before, it refuses MADV_DONTNEED and each range is a madvise. */
struct zaps {
	struct iovec iov[ZAP_CHUNK];
	size_t n;
	uint64_t bytes;
	int pidfd;      /* ours, or -1: madvise each range */
};

static void zap_ranges(struct zaps *z, struct memcanal_zapped *done)
{
	ssize_t n = z->pidfd < 0 ? -1 :
		    syscall(SYS_process_madvise, z->pidfd, z->iov, z->n,
			    MADV_DONTNEED, 0);

	if (n < 0 && z->pidfd >= 0 && errno == EINVAL) {
		close(z->pidfd);
		z->pidfd = -1;
	}
	for (size_t i = 0; n < 0 && i < z->n; i++) {
		if (!madvise(z->iov[i].iov_base, z->iov[i].iov_len,
			     MADV_DONTNEED))
			done->pages += z->iov[i].iov_len / PAGE;
		else if (!done->error)
			done->error = -errno;
	}
	if (n >= 0)
		done->pages += n / PAGE;
	if (n >= 0 && (uint64_t)n < z->bytes && !done->error)
		done->error = -EIO;       /* stopped short: not all zapped */
	z->n = 0;
	z->bytes = 0;
}

/* Add a range to the batch, zapping the batch when it is full. */
static void add_range(struct zaps *z, uint64_t addr, uint64_t len,
		      struct memcanal_zapped *done)
{
	while (len) {
		uint64_t n = len < ZAP_BYTES ? len : ZAP_BYTES;

		if (z->n == ZAP_CHUNK || z->bytes + n > ZAP_BYTES)
			zap_ranges(z, done);
		z->iov[z->n++] = (struct iovec){ (void *)(uintptr_t)addr, n };
		z->bytes += n;
		addr += n;
		len -= n;
	}
}

/* Zap pages first..first+count-1, split at region boundaries. */
static void zap_run(const struct memcanal_ram *ram, uint64_t first,
		    uint64_t count, struct zaps *z,
		    struct memcanal_zapped *done)
{
	uint64_t start = 0;

	for (uint64_t i = 0; i < ram->nregions && count; i++) {
		const struct memcanal_region *r = &ram->region[i];
		uint64_t end = start + r->len / PAGE, n;

		if (first < end) {
			n = end - first < count ? end - first : count;
			add_range(z, r->base + (first - start) * PAGE, n * PAGE,
				  done);
			first += n;
			count -= n;
		}
		start = end;
	}
}

/* Answer the zap requests of one request: 0, or -1 if it broke off. */
static int zap_request(int conn, const struct memcanal_ram *ram,
		       uint64_t nruns, struct zaps *z)
{
	static uint64_t runs[2 * ZAP_CHUNK];
	struct memcanal_zapped done = { .magic = MEMCANAL_ZAP_MAGIC };
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < nruns; i += ZAP_CHUNK) {
		uint64_t n = nruns - i < ZAP_CHUNK ? nruns - i : ZAP_CHUNK;

		if (io_all(read_step, conn, runs, n * 2 * sizeof(*runs), 0))
			return -1;
		for (uint64_t j = 0; j < n; j++)
			zap_run(ram, runs[2 * j], runs[2 * j + 1], z, &done);
	}
	zap_ranges(z, &done);
	done.ns = now_ns() - t0;
	return send(conn, &done, sizeof(done), MSG_NOSIGNAL) == sizeof(done) ?
	       0 : -1;
}

/* Answer zap requests until the pager goes away: 0, or -1 on a request
 * that is not one. */
static int serve_zaps(int conn, const struct memcanal_ram *ram)
{
	static struct zaps z;
	struct memcanal_zap req;
	int rc = 0;

	z.pidfd = syscall(SYS_pidfd_open, getpid(), 0);
	z.n = 0;
	z.bytes = 0;
	/* rc 1: the pager went away mid-request (it died). */
	while (!rc && !io_all(read_step, conn, &req, sizeof(req), 0))
		rc = req.magic != MEMCANAL_ZAP_MAGIC ? -1 :
		     zap_request(conn, ram, req.nruns, &z) ? 1 : 0;
	if (z.pidfd >= 0)
		close(z.pidfd);
	return rc < 0 ? -1 : 0;
}

void memcanal_serve(const char *path, const struct memcanal_ram *ram,
		    int uffd, int conn)
{
	struct timespec resend = { 0, RESEND_MS * 1000000L };

	/* The uffd stays open on purpose (see memcanal_hand_off).  A live
	 * pager has unlinked its socket; a pager listening there again is
	 * taking over from one that died: it gets the same uffd. */
	for (;;) {
		if (serve_zaps(conn, ram))
			fprintf(stderr, "memcanal-uffd: bad zap request\n");
		close(conn);
		do
			nanosleep(&resend, NULL);
		while ((conn = memcanal_hand_over(path, ram, uffd)) < 0);
		fprintf(stderr, "memcanal-uffd: handed over again to %s\n",
			path);
	}
}
