/*
 * Lease token checks (lease_token.h) with OpenSSL's EVP Ed25519: the same
 * check as memcanal.service.lease_tokens.verify, plus the server name,
 * the token's lifetime and the leases the service revoked.
 */
#include "lease_token.h"

#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>

#include "protocol.h"

#define SIGNED_SIZE 176
#define FIELD_SIZE 64

/* Revoked owners' leases, each with when it may be forgotten; compacted
 * as entries expire, so a lookup scans only live ones. */
static struct revocation {
	uint64_t owner, revoked_at, until;
} revocations[LEASE_REVOCATIONS];
static uint32_t nrevocations;

EVP_PKEY *lease_key_load(const char *path)
{
	FILE *f = fopen(path, "r");
	EVP_PKEY *key;

	if (!f)
		return NULL;
	key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	fclose(f);
	if (key && EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(key);
		return NULL;
	}
	return key;
}

/* A NUL-padded field of size bytes as a string; 0 if it fills the field
 * (no NUL). */
static int field(const uint8_t *raw, size_t size, char out[FIELD_SIZE + 1])
{
	size_t n = strnlen((const char *)raw, size);
	memcpy(out, raw, n);
	out[n] = '\0';
	return n < size;
}

static int signed_by(EVP_PKEY *key, const uint8_t *token)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int good = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1
		&& EVP_DigestVerify(ctx, token + SIGNED_SIZE,
				    LEASE_TOKEN_SIZE - SIGNED_SIZE, token,
				    SIGNED_SIZE) == 1;
	EVP_MD_CTX_free(ctx);
	return good;
}

const char *lease_token_check(EVP_PKEY *key, const uint8_t *token,
			      size_t len, const char *server_name,
			      uint64_t now, uint64_t max_lifetime,
			      struct lease *out)
{
	uint64_t lifetime = max_lifetime;
	int v2;

	if (len != LEASE_TOKEN_SIZE)
		return "not a 240-byte lease token";
	v2 = !memcmp(token, "mclease2", 8);
	if (!v2 && memcmp(token, "mclease1", 8))
		return "not an mclease1 or mclease2 token";
	if (!signed_by(key, token))
		return "not signed by the service's lease key";
	if (!(v2 ? field(token + 56, FIELD_SIZE - 8, out->borrower) :
	      field(token + 48, FIELD_SIZE, out->borrower)) ||
	    !field(token + 112, FIELD_SIZE, out->server))
		return "a name fills its field";
	if (strcmp(out->server, server_name))
		return "a token for another server";
	memcpy(out->uuid, token + 8, 16);
	out->owner = get_u64(token + 24);
	out->quota_pages = get_u64(token + 32);
	out->issued_at = get_u64(token + 40);
	if (v2 && get_u64(token + 48) < lifetime)
		lifetime = get_u64(token + 48);
	/* Compared so that no sum overflows, whatever the token says. */
	if (out->issued_at > now + LEASE_CLOCK_SKEW)
		return "a token not valid yet (issued in the future)";
	if (now - (out->issued_at < now ? out->issued_at : now) >= lifetime)
		return "an expired token";
	out->expires_at = out->issued_at + lifetime;
	if (lease_revoked(out->owner, out->issued_at, now))
		return "a token of a revoked lease";
	return NULL;
}

/* Forget the revocations whose tokens have all expired. */
static void forget_revocations(uint64_t now)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i < nrevocations; i++)
		if (revocations[i].until > now)
			revocations[kept++] = revocations[i];
	nrevocations = kept;
}

int lease_revoked(uint64_t owner, uint64_t issued_at, uint64_t now)
{
	for (uint32_t i = 0; i < nrevocations; i++)
		if (revocations[i].until > now &&
		    revocations[i].owner == owner &&
		    issued_at <= revocations[i].revoked_at)
			return 1;
	return 0;
}

int lease_revoke(uint64_t owner, uint64_t revoked_at, uint64_t now,
		 uint64_t max_lifetime)
{
	if (revoked_at > now + LEASE_CLOCK_SKEW)
		revoked_at = now + LEASE_CLOCK_SKEW;
	uint64_t until = revoked_at + max_lifetime + LEASE_CLOCK_SKEW;
	for (uint32_t i = 0; i < nrevocations; i++)
		if (revocations[i].owner == owner) {
			if (revoked_at > revocations[i].revoked_at) {
				revocations[i].revoked_at = revoked_at;
				revocations[i].until = until;
			}
			return 0;
		}
	if (nrevocations == LEASE_REVOCATIONS)
		forget_revocations(now);
	if (nrevocations == LEASE_REVOCATIONS)
		return -1;
	revocations[nrevocations++] = (struct revocation){
		.owner = owner, .revoked_at = revoked_at, .until = until };
	return 0;
}
