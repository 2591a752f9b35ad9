/*
 * The pager's per-page state (state.c): states, which stores hold each
 * page's copies, the version each was sealed at and its tag (crypt.h),
 * in memory or in a state file that outlives the pager, so that the
 * next one can take over.
 */
#ifndef STATE_H
#define STATE_H

#include "crypt.h"
#include "pager.h"

/* How the registration's pages are sealed: kept with the states, so a
 * pager taking over derives the same key, or is refused. */
struct state_seal {
	uint8_t salt[PAGER_SALT_SIZE];
	uint8_t key_id[PAGER_KEY_ID_SIZE];   /* zeros: plaintext */
	uint64_t sealed;                     /* 1: AES-256-GCM */
};

struct page_states {
	uint8_t *state;      /* PG_IN, PG_SWAPPING, PG_OUT (pager.c) */
	uint8_t *have;       /* bit i: store i holds the page's copy */
	uint64_t *version;   /* of the copies: up before each swap-out */
	uint8_t (*tag)[PAGER_TAG_SIZE];   /* the copies' tag (checksum) */
	struct state_seal *seal;
	void *map;           /* the state file's mapping, or NULL */
	size_t len;
	int fd;              /* locked: one live pager per file */
};

/*
 * The states of reg->npages pages: in memory (path NULL, all IN), or in
 * the state file path.  A fresh registration starts the file anew (all
 * IN, header *reg, seal zero: the caller fills it in); an adopted one
 * must find *reg there, except for the features, which it takes from
 * the file.  0, or -1 with errno (ESTALE: the file describes another
 * registration).
 */
int states_open(struct page_states *s, const char *path,
		struct pager_registration *reg, int fresh);
void states_close(struct page_states *s);

#endif
