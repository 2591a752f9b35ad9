/*
 * The TLS 1.3 transport of memory-server stores (store_tls.h), with
 * OpenSSL on the blocking socket store_tcp.c dials: its SO_RCVTIMEO and
 * SO_SNDTIMEO bound every handshake, read and write as they bound plain
 * ones (a TLS call that would wait longer fails with ETIMEDOUT).
 */
#define _GNU_SOURCE
#include "store_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL writes to the socket with write() (also inside SSL_read, an
 * alert): a server gone raises SIGPIPE, which kills a pager that does
 * not ignore it (and hangs its guest).  So TLS calls run with SIGPIPE
 * blocked in the calling thread, and one they raised is taken before it
 * is unblocked. */
static void sigpipe_block(sigset_t *saved)
{
	sigset_t pipe;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, saved);
}

static void sigpipe_restore(const sigset_t *saved)
{
	sigset_t pending;
	int err = errno;

	if (!sigismember(saved, SIGPIPE) && !sigpending(&pending) &&
	    sigismember(&pending, SIGPIPE)) {
		sigset_t pipe;
		struct timespec none = { 0, 0 };

		sigemptyset(&pipe);
		sigaddset(&pipe, SIGPIPE);
		sigtimedwait(&pipe, NULL, &none);
	}
	pthread_sigmask(SIG_SETMASK, saved, NULL);
	errno = err;
}

/* errno for a TLS call on c that returned ret: the socket's timeout
 * becomes ETIMEDOUT, a TLS failure EPROTO, a close ECONNRESET (also one
 * mid-handshake, which OpenSSL 3 reports as a protocol error: a server
 * restarting or at its connection cap, not one that refuses us). */
static void tls_errno(SSL *ssl, int ret)
{
	int err = errno;

	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = ETIMEDOUT;
		break;
	case SSL_ERROR_SYSCALL:
		errno = err && err != EAGAIN ? err : ECONNRESET;
		break;
	case SSL_ERROR_ZERO_RETURN:
		errno = ECONNRESET;
		break;
	default:
		errno = ERR_GET_REASON(ERR_peek_last_error()) ==
			SSL_R_UNEXPECTED_EOF_WHILE_READING ? ECONNRESET : EPROTO;
	}
	ERR_clear_error();
}

/* The server must be the one at m->host: its certificate names that
 * IP address, or that DNS name (also sent as SNI). */
static int expect_host(SSL *ssl, const char *host)
{
	unsigned char ip[sizeof(struct in6_addr)];

	if (inet_pton(AF_INET, host, ip) == 1 ||
	    inet_pton(AF_INET6, host, ip) == 1)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
						     host) == 1;
	return SSL_set1_host(ssl, host) == 1 &&
	       SSL_set_tlsext_host_name(ssl, host) == 1;
}

static int tls_start(struct memserver_store *m, struct memserver_conn *c)
{
	SSL *ssl = SSL_new(m->transport_state);
	sigset_t saved;
	int r;

	ERR_clear_error();
	if (!ssl || !SSL_set_fd(ssl, c->fd) || !expect_host(ssl, m->host)) {
		SSL_free(ssl);
		ERR_clear_error();
		errno = ENOMEM;
		return -1;
	}
	sigpipe_block(&saved);
	r = SSL_connect(ssl);
	if (r != 1) {
		long verify = SSL_get_verify_result(ssl);

		tls_errno(ssl, r);
		if (verify != X509_V_OK)
			fprintf(stderr, "%s: %s\n", m->s.name ? m->s.name :
				m->host, X509_verify_cert_error_string(verify));
		SSL_free(ssl);
		sigpipe_restore(&saved);
		return -1;
	}
	sigpipe_restore(&saved);
	c->tls = ssl;
	return 0;
}

static int tls_send(struct memserver_conn *c, const void *buf, size_t len)
{
	sigset_t saved;
	int failed = 0;

	sigpipe_block(&saved);
	while (len && !failed) {
		size_t n = 0;
		int ok = SSL_write_ex(c->tls, buf, len, &n);

		if (!ok) {
			tls_errno(c->tls, 0);
			failed = 1;
		}
		buf = (const char *)buf + n;
		len -= n;
	}
	sigpipe_restore(&saved);
	return -failed;
}

static int tls_recv(struct memserver_conn *c, void *buf, size_t len)
{
	sigset_t saved;
	int failed = 0;

	sigpipe_block(&saved);
	while (len && !failed) {
		size_t n = 0;
		int ok = SSL_read_ex(c->tls, buf, len, &n);

		if (!ok) {
			tls_errno(c->tls, 0);
			failed = 1;
		}
		buf = (char *)buf + n;
		len -= n;
	}
	sigpipe_restore(&saved);
	return -failed;
}

static void tls_stop(struct memserver_conn *c)
{
	SSL_free(c->tls);
	c->tls = NULL;
}

static void tls_destroy(struct memserver_store *m)
{
	SSL_CTX_free(m->transport_state);
}

static const struct memserver_transport tls = {
	.start = tls_start, .send = tls_send, .recv = tls_recv,
	.stop = tls_stop, .destroy = tls_destroy,
};

static SSL_CTX *client_context(const char *ca_file)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
		fprintf(stderr, "TLS with CA file %s: %s\n", ca_file,
			ERR_reason_error_string(ERR_peek_last_error()) ?:
			"failed");
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	return ctx;
}

struct pager_store *pager_tls_store(const struct pager_tls_opts *o)
{
	struct memserver_store *m;
	size_t host_len;

	if (!o->host || !o->port || !o->ca_file || !o->token ||
	    o->token_len != PAGER_LEASE_TOKEN_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	/* [v6]:port: the address without its brackets. */
	host_len = strlen(o->host);
	if (host_len >= 2 && o->host[0] == '[' && o->host[host_len - 1] == ']')
		snprintf(m->host, sizeof(m->host), "%.*s", (int)host_len - 2,
			 o->host + 1);
	else
		snprintf(m->host, sizeof(m->host), "%s", o->host);
	snprintf(m->port, sizeof(m->port), "%s", o->port);
	m->owner = o->owner;
	memcpy(m->token, o->token, o->token_len);
	m->token_len = o->token_len;
	m->transport = &tls;
	m->transport_state = client_context(o->ca_file);
	if (!m->transport_state) {
		free(m);
		errno = EINVAL;
		return NULL;
	}
	return memserver_store_open(m, "tls");
}
