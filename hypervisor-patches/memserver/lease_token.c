/*
 * Lease token checks (lease_token.h) with OpenSSL's EVP Ed25519: the same
 * check as memcanal.service.lease_tokens.verify, plus the server name.
 */
#include "lease_token.h"

#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>

#include "protocol.h"

#define SIGNED_SIZE 176
#define FIELD_SIZE 64

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

/* A NUL-padded field as a string; 0 if it fills the field (no NUL). */
static int field(const uint8_t *raw, char out[FIELD_SIZE + 1])
{
	size_t n = strnlen((const char *)raw, FIELD_SIZE);
	memcpy(out, raw, n);
	out[n] = '\0';
	return n < FIELD_SIZE;
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
			      struct lease *out)
{
	if (len != LEASE_TOKEN_SIZE)
		return "not a 240-byte lease token";
	if (memcmp(token, "mclease1", 8))
		return "not an mclease1 token";
	if (!signed_by(key, token))
		return "not signed by the service's lease key";
	if (!field(token + 48, out->borrower) ||
	    !field(token + 112, out->server))
		return "a name fills its field";
	if (strcmp(out->server, server_name))
		return "a token for another server";
	memcpy(out->uuid, token + 8, 16);
	out->owner = get_u64(token + 24);
	out->quota_pages = get_u64(token + 32);
	out->issued_at = get_u64(token + 40);
	return NULL;
}
