/*
 * The protocol (README.md) on one connection, as a state machine over a
 * non-blocking socket, with or without TLS: a TLS client is served only
 * after a HELLO carrying a valid lease token, and only for the token's
 * owner, within its lease's quota.
 */
#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "store.h"

struct server_config server;

enum phase {
	PH_HANDSHAKE, /* TLS */
	PH_HEADER,    /* reading a request header */
	PH_TOKEN,     /* reading a HELLO's token */
	PH_PUT,       /* reading a PUT's pages */
	PH_GET,       /* sending a GET's pages */
};

void note(const char *fmt, ...)
{
	static time_t second;
	static unsigned lines, suppressed;
	time_t now = time(NULL);
	va_list ap;

	if (now != second) {
		if (suppressed)
			fprintf(stderr, "(%u lines suppressed)\n", suppressed);
		second = now;
		lines = suppressed = 0;
	}
	if (++lines > 20) {
		suppressed++;
		return;
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- I/O: bytes moved, 0 with *wait set if it would block, -1 if the
 * connection is gone ---- */

/* The epoll events a failed TLS call waits for; 0 if the connection
 * is broken (then no close_notify is sent). */
static int tls_wait(struct conn *c, int ret)
{
	switch (SSL_get_error(c->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return EPOLLIN;
	case SSL_ERROR_WANT_WRITE:
		return EPOLLOUT;
	default:
		c->broken = 1;
		return 0;
	}
}

static long tls_result(struct conn *c, int ok, size_t n, int *wait)
{
	if (ok)
		return (long)n;
	*wait = tls_wait(c, 0);
	return *wait ? 0 : -1;
}

static long plain_result(ssize_t n, int events, int *wait)
{
	if (n > 0)
		return n;
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		*wait = events;
		return 0;
	}
	return -1;
}

static long io_read(struct conn *c, void *buf, size_t len, int *wait)
{
	size_t n = 0;
	if (!c->ssl)
		return plain_result(recv(c->fd, buf, len, 0), EPOLLIN, wait);
	/* One thread serves every connection: clear what another left. */
	ERR_clear_error();
	int ok = SSL_read_ex(c->ssl, buf, len, &n);
	return tls_result(c, ok, n, wait);
}

static long io_write(struct conn *c, const void *buf, size_t len, int *wait)
{
	size_t n = 0;
	if (!c->ssl)
		return plain_result(send(c->fd, buf, len, MSG_NOSIGNAL),
				    EPOLLOUT, wait);
	ERR_clear_error();
	int ok = SSL_write_ex(c->ssl, buf, len, &n);
	return tls_result(c, ok, n, wait);
}

/* ---- replies ---- */

static void reply(struct conn *c, uint8_t status, uint32_t count,
		  const void *body, size_t body_len)
{
	memset(c->buf, 0, REPLY_SIZE);
	put_u32(c->buf, MAGIC);
	c->buf[4] = status;
	put_u32(c->buf + 8, count);
	memcpy(c->buf + REPLY_SIZE, body, body_len);
	c->out_len = REPLY_SIZE + body_len;
	c->out_off = 0;
}

/* Answer, then close: a client that broke the rules gets nothing more. */
static void refuse(struct conn *c, uint8_t status, const char *why)
{
	note("%s: %s; closing", c->peer, why);
	reply(c, status, 0, NULL, 0);
	c->closing = 1;
}

/* ---- requests ---- */

/* Decode and check a header; 0 if it is a request this server knows. */
static int parse(const uint8_t *raw, struct request *req)
{
	if (get_u32(raw) != MAGIC)
		return -1;
	req->op = raw[4];
	req->owner = get_u64(raw + 8);
	req->page = get_u64(raw + 16);
	req->count = get_u32(raw + 24);
	switch (req->op) {
	case OP_PUT:
	case OP_GET:
	case OP_DELETE:
		return req->count == 0 || req->count > MAX_BATCH ||
		       req->page > UINT64_MAX - (req->count - 1) ? -1 : 0;
	case OP_HELLO:
		return req->count == LEASE_TOKEN_SIZE ? 0 : -1;
	case OP_STAT:
	case OP_RECLAIM:
	case OP_REVOKE:
		return 0;
	default:
		return -1;
	}
}

static void hello(struct conn *c)
{
	struct lease lease;
	const char *why = lease_token_check(server.lease_key,
					    c->head + REQUEST_SIZE,
					    LEASE_TOKEN_SIZE, server.name,
					    (uint64_t)time(NULL),
					    server.max_lifetime, &lease);
	if (why) {
		refuse(c, ST_REFUSED, why);
		return;
	}
	uint32_t a = store_open_account(lease.uuid, lease.owner,
					lease.quota_pages, lease.issued_at,
					lease.expires_at);
	if (a == NIL) {
		refuse(c, ST_REFUSED,
		       "the lease is another owner's or revoked");
		return;
	}
	if (store_attached(a) >= LEASE_CONNECTIONS) {
		refuse(c, ST_REFUSED, "the lease has all its connections");
		return;
	}
	store_attach(a);
	c->attached = 1;
	c->account = a;
	c->owner = lease.owner;
	c->authed = 1;
	reply(c, ST_OK, store_quota(a), NULL, 0);
}

/* The operator's REVOKE: the request's owner, and in its page field
 * the time (unix seconds, the service's clock) its leases ended. FULL
 * if the server remembers too many revocations already (the owner's
 * pages go all the same). */
static void serve_revoke(struct conn *c)
{
	uint64_t now = (uint64_t)time(NULL), owner = c->req.owner;
	uint64_t at = c->req.page;
	if (at > now + LEASE_CLOCK_SKEW)
		at = now + LEASE_CLOCK_SKEW;
	int full = lease_revoke(owner, at, now, server.max_lifetime);
	uint32_t dropped = store_revoke(owner, at);
	note("%s: the leases of owner %#" PRIx64 " revoked (%u pages "
	     "dropped)%s", c->peer, owner, dropped,
	     full ? "; the revocation list is full" : "");
	reply(c, full ? ST_FULL : ST_OK, dropped, NULL, 0);
}

static void serve_stat(struct conn *c)
{
	struct store_stat st;
	uint8_t body[16];
	store_stat(&st);
	put_u64(body, st.max_pages);
	put_u64(body + 8, st.dropped);
	reply(c, ST_OK, st.held, body, sizeof(body));
}

static void start_get(struct conn *c)
{
	const struct request *r = &c->req;
	if (!store_has_all(r->owner, r->page, r->count)) {
		reply(c, ST_MISSING, 0, NULL, 0);
		return;
	}
	reply(c, ST_OK, r->count, store_get(r->owner, r->page), PAGE_SIZE);
	c->done = 1;
	c->phase = PH_GET;
}

/* The next page of a GET once the last is sent: -1 if it went since
 * the GET began (the reply promised it: the connection must go). */
static int next_get_page(struct conn *c)
{
	if (c->done == c->req.count) {
		c->phase = PH_HEADER;
		return 0;
	}
	const uint8_t *data = store_get(c->req.owner, c->req.page + c->done);
	if (!data)
		return -1;
	memcpy(c->buf, data, PAGE_SIZE);
	c->out_len = PAGE_SIZE;
	c->out_off = 0;
	c->done++;
	return 0;
}

static void start_put(struct conn *c)
{
	c->done = c->stored = 0;
	/* A PUT its lease could never hold whole stores nothing, but its
	 * payload is read: the connection goes on. */
	c->put_failed = c->req.count > store_quota(c->account);
	c->phase = PH_PUT;
}

static void put_page(struct conn *c)
{
	const struct request *r = &c->req;
	if (!c->put_failed) {
		if (store_put(c->account, r->owner, r->page + c->done, c->buf))
			c->put_failed = 1;
		else
			c->stored++;
	}
	if (++c->done == r->count) {
		reply(c, c->put_failed ? ST_FULL : ST_OK, c->stored, NULL, 0);
		c->phase = PH_HEADER;
	}
}

/* What a request is refused for on this connection, or NULL. */
static const char *forbidden(const struct conn *c, const struct request *r)
{
	int operator_op = r->op == OP_STAT || r->op == OP_RECLAIM ||
			  r->op == OP_REVOKE;
	if (r->op == OP_HELLO)
		return !c->ssl ? "HELLO without TLS" :
		       c->authed ? "a second HELLO" : NULL;
	if (c->ssl && !c->authed)
		return "a request before HELLO";
	if (c->ssl && !store_usable(c->account, (uint64_t)time(NULL)))
		return "a request after the lease's token expired or the "
		       "lease was revoked";
	if (c->admin)
		return operator_op ? NULL : "a page request on the admin socket";
	if (operator_op)
		return c->ssl ? "STAT, RECLAIM or REVOKE from the network" :
		       NULL;
	if (c->ssl && r->owner != c->owner)
		return "a request for another owner";
	return NULL;
}

static void serve_header(struct conn *c)
{
	struct request *r = &c->req;
	if (parse(c->head, r)) {
		refuse(c, ST_BAD_REQUEST, "a bad request");
		return;
	}
	const char *why = forbidden(c, r);
	if (why) {
		refuse(c, !c->ssl && r->op == OP_HELLO ? ST_BAD_REQUEST :
		       ST_REFUSED, why);
		return;
	}
	/* A plaintext client is one until it asks for something: the
	 * event loop closes those that never did first. */
	if (!c->ssl)
		c->authed = 1;
	switch (r->op) {
	case OP_HELLO:
		c->phase = PH_TOKEN;
		break;
	case OP_PUT:
		start_put(c);
		break;
	case OP_GET:
		start_get(c);
		break;
	case OP_DELETE:
		reply(c, ST_OK, store_delete(r->owner, r->page, r->count),
		      NULL, 0);
		break;
	case OP_STAT:
		serve_stat(c);
		break;
	case OP_RECLAIM:
		reply(c, ST_OK, store_reclaim(r->count), NULL, 0);
		break;
	case OP_REVOKE:
		serve_revoke(c);
		break;
	}
}

/* Where the current input goes and how long it is. */
static uint8_t *input(struct conn *c, size_t *len)
{
	switch (c->phase) {
	case PH_TOKEN:
		*len = LEASE_TOKEN_SIZE;
		return c->head + REQUEST_SIZE;
	case PH_PUT:
		*len = PAGE_SIZE;
		return c->buf;
	default:
		*len = REQUEST_SIZE;
		return c->head;
	}
}

static void input_done(struct conn *c)
{
	switch (c->phase) {
	case PH_TOKEN:
		c->phase = PH_HEADER;
		hello(c);
		break;
	case PH_PUT:
		put_page(c);
		break;
	default:
		serve_header(c);
	}
}

static int handshake(struct conn *c)
{
	ERR_clear_error();
	int r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->phase = PH_HEADER;
		c->progressed = 1;
		return CONN_MORE;
	}
	int wait = tls_wait(c, r);
	if (!wait)
		note("%s: TLS handshake failed: %s", c->peer,
		     ERR_reason_error_string(ERR_peek_last_error()) ?:
		     "closed");
	return wait ? wait : CONN_CLOSED;
}

int conn_run(struct conn *c)
{
	for (int budget = RUN_BUDGET; budget > 0; budget--) {
		int wait = 0;
		long n;

		if (c->phase == PH_HANDSHAKE) {
			int r = handshake(c);
			if (r != CONN_MORE)
				return r;
			continue;
		}
		if (c->out_off < c->out_len) {
			n = io_write(c, c->buf + c->out_off,
				     c->out_len - c->out_off, &wait);
			if (n <= 0)
				return n < 0 ? CONN_CLOSED : wait;
			c->out_off += (size_t)n;
			c->progressed = 1;
			continue;
		}
		if (c->closing)
			return CONN_CLOSED;
		if (c->phase == PH_GET) {
			if (next_get_page(c))
				return CONN_CLOSED;
			continue;
		}
		size_t len;
		uint8_t *to = input(c, &len);
		n = io_read(c, to + c->in_len, len - c->in_len, &wait);
		if (n <= 0)
			return n < 0 ? CONN_CLOSED : wait;
		c->in_len += (size_t)n;
		c->progressed = 1;
		if (c->in_len == len) {
			c->in_len = 0;
			input_done(c);
		}
	}
	return CONN_MORE;
}

int conn_start(struct conn *c, int fd, int admin, const char *peer)
{
	memset(c, 0, offsetof(struct conn, head));
	c->fd = fd;
	c->admin = (uint8_t)admin;
	c->account = NIL;
	c->phase = PH_HEADER;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (admin)
		c->authed = 1;
	else if (!server.tls)
		c->account = server.shared_account;
	else {
		c->ssl = SSL_new(server.tls);
		if (!c->ssl || !SSL_set_fd(c->ssl, fd)) {
			SSL_free(c->ssl);
			return -1;
		}
		SSL_set_accept_state(c->ssl);
		c->phase = PH_HANDSHAKE;
	}
	return 0;
}

void conn_close(struct conn *c)
{
	if (c->ssl) {
		/* A close_notify if the socket takes it; never waits. */
		ERR_clear_error();
		if (c->phase != PH_HANDSHAKE && !c->broken)
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->attached)
		store_detach(c->account);
	c->attached = 0;
	close(c->fd);
	c->fd = -1;
}
