/*
 * memcanal-pager's stores from their specs: file:PATH (the host's own
 * file store), tls:HOST:PORT (a memory server over TLS 1.3, with the
 * lease token the service signed for it, base64, and the cloud's CA:
 * --tls-ca), and tcp:HOST:PORT (the plaintext protocol of --insecure
 * memory servers, for tests); a tls: store's newer lease; lease tokens
 * from their files; the daemon's list of them.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "daemon.h"
#include "store_tls.h"

static struct pager_store *refuse(char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s", what);
	errno = EINVAL;
	return NULL;
}

/* HOST:PORT of a memory server's spec: host and port, or -1. */
static int split(const char *address, char *host, size_t len,
		 const char **port)
{
	const char *colon = strrchr(address, ':');

	if (!colon || colon == address || !colon[1] ||
	    (size_t)(colon - address) >= len)
		return -1;
	snprintf(host, len, "%.*s", (int)(colon - address), address);
	*port = colon + 1;
	return 0;
}

/* The lease token (base64) as raw bytes, if it is one for owner: 0, or
 * -1 and why. */
static int decode_token(const char *token, uint64_t owner,
			uint8_t raw[PAGER_LEASE_TOKEN_SIZE + 3], char *why,
			size_t len)
{
	uint64_t named;

	if (!token || strlen(token) != TOKEN_BASE64 ||
	    EVP_DecodeBlock(raw, (const uint8_t *)token, TOKEN_BASE64) !=
	    PAGER_LEASE_TOKEN_SIZE) {
		snprintf(why, len, "a tls: store needs its lease token (240 "
			 "bytes, base64)");
	} else {
		memcpy(&named, raw + 24, sizeof(named));
		if (le64toh(named) == owner)
			return 0;
		snprintf(why, len, "the lease token is for owner %" PRIu64
			 ", not %" PRIu64, le64toh(named), owner);
	}
	OPENSSL_cleanse(raw, PAGER_LEASE_TOKEN_SIZE + 3);
	return -1;
}

static struct pager_store *tls_store(const char *address, const char *token,
				     uint64_t owner, const char *ca_file,
				     char *why, size_t len)
{
	uint8_t raw[PAGER_LEASE_TOKEN_SIZE + 3];
	struct pager_tls_opts o = { .owner = owner, .ca_file = ca_file,
		.token = raw, .token_len = PAGER_LEASE_TOKEN_SIZE };
	struct pager_store *s;
	char host[256];

	if (!ca_file)
		return refuse(why, len, "a tls: store needs --tls-ca");
	if (decode_token(token, owner, raw, why, len)) {
		errno = EINVAL;
		return NULL;
	}
	if (split(address, host, sizeof(host), &o.port)) {
		OPENSSL_cleanse(raw, sizeof(raw));
		return refuse(why, len, "a tls: store is tls:HOST:PORT");
	}
	o.host = host;
	s = pager_tls_store(&o);
	OPENSSL_cleanse(raw, sizeof(raw));
	if (!s)
		snprintf(why, len, "%s", errno == EPROTO ? "TLS failed (a "
			 "certificate the CA did not sign, or for another host)"
			 : errno == EACCES ? "the server refused the lease token"
			 : strerror(errno));
	return s;
}

static struct pager_store *open_spec(const char *spec, const char *token,
				     uint64_t owner, const char *ca_file,
				     char *why, size_t len)
{
	struct pager_store *s;
	const char *port;
	char host[256];

	if (token && strncmp(spec, "tls:", 4))
		return refuse(why, len, "only tls: stores take a token");
	if (!strncmp(spec, "tls:", 4))
		return tls_store(spec + 4, token, owner, ca_file, why, len);
	if (!strncmp(spec, "file:", 5))
		s = pager_file_store(spec + 5);
	else if (!strncmp(spec, "tcp:", 4) &&
		 !split(spec + 4, host, sizeof(host), &port))
		s = pager_tcp_store(host, port, owner);
	else
		return refuse(why, len, "not file:PATH, tls:HOST:PORT or "
			      "tcp:HOST:PORT");
	if (!s)
		snprintf(why, len, "%s", strerror(errno));
	return s;
}

struct pager_store *open_store(const char *spec, const char *token,
			       uint64_t owner, const char *ca_file,
			       char *why, size_t len)
{
	struct pager_store *s = open_spec(spec, token, owner, ca_file, why,
					  len);

	if (s && s->down)
		snprintf(why, len, "cannot reach it now (%s): tried again "
			 "later", strerror(errno));
	return s;
}

int renew_store(struct pager_store *s, const char *spec, const char *token,
		uint64_t owner, char *why, size_t len)
{
	uint8_t raw[PAGER_LEASE_TOKEN_SIZE + 3];
	int rc;

	if (strncmp(spec, "tls:", 4)) {
		snprintf(why, len, "only tls: stores take a token");
		return -1;
	}
	if (decode_token(token, owner, raw, why, len))
		return -1;
	rc = pager_tls_store_renew(s, raw, PAGER_LEASE_TOKEN_SIZE);
	OPENSSL_cleanse(raw, sizeof(raw));
	if (rc)
		snprintf(why, len, "%s", strerror(errno));
	return rc;
}

int read_token_file(const char *path, char token[TOKEN_BASE64 + 1])
{
	token[TOKEN_BASE64] = 0;
	return pager_read_secret(path, "token file", token, TOKEN_BASE64);
}

int keep_store(struct daemon *d, const char *spec, struct pager_store *s,
	       const char *why)
{
	d->specs[d->nstores] = strdup(spec);
	if (!d->specs[d->nstores])
		return -1;
	if (s->down)
		fprintf(stderr, "memcanal-pager: %s: %s\n", spec, why);
	d->stores[d->nstores++] = s;
	return 0;
}

int find_store(struct daemon *d, const char *spec)
{
	for (int i = 0; i < d->nstores; i++)
		if (!strcmp(d->specs[i], spec))
			return i;
	return -1;
}
