/*
 * A pager store on a memcanal-memserver (hypervisor-patches/memserver,
 * protocol in its README): the protocol, over plain TCP here and over
 * TLS with a lease token in store_tls.c.  The server may drop any page
 * at any time, so this store is only ever one copy of two.
 *
 * Two connections: one for put (the swap-out caller), one for get and
 * del (the fault thread), so a fault never waits behind a 4 MiB PUT.  A
 * broken connection is re-opened once per call; if that fails the call
 * fails and the pager falls back to its other copy.  A server that
 * stops answering (frozen, or its host gone) must not hold a fault for
 * long either: connecting gives up after CONNECT_MS, a connection that
 * makes no progress for IO_MS is broken, and a timeout is not retried.
 *
 * A server that cannot be reached when the store is opened (down, or
 * not answering) does not fail the store: it is marked down and
 * connected to on a later call, so a pager taking over while its memory
 * server is away still serves its guest from the other copies.  Only
 * what no retry will change fails it: TLS refused (a certificate the CA
 * did not sign), the lease token refused.
 */
#define _GNU_SOURCE
#include "store_tls.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAGIC 0x534D434Du
#define CONNECT_MS 1000
#define IO_MS 2000
#define MAX_BATCH 1024
enum { OP_PUT = 1, OP_GET = 2, OP_DELETE = 3, OP_RECLAIM = 5,
       OP_HELLO = 6 };
enum { ST_OK = 0, ST_MISSING = 1, ST_FULL = 2, ST_BAD_REQUEST = 3,
       ST_REFUSED = 4 };

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

static int dial(struct memserver_store *m)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
	struct timeval io = { IO_MS / 1000, IO_MS % 1000 * 1000 };
	int fd = -1, one = 1;

	if (getaddrinfo(m->host, m->port, &hints, &res)) {
		errno = EHOSTUNREACH;
		return -1;
	}
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

static void hang_up(struct memserver_store *m, struct memserver_conn *c)
{
	int saved = errno;

	if (c->fd < 0)
		return;
	m->transport->stop(c);
	close(c->fd);
	c->fd = -1;
	errno = saved;
}

/* A request's header (and body: len bytes after a PUT or HELLO) sent on
 * an open connection: 0, or -1 when the connection failed (it is then
 * closed). */
static int send_request(struct memserver_store *m, struct memserver_conn *c,
			int op, uint64_t page, uint32_t count,
			const void *body, size_t len)
{
	const struct memserver_transport *io = m->transport;
	uint8_t req[32] = { 0 };
	uint32_t magic = htole32(MAGIC), n = htole32(count);
	uint64_t owner = htole64(m->owner), pg = htole64(page);

	memcpy(req, &magic, 4);
	req[4] = op;
	memcpy(req + 8, &owner, 8);
	memcpy(req + 16, &pg, 8);
	memcpy(req + 24, &n, 4);
	if (io->send(c, req, sizeof(req)) ||
	    ((op == OP_PUT || op == OP_HELLO) && io->send(c, body, len))) {
		hang_up(m, c);
		return -1;
	}
	return 0;
}

/*
 * The reply to a request sent (op, count pages), and an OK GET's body
 * (len bytes) into body.  Returns the reply's status and count, or -1
 * when the connection failed (it is then closed).  A server that
 * refuses a request closes the connection.
 */
static int read_reply(struct memserver_store *m, struct memserver_conn *c,
		      int op, uint32_t count, void *body, size_t len,
		      uint32_t *got)
{
	const struct memserver_transport *io = m->transport;
	uint8_t rep[16];
	uint32_t magic, n;

	if (io->recv(c, rep, sizeof(rep)))
		goto broken;
	memcpy(&magic, rep, 4);
	memcpy(&n, rep + 8, 4);
	*got = le32toh(n);
	if (le32toh(magic) != MAGIC)
		goto protocol;
	if (rep[4] == ST_REFUSED || rep[4] == ST_BAD_REQUEST) {
		errno = rep[4] == ST_REFUSED ? EACCES : EPROTO;
		hang_up(m, c);
		return -1;
	}
	if (rep[4] == ST_OK && (op == OP_GET || op == OP_PUT) &&
	    *got != count)
		goto protocol;
	if (op == OP_GET && rep[4] == ST_OK && io->recv(c, body, len))
		goto broken;
	return rep[4];
protocol:
	errno = EPROTO;
broken:
	hang_up(m, c);
	return -1;
}

/* One request on an open connection, and its reply (read_reply). */
static int exchange(struct memserver_store *m, struct memserver_conn *c,
		    int op, uint64_t page, uint32_t count, void *body,
		    size_t len, uint32_t *got)
{
	if (send_request(m, c, op, page, count, body, len))
		return -1;
	return read_reply(m, c, op, count, body, len, got);
}

/* c, connected and past its HELLO: 0, or -1 with errno set. */
static int open_conn(struct memserver_store *m, struct memserver_conn *c)
{
	uint32_t got;

	if (c->fd >= 0)
		return 0;
	c->fd = dial(m);
	if (c->fd < 0)
		return -1;
	if (m->transport->start(m, c)) {
		int saved = errno;

		close(c->fd);
		c->fd = -1;
		errno = saved;
		return -1;
	}
	if (m->token_len) {
		int st = exchange(m, c, OP_HELLO, 0, m->token_len, m->token,
				  m->token_len, &got);

		if (st != ST_OK) {
			if (st >= 0) {
				hang_up(m, c);
				errno = EPROTO;
			}
			return -1;
		}
	}
	return 0;
}

static int request_once(struct memserver_store *m, struct memserver_conn *c,
			int op, uint64_t page, uint32_t count, void *body,
			size_t len)
{
	uint32_t got;

	if (open_conn(m, c))
		return -1;
	return exchange(m, c, op, page, count, body, len, &got);
}

static int request(struct memserver_store *m, struct memserver_conn *c,
		   int op, uint64_t page, uint32_t count, void *body,
		   size_t len)
{
	int st, timed_out;

	pthread_mutex_lock(&c->lock);
	st = request_once(m, c, op, page, count, body, len);
	timed_out = st < 0 && (errno == EAGAIN || errno == ETIMEDOUT);
	/* The server restarted, or the link broke: once more.  Not after a
	 * timeout: a server that does not answer would cost the fault two. */
	if (st < 0 && !timed_out)
		st = request_once(m, c, op, page, count, body, len);
	pthread_mutex_unlock(&c->lock);
	if (st != ST_OK) {
		errno = timed_out ? ETIMEDOUT : st < 0 ? ECONNRESET : ENOENT;
		return -1;
	}
	return 0;
}

/*
 * Every run's PUTs (at most MAX_BATCH pages each) sent before any reply
 * is read: one round trip for a whole swap-out batch, however many runs
 * it has, not one a run.  The replies (16 bytes each, a batch's fit in
 * any socket buffer) are all read, in order, so the connection stays in
 * step even when one says FULL.  ST_OK, another status (the first not
 * OK), or -1 when the connection failed (then closed).
 */
static int put_window(struct memserver_store *m, const struct pager_run *runs,
		      size_t nruns)
{
	struct memserver_conn *c = &m->put;
	int status = ST_OK;
	uint32_t got;

	if (open_conn(m, c))
		return -1;
	for (size_t r = 0; r < nruns; r++)
		for (size_t i = 0; i < runs[r].count; i += MAX_BATCH) {
			size_t n = runs[r].count - i < MAX_BATCH ?
				   runs[r].count - i : MAX_BATCH;

			if (send_request(m, c, OP_PUT, runs[r].first + i, n,
					 (const char *)runs[r].buf +
					 i * PAGER_PAGE, n * PAGER_PAGE))
				return -1;
		}
	for (size_t r = 0; r < nruns; r++)
		for (size_t i = 0; i < runs[r].count; i += MAX_BATCH) {
			size_t n = runs[r].count - i < MAX_BATCH ?
				   runs[r].count - i : MAX_BATCH;
			int st = read_reply(m, c, OP_PUT, n, NULL, 0, &got);

			if (st < 0)
				return -1;
			if (status == ST_OK)
				status = st;
		}
	return status;
}

static int tcp_put_runs(struct pager_store *s, const struct pager_run *runs,
			size_t nruns)
{
	struct memserver_store *m = (struct memserver_store *)s;
	int st, timed_out;

	pthread_mutex_lock(&m->put.lock);
	st = put_window(m, runs, nruns);
	timed_out = st < 0 && (errno == EAGAIN || errno == ETIMEDOUT);
	/* As request(): once more after a broken link, not after a
	 * timeout.  PUTs are idempotent: the whole window again. */
	if (st < 0 && !timed_out)
		st = put_window(m, runs, nruns);
	pthread_mutex_unlock(&m->put.lock);
	if (st != ST_OK) {
		errno = timed_out ? ETIMEDOUT : st < 0 ? ECONNRESET : ENOENT;
		return -1;
	}
	return 0;
}

static int tcp_put(struct pager_store *s, uint64_t page, const void *buf,
		   size_t npages)
{
	struct pager_run run = { page, npages, buf };

	return tcp_put_runs(s, &run, 1);
}

static int tcp_get(struct pager_store *s, uint64_t page, void *buf)
{
	struct memserver_store *m = (struct memserver_store *)s;

	return request(m, &m->get, OP_GET, page, 1, buf, PAGER_PAGE);
}

static int tcp_get_run(struct pager_store *s, uint64_t page, void *buf,
		       size_t npages)
{
	struct memserver_store *m = (struct memserver_store *)s;

	if (npages > MAX_BATCH) {
		errno = EINVAL;
		return -1;
	}
	return request(m, &m->get, OP_GET, page, npages, buf,
		       npages * PAGER_PAGE);
}

static int tcp_del(struct pager_store *s, uint64_t page, size_t npages)
{
	struct memserver_store *m = (struct memserver_store *)s;

	for (size_t i = 0; i < npages; i += MAX_BATCH) {
		size_t n = npages - i < MAX_BATCH ? npages - i : MAX_BATCH;

		if (request(m, &m->get, OP_DELETE, page + i, n, NULL, 0))
			return -1;
	}
	return 0;
}

/* Here, not in store_tls.c: the token is the protocol's HELLO, and its
 * connections are this file's. */
int pager_tls_store_renew(struct pager_store *s, const uint8_t *token,
			  size_t len)
{
	struct memserver_store *m = (struct memserver_store *)s;

	if (!m->token_len || len != m->token_len) {
		errno = EINVAL;
		return -1;
	}
	/* Both connections' locks: no HELLO is under way with the old
	 * token, and each connection's next call says HELLO anew. */
	pthread_mutex_lock(&m->put.lock);
	pthread_mutex_lock(&m->get.lock);
	memcpy(m->token, token, len);
	hang_up(m, &m->put);
	hang_up(m, &m->get);
	/* Say HELLO with it at once, even if the guest asks nothing: the
	 * server learns the lease lives on, and does not take its pages
	 * for an orphan's once the old token expired (issue #36).  A
	 * failure here is the next call's to retry. */
	(void)open_conn(m, &m->put);
	pthread_mutex_unlock(&m->get.lock);
	pthread_mutex_unlock(&m->put.lock);
	return 0;
}

int pager_tcp_store_reclaim_all(struct pager_store *s)
{
	struct memserver_store *m = (struct memserver_store *)s;

	return request(m, &m->get, OP_RECLAIM, 0, 0xFFFFFFFFu, NULL, 0);
}

static void tcp_destroy(struct pager_store *s)
{
	struct memserver_store *m = (struct memserver_store *)s;

	hang_up(m, &m->put);
	hang_up(m, &m->get);
	if (m->transport->destroy)
		m->transport->destroy(m);
	free((char *)m->s.name);
	free(m);
}

/* A failure to open a connection that retrying later may mend: the
 * server down, unreachable or not answering, not refusing us. */
static int transient(int err)
{
	return err != EPROTO && err != EACCES && err != EINVAL &&
	       err != ENOMEM;
}

struct pager_store *memserver_store_open(struct memserver_store *m,
					 const char *prefix)
{
	char name[300];
	int err;

	snprintf(name, sizeof(name), "%s:%s:%s", prefix, m->host, m->port);
	m->s = (struct pager_store){ .name = strdup(name), .kind = "tcp",
		.put = tcp_put, .put_runs = tcp_put_runs, .get = tcp_get,
		.get_run = tcp_get_run, .del = tcp_del,
		.destroy = tcp_destroy };
	pthread_mutex_init(&m->put.lock, NULL);
	pthread_mutex_init(&m->get.lock, NULL);
	m->put.fd = m->get.fd = -1;
	if (!m->s.name) {
		errno = ENOMEM;
		goto failed;
	}
	if (!open_conn(m, &m->put) && !open_conn(m, &m->get))
		return &m->s;
	if (transient(errno)) {
		m->s.down = 1;      /* errno says why */
		return &m->s;
	}
failed:
	err = errno;
	tcp_destroy(&m->s);
	errno = err;
	return NULL;
}

/* ---- plaintext: the pre-#25 protocol of --insecure servers ---- */

static int plain_start(struct memserver_store *m, struct memserver_conn *c)
{
	(void)m;
	(void)c;
	return 0;
}

static int plain_send(struct memserver_conn *c, const void *buf, size_t len)
{
	while (len) {
		/* MSG_NOSIGNAL: a server that died answers EPIPE, not a
		 * SIGPIPE that would kill the pager (and hang its guest). */
		ssize_t r = send(c->fd, buf, len, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf = (const char *)buf + r;
		len -= r;
	}
	return 0;
}

static int plain_recv(struct memserver_conn *c, void *buf, size_t len)
{
	while (len) {
		ssize_t r = recv(c->fd, buf, len, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ECONNRESET;
		if (r <= 0)
			return -1;
		buf = (char *)buf + r;
		len -= r;
	}
	return 0;
}

static void plain_stop(struct memserver_conn *c)
{
	(void)c;
}

static const struct memserver_transport plain = {
	.start = plain_start, .send = plain_send, .recv = plain_recv,
	.stop = plain_stop,
};

struct pager_store *pager_tcp_store(const char *host, const char *port,
				    uint64_t owner)
{
	struct memserver_store *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	snprintf(m->host, sizeof(m->host), "%s", host);
	snprintf(m->port, sizeof(m->port), "%s", port);
	m->owner = owner;
	m->transport = &plain;
	return memserver_store_open(m, "tcp");
}
