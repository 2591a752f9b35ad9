/*
 * Lease tokens (issue #25, /tmp/spec/pooling-security.md): the service's
 * Ed25519-signed, per-lease bearer credential a client presents in its
 * HELLO. 240 bytes, integers little-endian, strings NUL-padded:
 *
 *   0 magic "mclease1" | 8 lease uuid[16] | 24 owner u64 |
 *   32 quota_pages u64 | 40 issued_at u64 | 48 borrower[64] |
 *   112 server "host:port"[64] | 176 Ed25519 signature of bytes 0..175
 */
#ifndef MEMSERVER_LEASE_TOKEN_H
#define MEMSERVER_LEASE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define LEASE_TOKEN_SIZE 240

struct lease {
	uint8_t uuid[16];
	uint64_t owner;
	uint64_t quota_pages;
	uint64_t issued_at;
	char borrower[65];
	char server[65];
};

/* The service's public key (PEM, Ed25519) from path, or NULL. */
EVP_PKEY *lease_key_load(const char *path);

/*
 * Check a token: its length, magic, signature by key, and that it names
 * this server (server_name, as registered). NULL and *out filled if it
 * holds, else why not.
 */
const char *lease_token_check(EVP_PKEY *key, const uint8_t *token,
			      size_t len, const char *server_name,
			      struct lease *out);

#endif
