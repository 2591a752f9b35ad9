/*
 * Lease tokens (issue #25, /tmp/spec/pooling-security.md): the service's
 * Ed25519-signed, per-lease bearer credential a client presents in its
 * HELLO. 240 bytes, integers little-endian, strings NUL-padded:
 *
 *   0 magic "mclease2" | 8 lease uuid[16] | 24 owner u64 |
 *   32 quota_pages u64 | 40 issued_at u64 (unix seconds) |
 *   48 lifetime u64 (seconds) | 56 borrower[56] |
 *   112 server "host:port"[64] | 176 Ed25519 signature of bytes 0..175
 *
 * A token is good from issued_at (less LEASE_CLOCK_SKEW) until
 * issued_at + lifetime, the lifetime capped by the server's
 * --max-token-lifetime (issue #36). "mclease1" tokens, of services
 * before #36, have a 64-byte borrower and no lifetime: the server's
 * maximum applies.
 */
#ifndef MEMSERVER_LEASE_TOKEN_H
#define MEMSERVER_LEASE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define LEASE_TOKEN_SIZE 240
/* How far ahead of this host's clock a token's issued_at may be (the
 * service's and the lender's clocks differ a little). */
#define LEASE_CLOCK_SKEW 60
/* Revoked leases remembered at once (each until its tokens expire). */
#define LEASE_REVOCATIONS 65536

struct lease {
	uint8_t uuid[16];
	uint64_t owner;
	uint64_t quota_pages;
	uint64_t issued_at;
	uint64_t expires_at; /* issued_at + lifetime (capped) */
	char borrower[65];
	char server[65];
};

/* The service's public key (PEM, Ed25519) from path, or NULL. */
EVP_PKEY *lease_key_load(const char *path);

/*
 * Check a token: its length, magic, signature by key, that it names
 * this server (server_name, as registered), that it is good at `now`
 * (unix seconds; its lifetime capped by max_lifetime) and that its
 * lease is not revoked. NULL and *out filled if it holds, else why not.
 */
const char *lease_token_check(EVP_PKEY *key, const uint8_t *token,
			      size_t len, const char *server_name,
			      uint64_t now, uint64_t max_lifetime,
			      struct lease *out);

/*
 * Refuse every token of owner issued at or before revoked_at (unix
 * seconds by the service's clock; at most now + LEASE_CLOCK_SKEW):
 * remembered until revoked_at + max_lifetime + LEASE_CLOCK_SKEW, when
 * every such token has expired anyway. -1 if LEASE_REVOCATIONS are
 * remembered already (none of them expired).
 */
int lease_revoke(uint64_t owner, uint64_t revoked_at, uint64_t now,
		 uint64_t max_lifetime);
/* 1 if owner's token issued at issued_at is revoked at now. */
int lease_revoked(uint64_t owner, uint64_t issued_at, uint64_t now);

#endif
