/*
 * memcanal-pager's state (pager_main.c) and its JSON answers (report.c).
 */
#ifndef DAEMON_H
#define DAEMON_H

#include <stdio.h>

#include "crypt.h"
#include "guest.h"
#include "pager.h"

#define LINE_MAX_LEN 4096

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
	int nstores, copies;         /* copies 0: every store */
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
 * lease token, base64, tcp:HOST:PORT), or NULL with why (JSON-safe).
 */
struct pager_store *open_store(const char *spec, const char *token,
			       uint64_t owner, const char *ca_file,
			       char *why, size_t len);

/* report.c: one JSON object each, or (print_u64s, print_stores, and
 * print_stats, which closes it) part of one. */
void print_u64s(FILE *f, const char *key, const uint64_t *v, size_t n);
void print_error(FILE *f, const char *what);
void print_stats(FILE *f, struct daemon *d);
void print_stores(FILE *f, struct daemon *d);
void print_attached(FILE *f, struct daemon *d, const char *event);
void print_samples(FILE *f, struct daemon *d);

#endif
