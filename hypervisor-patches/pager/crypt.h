/*
 * Sealing pages before they leave the pager (crypt.c, issue #25): every
 * copy a store or the pool holds is AES-256-GCM ciphertext under a key
 * only the VM's host has, authenticated with the VM (owner), the page
 * and the page's version; the tag and the version stay in the pager's
 * state.  A copy that does not open (forged, another page's, another
 * VM's, an older version's) is refused like a lost one.
 *
 * Without a key, pages go out in plaintext and the "tag" is a 64-bit
 * checksum, which catches a store that lost data but not one that lies.
 */
#ifndef CRYPT_H
#define CRYPT_H

#include <stddef.h>
#include <stdint.h>

#define PAGER_KEY_SIZE 32
#define PAGER_TAG_SIZE 16
#define PAGER_SALT_SIZE 32
#define PAGER_KEY_ID_SIZE 16

/*
 * Read a secret of exactly size bytes from path into buf: a regular file
 * (not a symbolic link) owned by the caller's effective uid, mode 0600;
 * what names it in the reason.  0, or -1 with the reason on stderr
 * ("pager: WHAT PATH refused: WHY").
 */
int pager_read_secret(const char *path, const char *what, void *buf,
		      size_t size);

/* A VM's key: pager_read_secret of PAGER_KEY_SIZE bytes, a "key file". */
int pager_read_key(const char *path, uint8_t key[PAGER_KEY_SIZE]);

/* Fill salt with random bytes for a new registration.  0, or -1. */
int page_crypt_salt(uint8_t salt[PAGER_SALT_SIZE]);

struct page_crypt;

/*
 * The sealing of one registration's pages: the AES key is derived from
 * the VM's key and the registration's salt (HKDF-SHA256), so that a new
 * registration under the same VM key (its QEMU restarted, versions from
 * 1 again) never repeats a nonce.  key NULL: plaintext, checksummed.
 * key_id gets a value that names the derived key (the state file keeps
 * it: a pager taking over with another key is refused, rather than
 * finding every page forged).  NULL on failure.
 */
struct page_crypt *page_crypt_new(const uint8_t *key,
				  const uint8_t salt[PAGER_SALT_SIZE],
				  uint64_t owner,
				  uint8_t key_id[PAGER_KEY_ID_SIZE]);
void page_crypt_free(struct page_crypt *c);
int page_crypt_sealed(const struct page_crypt *c);

/*
 * Seal one page in place and make its tag.  One caller at a time (the
 * swap-out).  0, or -1 (OpenSSL failed: nothing may go out).
 */
int page_seal(struct page_crypt *c, uint64_t page, uint64_t version,
	      void *buf, uint8_t tag[PAGER_TAG_SIZE]);

/*
 * Open one page in place: 0 if it is the sealed copy of this page at
 * this version, else -1 (buf then holds nothing usable).  One caller at
 * a time (the fault service, under the pager's lock).
 */
int page_open(struct page_crypt *c, uint64_t page, uint64_t version,
	      void *buf, const uint8_t tag[PAGER_TAG_SIZE]);

#endif
