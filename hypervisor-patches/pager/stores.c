/*
 * memcanal-pager's stores from their specs: file:PATH (the host's own
 * file store), tls:HOST:PORT (a memory server over TLS 1.3, with the
 * lease token the service signed for it, base64, and the cloud's CA:
 * --tls-ca), and tcp:HOST:PORT (the plaintext protocol of --insecure
 * memory servers, for tests).
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

/* 240 bytes are 320 base64 characters, without padding. */
#define TOKEN_BASE64 (PAGER_LEASE_TOKEN_SIZE / 3 * 4)

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

static struct pager_store *tls_store(const char *address, const char *token,
				     uint64_t owner, const char *ca_file,
				     char *why, size_t len)
{
	uint8_t raw[PAGER_LEASE_TOKEN_SIZE + 3];
	struct pager_tls_opts o = { .owner = owner, .ca_file = ca_file,
		.token = raw, .token_len = PAGER_LEASE_TOKEN_SIZE };
	struct pager_store *s;
	char host[256];
	uint64_t named;

	if (!ca_file)
		return refuse(why, len, "a tls: store needs --tls-ca");
	if (!token || strlen(token) != TOKEN_BASE64 ||
	    EVP_DecodeBlock(raw, (const uint8_t *)token, TOKEN_BASE64) !=
	    PAGER_LEASE_TOKEN_SIZE)
		return refuse(why, len, "a tls: store needs its lease token "
			      "(240 bytes, base64)");
	memcpy(&named, raw + 24, sizeof(named));
	if (le64toh(named) != owner) {
		snprintf(why, len, "the lease token is for owner %" PRIu64
			 ", not %" PRIu64, le64toh(named), owner);
		errno = EINVAL;
		return NULL;
	}
	if (split(address, host, sizeof(host), &o.port))
		return refuse(why, len, "a tls: store is tls:HOST:PORT");
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

struct pager_store *open_store(const char *spec, const char *token,
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
