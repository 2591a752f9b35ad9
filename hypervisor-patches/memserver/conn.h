/*
 * One client connection of memcanal-memserver, served as far as its
 * non-blocking socket allows each time the event loop (memserver.c)
 * runs it. A connection holds at most one page in and one reply with a
 * page out (REPLY_SIZE + PAGE_SIZE bytes), whatever the request's size:
 * PUT payloads are stored page by page as they arrive, GET replies are
 * sent page by page.
 */
#ifndef MEMSERVER_CONN_H
#define MEMSERVER_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "lease_token.h"
#include "protocol.h"

/* What the server's connections share (set up by main). */
struct server_config {
	SSL_CTX *tls;            /* NULL: --insecure, plaintext */
	EVP_PKEY *lease_key;
	const char *name;        /* the server address tokens must name */
	uint64_t max_lifetime;   /* seconds a token is good at most */
	uint32_t shared_account; /* --insecure: every client's account */
};
extern struct server_config server;

/* Connections a lease may hold at once (a pager holds two). */
#define LEASE_CONNECTIONS 8
/* Units of work (a page, a header) one run does before letting others
 * run: a busy client cannot starve the rest. */
#define RUN_BUDGET 64

/* An intrusive, circular doubly linked list (the event loop's). */
struct link {
	struct link *prev, *next;
};

struct conn {
	int fd;
	SSL *ssl;          /* NULL: plaintext (--insecure or admin) */
	uint8_t admin;     /* on the admin socket: STAT and RECLAIM only */
	uint8_t phase;
	uint8_t authed;    /* HELLO done; plaintext: a first request */
	uint8_t attached;  /* counted in its account's connections */
	uint8_t closing;   /* close once the reply is sent */
	uint8_t progressed;/* bytes moved during the last run */
	uint8_t put_failed;
	uint8_t broken;    /* TLS failed: no close_notify */
	uint32_t account;
	uint64_t owner;    /* the lease's; any in --insecure mode */
	struct request req;
	uint32_t done;     /* pages of req handled */
	uint32_t stored;   /* pages of a PUT stored */
	size_t in_len;     /* bytes of the current input read so far */
	size_t out_len, out_off;
	uint8_t head[REQUEST_SIZE + LEASE_TOKEN_SIZE];
	uint8_t buf[REPLY_SIZE + PAGE_SIZE]; /* a PUT's page; a reply */
	char peer[80];
	/* the event loop's */
	uint64_t started_ms, active_ms;
	uint32_t events;
	struct link age; /* in the pre-HELLO or the idle list */
	struct link run; /* in the list of those with work left */
};

/* conn_run's answers besides epoll events to wait for. */
#define CONN_CLOSED 0
#define CONN_MORE (-1)

/* Serve an accepted, non-blocking socket; peer names it in logs. */
int conn_start(struct conn *c, int fd, int admin, const char *peer);
/*
 * Go as far as the socket allows: CONN_CLOSED (call conn_close),
 * CONN_MORE (work left after RUN_BUDGET units), or the epoll events
 * (EPOLLIN or EPOLLOUT) it waits for.
 */
int conn_run(struct conn *c);
void conn_close(struct conn *c);

/* A line on stderr, at most 20 a second (clients can cause them). */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
