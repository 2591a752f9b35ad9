/*
 * Sealing pages (crypt.h): AES-256-GCM from OpenSSL's EVP, one context
 * for sealing (the swap-out) and one for opening (the fault service), so
 * the two never share state.  The key is set once per context; each page
 * only sets its nonce.
 *
 *   key   = HKDF-SHA256(VM key, salt of the registration,
 *                       "memcanal page key v1"), first 32 bytes
 *   nonce = le64(version) || le32(page)                (96 bits)
 *   AAD   = "mcpage1\0" || le64(owner) || le64(page) || le64(version)
 *
 * A version is never sealed twice under one key: it goes up before each
 * swap-out of its page and is stored in the state file first (pager.c),
 * and a new registration, whose versions start again, has a new salt.
 */
#define _GNU_SOURCE
#include "crypt.h"
#include "pager.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#define NONCE_SIZE 12
#define AAD_MAGIC "mcpage1"      /* with its NUL: 8 bytes */
#define HKDF_INFO "memcanal page key v1"

struct page_crypt {
	EVP_CIPHER_CTX *seal, *open;   /* NULL: plaintext, checksummed */
	uint64_t owner;
};

int pager_read_secret(const char *path, const char *what, void *buf,
		      size_t size)
{
	/* O_NONBLOCK: a FIFO planted there must not hang the pager. */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
		      O_CLOEXEC);
	char why[96] = "";
	struct stat st;

	if (fd < 0)
		snprintf(why, sizeof(why), "%s", errno == ELOOP ?
			 "a symbolic link" : strerror(errno));
	else if (fstat(fd, &st))
		snprintf(why, sizeof(why), "%s", strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(why, sizeof(why), "not a regular file");
	else if (st.st_uid != geteuid())
		snprintf(why, sizeof(why), "owned by uid %u, not %u",
			 (unsigned)st.st_uid, (unsigned)geteuid());
	else if ((st.st_mode & 07777) != 0600)
		snprintf(why, sizeof(why), "mode %04o, not 0600",
			 (unsigned)(st.st_mode & 07777));
	else if ((size_t)st.st_size != size)
		snprintf(why, sizeof(why), "%lld bytes, not %zu",
			 (long long)st.st_size, size);
	else if (read(fd, buf, size) != (ssize_t)size)
		snprintf(why, sizeof(why), "cannot read %zu bytes", size);
	if (fd >= 0)
		close(fd);
	if (!*why)
		return 0;
	OPENSSL_cleanse(buf, size);
	fprintf(stderr, "pager: %s %s refused: %s\n", what, path, why);
	return -1;
}

int pager_read_key(const char *path, uint8_t key[PAGER_KEY_SIZE])
{
	return pager_read_secret(path, "key file", key, PAGER_KEY_SIZE);
}

int page_crypt_salt(uint8_t salt[PAGER_SALT_SIZE])
{
	return RAND_bytes(salt, PAGER_SALT_SIZE) == 1 ? 0 : -1;
}

/* The registration's AES key, then its key id, from the VM's key. */
static int derive(const uint8_t *key, const uint8_t *salt, uint8_t *out,
		  size_t len)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 "SHA256", 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						  (void *)key, PAGER_KEY_SIZE),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
						  (void *)salt,
						  PAGER_SALT_SIZE),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
						  HKDF_INFO,
						  sizeof(HKDF_INFO) - 1),
		OSSL_PARAM_construct_end(),
	};
	int ok = ctx && EVP_KDF_derive(ctx, out, len, params) == 1;

	EVP_KDF_CTX_free(ctx);
	EVP_KDF_free(kdf);
	return ok ? 0 : -1;
}

static EVP_CIPHER_CTX *cipher(const uint8_t *aes_key, int seal)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

	if (ctx && EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, aes_key,
				     NULL, seal) == 1)
		return ctx;
	EVP_CIPHER_CTX_free(ctx);
	return NULL;
}

struct page_crypt *page_crypt_new(const uint8_t *key,
				  const uint8_t salt[PAGER_SALT_SIZE],
				  uint64_t owner,
				  uint8_t key_id[PAGER_KEY_ID_SIZE])
{
	struct page_crypt *c = calloc(1, sizeof(*c));
	uint8_t out[PAGER_KEY_SIZE + PAGER_KEY_ID_SIZE];

	if (!c)
		return NULL;
	c->owner = owner;
	memset(key_id, 0, PAGER_KEY_ID_SIZE);
	if (!key)
		return c;
	if (!derive(key, salt, out, sizeof(out))) {
		c->seal = cipher(out, 1);
		c->open = cipher(out, 0);
		memcpy(key_id, out + PAGER_KEY_SIZE, PAGER_KEY_ID_SIZE);
	}
	OPENSSL_cleanse(out, sizeof(out));
	if (c->seal && c->open)
		return c;
	fprintf(stderr, "pager: AES-256-GCM: %s\n",
		ERR_reason_error_string(ERR_peek_last_error()) ?: "failed");
	ERR_clear_error();
	page_crypt_free(c);
	return NULL;
}

void page_crypt_free(struct page_crypt *c)
{
	if (!c)
		return;
	EVP_CIPHER_CTX_free(c->seal);
	EVP_CIPHER_CTX_free(c->open);
	free(c);
}

int page_crypt_sealed(const struct page_crypt *c)
{
	return c->seal != NULL;
}

/* Cheap 64-bit page checksum: catches a store that lost or zeroed data
 * (plaintext pagers only: anyone can compute it). */
static uint64_t page_sum(const void *buf)
{
	const uint64_t *w = buf;
	uint64_t h = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < PAGER_PAGE / 8; i++) {
		h ^= w[i] + i;
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	return h;
}

/* The nonce and AAD of (owner, page, version). */
static void bind(const struct page_crypt *c, uint64_t page,
		 uint64_t version, uint8_t nonce[NONCE_SIZE], uint8_t aad[32])
{
	uint64_t v = htole64(version), pg = htole64(page),
		 owner = htole64(c->owner);
	uint32_t pg32 = htole32((uint32_t)page);

	memcpy(nonce, &v, 8);
	memcpy(nonce + 8, &pg32, 4);
	memcpy(aad, AAD_MAGIC, 8);
	memcpy(aad + 8, &owner, 8);
	memcpy(aad + 16, &pg, 8);
	memcpy(aad + 24, &v, 8);
}

int page_seal(struct page_crypt *c, uint64_t page, uint64_t version,
	      void *buf, uint8_t tag[PAGER_TAG_SIZE])
{
	uint8_t nonce[NONCE_SIZE], aad[32], tail[32];
	int len = 0, ok;

	if (!c->seal) {
		uint64_t sum = page_sum(buf);

		memset(tag, 0, PAGER_TAG_SIZE);
		memcpy(tag, &sum, sizeof(sum));
		return 0;
	}
	bind(c, page, version, nonce, aad);
	ok = EVP_EncryptInit_ex(c->seal, NULL, NULL, NULL, nonce) == 1 &&
	     EVP_EncryptUpdate(c->seal, NULL, &len, aad, sizeof(aad)) == 1 &&
	     EVP_EncryptUpdate(c->seal, buf, &len, buf, PAGER_PAGE) == 1 &&
	     len == PAGER_PAGE &&
	     EVP_EncryptFinal_ex(c->seal, tail, &len) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c->seal, EVP_CTRL_GCM_GET_TAG,
				 PAGER_TAG_SIZE, tag) == 1;
	if (ok)
		return 0;
	ERR_clear_error();
	errno = EIO;
	return -1;
}

int page_open(struct page_crypt *c, uint64_t page, uint64_t version,
	      void *buf, const uint8_t tag[PAGER_TAG_SIZE])
{
	uint8_t nonce[NONCE_SIZE], aad[32], tail[32];
	int len = 0, ok;

	if (!c->open) {
		uint64_t sum = page_sum(buf);

		return memcmp(tag, &sum, sizeof(sum)) ? -1 : 0;
	}
	bind(c, page, version, nonce, aad);
	ok = EVP_DecryptInit_ex(c->open, NULL, NULL, NULL, nonce) == 1 &&
	     EVP_DecryptUpdate(c->open, NULL, &len, aad, sizeof(aad)) == 1 &&
	     EVP_DecryptUpdate(c->open, buf, &len, buf, PAGER_PAGE) == 1 &&
	     len == PAGER_PAGE &&
	     EVP_CIPHER_CTX_ctrl(c->open, EVP_CTRL_GCM_SET_TAG,
				 PAGER_TAG_SIZE, (void *)tag) == 1 &&
	     EVP_DecryptFinal_ex(c->open, tail, &len) == 1;
	if (ok)
		return 0;
	/* Never let an unauthenticated page's bytes be used. */
	memset(buf, 0, PAGER_PAGE);
	ERR_clear_error();
	return -1;
}
