/*
 * A pager store on a memcanal-memserver (hypervisor-patches/memserver,
 * protocol in its README).  The server may drop any page at any time, so
 * this store is only ever one copy of two.
 *
 * Two connections: one for put (the swap-out caller), one for get and
 * del (the fault thread), so a fault never waits behind a 2 MiB PUT.  A
 * broken connection is re-opened once per call; if that fails the call
 * fails and the pager falls back to its other copy.  A server that
 * stops answering (frozen, or its host gone) must not hold a fault for
 * long either: connecting gives up after CONNECT_MS, a connection that
 * makes no progress for IO_MS is broken, and a timeout is not retried.
 */
#define _GNU_SOURCE
#include "pager.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAGIC 0x534D434Du
#define CONNECT_MS 1000
#define IO_MS 2000
enum { OP_PUT = 1, OP_GET = 2, OP_DELETE = 3, OP_RECLAIM = 5 };
enum { ST_OK = 0 };

struct conn {
	pthread_mutex_t lock;
	int fd;
};

struct tcp_store {
	struct pager_store s;
	char host[256], port[16];
	uint64_t owner;
	struct conn put, get;
};

/* connect(), giving up after CONNECT_MS. */
static int connect_within(int fd, const struct sockaddr *addr,
			  socklen_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int flags = fcntl(fd, F_GETFL), err = 0;
	socklen_t errlen = sizeof(err);

	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, addr, len) && errno != EINPROGRESS)
		return -1;
	if (poll(&pfd, 1, CONNECT_MS) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) || err) {
		errno = err ? err : ETIMEDOUT;
		return -1;
	}
	return fcntl(fd, F_SETFL, flags);
}

static int dial(struct tcp_store *t)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
	struct timeval io = { IO_MS / 1000, IO_MS % 1000 * 1000 };
	int fd = -1, one = 1;

	if (getaddrinfo(t->host, t->port, &hints, &res))
		return -1;
	for (a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (!connect_within(fd, a->ai_addr, a->ai_addrlen))
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof(io));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof(io));
	}
	return fd;
}

static int send_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		/* MSG_NOSIGNAL: a server that died answers EPIPE, not a
		 * SIGPIPE that would kill the pager (and hang its guest). */
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
		ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= r;
		}
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = recv(fd, (char *)buf + done, len - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

/*
 * One request on c; body (len bytes) is sent after a PUT header or read
 * after an OK GET reply.  Returns the reply's status and count, or -1
 * when the connection failed (it is then closed).
 */
static int request_once(struct tcp_store *t, struct conn *c, int op,
			uint64_t page, uint32_t count, void *body, size_t len,
			uint32_t *got)
{
	uint8_t req[32] = { 0 }, rep[16];
	uint32_t magic = htole32(MAGIC), n = htole32(count);
	uint64_t owner = htole64(t->owner), pg = htole64(page);
	struct iovec iov[2] = {
		{ req, sizeof(req) }, { body, op == OP_PUT ? len : 0 },
	};

	memcpy(req, &magic, 4);
	req[4] = op;
	memcpy(req + 8, &owner, 8);
	memcpy(req + 16, &pg, 8);
	memcpy(req + 24, &n, 4);
	if (c->fd < 0)
		c->fd = dial(t);
	if (c->fd < 0)
		return -1;
	if (send_all(c->fd, iov, op == OP_PUT ? 2 : 1) ||
	    recv_all(c->fd, rep, sizeof(rep)))
		goto broken;
	memcpy(&magic, rep, 4);
	memcpy(&n, rep + 8, 4);
	if (le32toh(magic) != MAGIC)
		goto broken;
	*got = le32toh(n);
	if (op == OP_GET && rep[4] == ST_OK &&
	    (*got != count || recv_all(c->fd, body, len)))
		goto broken;
	return rep[4];
broken:
	close(c->fd);
	c->fd = -1;
	return -1;
}

static int request(struct tcp_store *t, struct conn *c, int op,
		   uint64_t page, uint32_t count, void *body, size_t len)
{
	uint32_t got = 0;
	int st, timed_out;

	pthread_mutex_lock(&c->lock);
	st = request_once(t, c, op, page, count, body, len, &got);
	timed_out = st < 0 && (errno == EAGAIN || errno == ETIMEDOUT);
	/* The server restarted, or the link broke: once more.  Not after a
	 * timeout: a server that does not answer would cost the fault two. */
	if (st < 0 && !timed_out)
		st = request_once(t, c, op, page, count, body, len, &got);
	pthread_mutex_unlock(&c->lock);
	if (st != ST_OK) {
		errno = timed_out ? ETIMEDOUT : st < 0 ? ECONNRESET : ENOENT;
		return -1;
	}
	return 0;
}

static int tcp_put(struct pager_store *s, uint64_t page, const void *buf,
		   size_t npages)
{
	struct tcp_store *t = (struct tcp_store *)s;

	for (size_t i = 0; i < npages; i += 1024) {
		size_t n = npages - i < 1024 ? npages - i : 1024;

		if (request(t, &t->put, OP_PUT, page + i, n,
			    (char *)buf + i * PAGER_PAGE, n * PAGER_PAGE))
			return -1;
	}
	return 0;
}

static int tcp_get(struct pager_store *s, uint64_t page, void *buf)
{
	struct tcp_store *t = (struct tcp_store *)s;

	return request(t, &t->get, OP_GET, page, 1, buf, PAGER_PAGE);
}

static int tcp_del(struct pager_store *s, uint64_t page, size_t npages)
{
	struct tcp_store *t = (struct tcp_store *)s;

	for (size_t i = 0; i < npages; i += 1024) {
		size_t n = npages - i < 1024 ? npages - i : 1024;

		if (request(t, &t->get, OP_DELETE, page + i, n, NULL, 0))
			return -1;
	}
	return 0;
}

int pager_tcp_store_reclaim_all(struct pager_store *s)
{
	struct tcp_store *t = (struct tcp_store *)s;

	return request(t, &t->get, OP_RECLAIM, 0, 0xFFFFFFFFu, NULL, 0);
}

static void tcp_destroy(struct pager_store *s)
{
	struct tcp_store *t = (struct tcp_store *)s;

	if (t->put.fd >= 0)
		close(t->put.fd);
	if (t->get.fd >= 0)
		close(t->get.fd);
	free((char *)t->s.name);
	free(t);
}

struct pager_store *pager_tcp_store(const char *host, const char *port,
				    uint64_t owner)
{
	struct tcp_store *t = calloc(1, sizeof(*t));
	char name[300];

	if (!t)
		return NULL;
	snprintf(t->host, sizeof(t->host), "%s", host);
	snprintf(t->port, sizeof(t->port), "%s", port);
	t->owner = owner;
	pthread_mutex_init(&t->put.lock, NULL);
	pthread_mutex_init(&t->get.lock, NULL);
	t->put.fd = dial(t);
	t->get.fd = dial(t);
	if (t->put.fd < 0 || t->get.fd < 0) {
		tcp_destroy(&t->s);
		return NULL;
	}
	snprintf(name, sizeof(name), "tcp:%s:%s", host, port);
	t->s = (struct pager_store){ .name = strdup(name), .kind = "tcp",
		.put = tcp_put,
		.get = tcp_get, .del = tcp_del, .destroy = tcp_destroy };
	return &t->s;
}
