/*
 * The pager's insides, shared by pager.c (swap-out, stores backing
 * off), fault.c (fault service and fetching pages back) and
 * pager_setup.c (taking charge of a registration, fresh or from a pager
 * that died, and letting go of it).  Not an interface.
 */
#ifndef PAGER_INTERNAL_H
#define PAGER_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include "pager.h"
#include "state.h"

enum { PG_IN = 0, PG_SWAPPING = 1, PG_OUT = 2 };

#define BATCH 512
/* A fault right after the last one's page (a sequential read) brings
 * this many pages after it from the same store, in one get_run. */
#define READ_AHEAD 16
/* Copies of pages come back in, deleted in sorted runs once this many
 * wait, or the fault thread has nothing else to do. */
#define DELETE_BATCH 256
#define MAX_SAMPLES (1 << 18)   /* per source, the latest kept */
#define NO_SLOT UINT32_MAX
#define LATENCIES (PAGER_NSOURCES + 1)    /* sources, then MINOR */

struct region {
	uint64_t base, first, npages;   /* first: its first page's index */
	off_t offset;
	int memfd;
};

/* The memfd extents last found (see pager_resident). */
struct cursor {
	const struct region *r;
	off_t from, lo, hi;
};

/* A bounded log of page numbers: head counts writes, tail takes. */
struct event_log {
	uint64_t pages[PAGER_EVENT_LOG];
	uint64_t head, tail;
};

/* This pager's view of the shared cache pool (pool.c). */
struct pool {
	struct pager_pool *shared;  /* NULL: no pool; the caller's */
	uint64_t owner;
	uint32_t *slot_of;          /* per page: the slot it went to, or
				     * NO_SLOT; another pager may have
				     * reused that slot since */
};

struct pager {
	int uffd, stopfd;
	struct region region[PAGER_MAX_REGIONS];
	int nregions;
	uint64_t npages, features, pid;
	struct pager_store *stores[PAGER_MAX_STORES];
	int nstores, copies;        /* copies 0: every store swapped to */
	unsigned swap_to;           /* the stores swap-outs write to, a bit
				     * each; 0: every store */
	struct sampler *sampler;    /* set under the lock, once */

	struct page_crypt *crypt;   /* seals copies (swap-out), opens
				     * them (under the lock) */

	pthread_mutex_t lock;       /* states, versions, tags, have, stats */
	pthread_mutex_t swap_lock;  /* one swap-out at a time; stores */
	struct page_states ps;
	uint64_t pages_out;
	struct pager_stats st;
	struct pool pool;
	struct event_log *faults, *cancels;
	int source[PAGER_MAX_STORES];
	uint64_t down_until[PAGER_MAX_STORES], backoff[PAGER_MAX_STORES];

	uint32_t *samples[LATENCIES];   /* fault service times, ns */
	uint64_t nsamples[LATENCIES];

	/* Under the lock: pages whose copies in store i go at the next
	 * flush (fault.c), and how many. */
	uint64_t deletes[PAGER_MAX_STORES][DELETE_BATCH];
	size_t ndeletes[PAGER_MAX_STORES];
	int deletes_waiting;        /* some ndeletes[i] > 0 (atomic reads) */
	uint64_t last_fault;        /* the last page fetched on a fault, or
				     * read ahead after it */

	pthread_t thread;
	char *fault_buf;            /* one page, fault thread only */
	char *ahead_buf;            /* READ_AHEAD pages, fault thread only */
	char *swap_buf;             /* BATCH pages, swap-out only */
};

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static inline const struct region *region_of(const struct pager *p,
						 uint64_t pg)
{
	int i = p->nregions - 1;

	while (i > 0 && p->region[i].first > pg)
		i--;
	return &p->region[i];
}

static inline uint64_t addr_of(const struct pager *p, uint64_t pg)
{
	const struct region *r = region_of(p, pg);

	return r->base + (pg - r->first) * PAGER_PAGE;
}

static inline off_t file_offset(const struct pager *p, uint64_t pg)
{
	const struct region *r = region_of(p, pg);

	return r->offset + (off_t)((pg - r->first) * PAGER_PAGE);
}

/* Of the n pages from pg, how many are in pg's region. */
static inline uint64_t in_region(const struct pager *p, uint64_t pg,
				 uint64_t n)
{
	const struct region *r = region_of(p, pg);

	return r->first + r->npages - pg < n ? r->first + r->npages - pg : n;
}

/* pager.c */
int pager_write_protect(struct pager *p, uint64_t pg, uint64_t n, int on);
void pager_wake(struct pager *p, uint64_t pg, uint64_t n);
int pager_resident(struct pager *p, uint64_t pg, struct cursor *c);
/* Store i's back-off, under the lock: down (a call failed for want of
 * the store, or it could not reach its server when opened), failed
 * (down unless errno says only that copy is gone), up (it answered). */
void pager_store_down(struct pager *p, int i);
void pager_store_failed(struct pager *p, int i);
void pager_store_up(struct pager *p, int i);

/* fault.c */
void *pager_fault_thread(void *arg);
/* Delete the copies of pages back in that wait for it, under the lock. */
void pager_flush_deletes(struct pager *p);

#endif
