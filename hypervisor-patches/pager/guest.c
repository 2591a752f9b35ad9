/*
 * memcanal-pager's side of QEMU: the handoff, and zap requests.
 *
 * A handoff carries [uffd, memfd_0..memfd_{n-1}] (QEMU connected
 * directly: the accepted connection is QEMU's) or the same and QEMU's
 * connection last (a relay forwarded it: the accepted connection is the
 * relay's); the descriptor count tells which.  QEMU's pid is taken from
 * its connection's SO_PEERCRED, not from the header.
 */
#define _GNU_SOURCE
#include "guest.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "io_all.h"
#include "pager.h"

/* How long QEMU may take to zap (a full pass over a large guest). */
#define ZAP_TIMEOUT_MS 30000

int guest_listen(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	unlink(path);
	if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(s, 4)) {
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

static pid_t peer_pid(int conn)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) ? -1 :
	       cred.pid;
}

/* The handoff on conn into g: 0, or -1 (descriptors closed). */
static int receive(int conn, struct guest *g)
{
	union {
		char buf[CMSG_SPACE((MEMCANAL_MAX_REGIONS + 2) * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &g->h, sizeof(g->h) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	int fds[MEMCANAL_MAX_REGIONS + 2];
	size_t nfds = 0, n;
	ssize_t got = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);

	c = got < 0 ? NULL : CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
	}
	n = g->h.nregions;
	if (got != sizeof(g->h) || g->h.magic != MEMCANAL_HANDOFF_MAGIC ||
	    (msg.msg_flags & MSG_CTRUNC) || n < 1 ||
	    n > MEMCANAL_MAX_REGIONS || (nfds != n + 1 && nfds != n + 2)) {
		fprintf(stderr, "memcanal-pager: not a handoff (%zd bytes, "
			"%zu descriptors)\n", got, nfds);
		close_fds(fds, nfds);
		return -1;
	}
	g->uffd = fds[0];
	memcpy(g->memfd, fds + 1, n * sizeof(int));
	g->shim = nfds == n + 2 ? fds[n + 1] : conn;
	g->relay = nfds == n + 2 ? conn : -1;
	g->pid = peer_pid(g->shim);
	return g->pid > 0 ? 0 : -1;
}

int guest_accept(int s, int timeout_ms, struct guest *g)
{
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	int conn, ready;

	while ((ready = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (ready <= 0)
		return 0;
	conn = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return -1;
	if (receive(conn, g)) {
		close(conn);
		return -1;
	}
	return 1;
}

/* The descriptor of QEMU's (dir) whose link is `target`, or whose file
 * has inode `ino`, duplicated into ours: -1 if none. */
static int take_fd(int pidfd, const char *dir, const char *target,
		   uint64_t ino)
{
	char link[384], name[64];
	DIR *fds = opendir(dir);
	struct dirent *e;
	struct stat st;
	int fd = -1;

	while (fds && fd < 0 && (e = readdir(fds))) {
		ssize_t n;

		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, name, sizeof(name) - 1);
		name[n > 0 ? n : 0] = 0;
		if (target ? !strcmp(name, target) :
		    !stat(link, &st) && S_ISREG(st.st_mode) &&
		    st.st_ino == ino)
			fd = syscall(SYS_pidfd_getfd, pidfd,
				     atoi(e->d_name), 0);
	}
	if (fds)
		closedir(fds);
	return fd;
}

int guest_recover(const char *state_path, struct guest *g)
{
	struct pager_registration reg;
	char dir[64];
	int pidfd, ok;

	if (pager_state_registration(state_path, &reg))
		return -1;
	memset(g, 0, sizeof(*g));
	g->shim = g->relay = -1;
	g->pid = reg.pid;
	g->h.nregions = reg.nregions;
	pidfd = syscall(SYS_pidfd_open, g->pid, 0);
	if (pidfd < 0)
		return -1;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)g->pid);
	g->uffd = take_fd(pidfd, dir, "anon_inode:[userfaultfd]", 0);
	ok = g->uffd >= 0;
	for (uint64_t i = 0; i < reg.nregions; i++) {
		g->h.region[i] = (struct memcanal_region){ reg.region[i].base,
			reg.region[i].len, reg.region[i].offset };
		g->memfd[i] = ok ? take_fd(pidfd, dir, NULL,
					   reg.region[i].inode) : -1;
		ok &= g->memfd[i] >= 0;
		if (!ok) {
			close_fds(g->memfd, i);
			break;
		}
	}
	close(pidfd);
	if (!ok && g->uffd >= 0)
		close(g->uffd);
	return ok ? 0 : -1;
}

int guest_answer(struct guest *g)
{
	int rc = 0;

	if (g->relay >= 0) {
		if (send(g->relay, "k", 1, MSG_NOSIGNAL) != 1)
			perror("memcanal-pager: answering the relay");
		close(g->relay);
		g->relay = -1;
	}
	if (g->shim >= 0 && send(g->shim, "k", 1, MSG_NOSIGNAL) != 1)
		rc = -1;
	return rc;
}

static ssize_t send_step(int fd, void *buf, size_t len, off_t at)
{
	(void)at;
	return send(fd, buf, len, MSG_NOSIGNAL);
}

/* A read of the shim's answer once it is there, within ZAP_TIMEOUT_MS;
 * a poll that fails or times out fails it. */
static ssize_t answer_step(int fd, void *buf, size_t len, off_t at)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	(void)at;
	if (poll(&pfd, 1, ZAP_TIMEOUT_MS) <= 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return read(fd, buf, len);
}

int guest_zap(void *arg, const uint64_t *runs, size_t nruns,
	      uint64_t *zapped)
{
	struct guest *g = arg;
	struct memcanal_zap req = { MEMCANAL_ZAP_MAGIC, nruns };
	struct memcanal_zapped done;

	if (g->shim < 0)
		return -1;
	if (io_all(send_step, g->shim, &req, sizeof(req), 0) ||
	    io_all(send_step, g->shim, (void *)runs,
		   nruns * 2 * sizeof(*runs), 0) ||
	    io_all(answer_step, g->shim, &done, sizeof(done), 0) ||
	    done.magic != MEMCANAL_ZAP_MAGIC) {
		fprintf(stderr, "memcanal-pager: QEMU's connection broke: "
			"no more zaps, no sampling\n");
		close(g->shim);
		g->shim = -1;
		return -1;
	}
	if (done.error)
		fprintf(stderr, "memcanal-pager: QEMU's madvise: %s\n",
			strerror((int)-done.error));
	*zapped = done.pages;
	return 0;
}
