/*
 * A pager store on a memcanal-memserver over TLS 1.3 (issue #25): the
 * server's certificate is checked against the cloud's CA and the host
 * it is reached at, and each connection presents the lease token the
 * service signed (HELLO), which lets it store and read the token's
 * owner's pages, up to the lease's quota. Otherwise as pager_tcp_store:
 * the server drops pages when it likes, so it is never the only copy.
 *
 * Built from store_tls.c and store_tcp.c; links with -lssl -lcrypto.
 */
#ifndef STORE_TLS_H
#define STORE_TLS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pager.h"

#define PAGER_LEASE_TOKEN_SIZE 240

struct pager_tls_opts {
	const char *host;      /* as registered: its certificate must name it
				* (a DNS name, or an IP address; [v6] too) */
	const char *port;
	uint64_t owner;        /* the token's owner */
	const char *ca_file;   /* PEM: the CA(s) the server's must chain to */
	const uint8_t *token;  /* the lease token, as the service signed it */
	size_t token_len;      /* PAGER_LEASE_TOKEN_SIZE */
};

/*
 * A store named "tls:HOST:PORT" (kind "tcp": a remote store's fault
 * latency), connected and past its HELLOs; NULL with errno set if it
 * cannot be (EPROTO: TLS failed, e.g. a certificate the CA did not sign
 * or for another host; EACCES: the server refused the token; EINVAL: bad
 * options). A server that cannot be reached now (refused, unreachable,
 * timed out) gives the store with `down` set and errno saying why: it
 * connects on a later call. The options are copied. Calls fail as
 * pager_tcp_store's do: ENOENT or EIO when that copy is gone, ETIMEDOUT
 * or ECONNRESET when the server is.
 */
struct pager_store *pager_tls_store(const struct pager_tls_opts *opts);

/*
 * A newer lease for s, a tls store: token (len bytes) replaces its
 * token, and its connections are closed, so that each says HELLO with
 * it on its next call; one says HELLO with it at once (the server keeps
 * a lease's pages only while its token lives).  0, or -1 (EINVAL: not a tls store, or not a
 * token's length).  Thread-safe with the store's calls.
 */
int pager_tls_store_renew(struct pager_store *s, const uint8_t *token,
			  size_t len);

/* ---- between store_tcp.c (the protocol) and store_tls.c ---- */

/* One connection to the server; fd -1 when there is none. */
struct memserver_conn {
	pthread_mutex_t lock;
	int fd;
	void *tls; /* the transport's state of this connection */
};

struct memserver_store;

/* How bytes travel on a connection: 0, or -1 with errno set. */
struct memserver_transport {
	/* Secure c, just connected (c->fd). */
	int (*start)(struct memserver_store *m, struct memserver_conn *c);
	int (*send)(struct memserver_conn *c, const void *buf, size_t len);
	int (*recv)(struct memserver_conn *c, void *buf, size_t len);
	/* Forget c's state; the caller closes c->fd. */
	void (*stop)(struct memserver_conn *c);
	/* Free the transport's state of the store. */
	void (*destroy)(struct memserver_store *m);
};

struct memserver_store {
	struct pager_store s;
	char host[256], port[16];
	uint64_t owner;
	const struct memserver_transport *transport;
	void *transport_state;
	uint8_t token[PAGER_LEASE_TOKEN_SIZE]; /* HELLO'd on each connection */
	size_t token_len;                      /* 0: no HELLO (plaintext) */
	struct memserver_conn put, get;
};

/*
 * Connect m (host, port, owner, transport and token set; the rest zero)
 * and make it a store named prefix:host:port; NULL with errno set if
 * a connection is refused for good (TLS, the token: m is destroyed
 * then); the store with `down` set if the server cannot be reached now.
 */
struct pager_store *memserver_store_open(struct memserver_store *m,
					 const char *prefix);

#endif
