/*
 * memcanal-pager's state (pager_main.c) and its JSON answers (report.c).
 */
#ifndef DAEMON_H
#define DAEMON_H

#include <stdio.h>

#include "crypt.h"
#include "guest.h"
#include "pager.h"
#include "store_tls.h"

#define LINE_MAX_LEN 4096
/* A lease token's 240 bytes are 320 base64 characters, without padding. */
#define TOKEN_BASE64 (PAGER_LEASE_TOKEN_SIZE / 3 * 4)

/* Where commands come from and answers go: stdin/stdout, or a client of
 * the control socket. */
struct client {
	int fd;          /* -1: none */
	FILE *out;
	char buf[LINE_MAX_LEN];
	size_t len;
};

struct daemon {
	struct pager *p;             /* NULL until attached */
	struct guest g;
	int handed_over, pidfd, quit;
	struct pager_store *stores[PAGER_MAX_STORES];
	char *specs[PAGER_MAX_STORES];   /* each store's, as it was given */
	int nstores, copies;         /* copies 0: every store swapped to */
	unsigned swap_to;            /* pager_swap_to's; 0: every store */
	uint64_t owner;
	const char *tls_ca;          /* the CA tls: stores' servers chain to */
	uint8_t key[PAGER_KEY_SIZE]; /* opts.key until attached, then wiped */
	struct pager_opts opts;
	struct pager_sampling sampling;
	struct client client;
	int control;                 /* listening, or -1: stdin */
};

/*
 * stores.c: the store a spec names (file:PATH, tls:HOST:PORT with its
 * lease token, base64, tcp:HOST:PORT), or NULL with why (JSON-safe); a
 * memory server it cannot reach now gives the store `down`, and why.
 */
struct pager_store *open_store(const char *spec, const char *token,
			       uint64_t owner, const char *ca_file,
			       char *why, size_t len);

/* A newer lease token (base64) for s, the tls: store spec names: its
 * next connections present it.  0, or -1 and why. */
int renew_store(struct pager_store *s, const char *spec, const char *token,
		uint64_t owner, char *why, size_t len);

/* Keep s, the store spec names, as d's next (-1: out of memory); one
 * that cannot reach its server now (down) says why on stderr. */
int keep_store(struct daemon *d, const char *spec, struct pager_store *s,
	       const char *why);

/* The index of d's store given as spec, or -1. */
int find_store(struct daemon *d, const char *spec);

/* The lease token in the file at path (pager_read_secret's checks:
 * root's alone, TOKEN_BASE64 bytes), NUL-terminated.  0, or -1 (why on
 * stderr). */
int read_token_file(const char *path, char token[TOKEN_BASE64 + 1]);

/* report.c: one JSON object each, or (print_u64s, print_stores, and
 * print_stats, which closes it) part of one. */
void print_u64s(FILE *f, const char *key, const uint64_t *v, size_t n);
void print_error(FILE *f, const char *what);
void print_stats(FILE *f, struct daemon *d);
void print_stores(FILE *f, struct daemon *d);
/* The `store` or `swapto` answer (event): the stores; renewed: a
 * store's newer lease. */
void print_store(FILE *f, struct daemon *d, const char *event, int renewed);
void print_attached(FILE *f, struct daemon *d, const char *event);
void print_samples(FILE *f, struct daemon *d);

#endif
