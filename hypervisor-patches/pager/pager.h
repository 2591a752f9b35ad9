/*
 * pager: swap shared memfds' pages out to stores and serve them back on
 * fault, through a userfaultfd registered on mappings of the memfds; and
 * sample which pages are accessed (sampler.c), from the same faults.
 *
 * The mappings may belong to another process (QEMU): a region's base is
 * an address in the uffd's memory map, and its memfd is read and punched
 * through its own descriptor.  Pages are numbered in one index space,
 * region 0's first, then region 1's...  See README.md for the protocol
 * and its races.
 */
#ifndef PAGER_H
#define PAGER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PAGER_PAGE 4096UL
#define PAGER_MAX_STORES 4
#define PAGER_MAX_REGIONS 8
/* Faults (and cancels) kept for pager_take_events. */
#define PAGER_EVENT_LOG 65536

/*
 * A place that keeps copies of pages, addressed by page index.  Every
 * call returns 0 on success, -1 with errno set on failure.  put must not
 * return before the copy is durable enough to be the only one.  get
 * reads one page; a short or failed read is a failure, and the pager
 * authenticates what comes back (crypt.h), so a store that lost, forged
 * or replayed data is caught too.  What a store is given is sealed
 * (unless the pager has no key).  Calls on one store are serialised by
 * the pager's callers: put from the swap-out caller, get/del from the
 * fault thread, so an implementation shared by both must be
 * thread-safe.
 */
/* count pages from page first, their data at buf (pager_store.put_runs). */
struct pager_run {
	uint64_t first;
	size_t count;
	const void *buf;
};

struct pager_store {
	const char *name;
	const char *kind;   /* "file" or "tcp": the fault latency source */
	/* Set by a store whose server could not be reached as it was
	 * opened (a memory server down): the pager starts it backing off,
	 * serving from the other copies, and tries it again later. */
	int down;
	int (*put)(struct pager_store *s, uint64_t page, const void *buf,
		   size_t npages);
	/* Optional: put of every run, as one operation (a remote store
	 * sends them all before waiting for any acknowledgement). */
	int (*put_runs)(struct pager_store *s, const struct pager_run *runs,
			size_t nruns);
	int (*get)(struct pager_store *s, uint64_t page, void *buf);
	/* Optional: npages pages from page, all or none (ENOENT: one is
	 * missing), for the fault thread's read-ahead. */
	int (*get_run)(struct pager_store *s, uint64_t page, void *buf,
		       size_t npages);
	int (*del)(struct pager_store *s, uint64_t page, size_t npages);
	void (*destroy)(struct pager_store *s);
};

/* A store in a local file: page i at offset i * PAGER_PAGE. */
struct pager_store *pager_file_store(const char *path);

/*
 * A store on a memcanal-memserver at host:port, pages keyed by owner.
 * The server drops pages when it likes: never the only copy.
 */
struct pager_store *pager_tcp_store(const char *host, const char *port,
				    uint64_t owner);

/* Ask the memserver behind a tcp store to drop every page it holds. */
int pager_tcp_store_reclaim_all(struct pager_store *s);

/* Where a fault's page came from, for its latency. */
enum pager_source { PAGER_SRC_POOL, PAGER_SRC_FILE, PAGER_SRC_TCP,
		    PAGER_NSOURCES };
extern const char *const pager_source_names[PAGER_NSOURCES];
/* pager_fault_latency of MINOR faults (UFFDIO_CONTINUE), not a source. */
#define PAGER_LAT_MINOR PAGER_NSOURCES

/* The steps of a swap-out batch (pager.c), timed in pager_stats. */
enum pager_swap_phase { PAGER_PHASE_MARK, PAGER_PHASE_READ,
			PAGER_PHASE_SEAL, PAGER_PHASE_PUT,
			PAGER_PHASE_VALIDATE, PAGER_SWAP_PHASES };
extern const char *const pager_swap_phase_names[PAGER_SWAP_PHASES];

struct pager_stats {
	uint64_t swapped_out;       /* pages dropped from the memfd */
	uint64_t cancelled;         /* marked pages written before validate */
	uint64_t not_resident;      /* asked for, but a hole already */
	uint64_t faults_missing;
	uint64_t faults_wp;
	uint64_t faults_minor;      /* mapping zapped, page in the memfd */
	uint64_t deferred;          /* faults waiting for a store added later */
	uint64_t zero_fills;        /* never-populated pages filled */
	uint64_t wakes;             /* EEXIST answered with UFFDIO_WAKE */
	uint64_t wp_on_out;         /* writes that raced the punch */
	uint64_t put_failed_batches;/* batches kept in: too few copies */
	uint64_t lost;              /* no store had a copy: zeros */
	uint64_t unauthentic;       /* fetches refused: every copy that came
				     * back was bad (forged): not served */
	uint64_t unauthentic_page;  /* the last such page */
	uint64_t pool_bad;          /* pool copies that did not open */
	uint64_t sealed;            /* 1: copies are AES-256-GCM sealed */
	uint64_t swapped_in;        /* brought back by pager_swap_in */
	uint64_t read_ahead;        /* brought back after a sequential fault */
	uint64_t pool_pages;        /* OUT pages whose data the pool holds */
	uint64_t pool_capacity;     /* slots, shared by the pool's pagers */
	uint64_t pool_recovered;    /* see pager_pool_recovered */
	uint64_t source_faults[PAGER_NSOURCES];
	uint64_t adopted;           /* 1: took over a registration */
	uint64_t reconciled;        /* pages set back IN when adopting */
	uint64_t served[PAGER_MAX_STORES];
	uint64_t get_failed[PAGER_MAX_STORES];
	uint64_t bad_sum[PAGER_MAX_STORES];
	uint64_t put_failed[PAGER_MAX_STORES];
	uint64_t skipped_down[PAGER_MAX_STORES]; /* not tried: backing off */
	/* Where swap-outs spent their time, ns: each phase (below), and
	 * each store's puts (part of PAGER_PHASE_PUT). */
	uint64_t swap_ns[PAGER_SWAP_PHASES];
	uint64_t put_ns[PAGER_MAX_STORES];
};

/*
 * TMemCanal's shared cache pool: a ring of page slots, the oldest
 * overwritten, in a shared mapping of the file path (or an anonymous
 * one, path NULL: one pager's own).  Every pager mapping the same file
 * shares its capacity; pages are keyed by (owner, page), owner naming
 * the guest.  The first to open the file creates it for `pages` slots;
 * later ones check it and keep its size.  A process killed while using
 * the pool does not wedge the others (a robust mutex).
 *
 * The file holds guests' pages (sealed, from pagers with a key) and the
 * lock every pager takes: its directory must be owned by root (or the
 * caller's euid) and writable by no one else, it is created O_EXCL mode
 * 0600, never opened through a symbolic link, and an existing one is
 * used only if it is a regular file of the caller's euid, mode 0600
 * (else NULL, and why on stderr).
 */
struct pager_pool;

struct pager_pool *pager_pool_open(const char *path, size_t pages);
size_t pager_pool_capacity(const struct pager_pool *q);
/* Copy a page in over the oldest slot; returns the slot. */
uint32_t pager_pool_put(struct pager_pool *q, uint64_t owner, uint64_t page,
			const void *data);
/* Move (owner, page) out of slot into buf: 0 if the slot holds another
 * page now (reused by a later put, any pager's). */
int pager_pool_take(struct pager_pool *q, uint32_t slot, uint64_t owner,
		    uint64_t page, void *buf);
/* slot_of[page] = the slot holding owner's page, for pages < npages
 * (a pager taking over from one that died). */
void pager_pool_find(struct pager_pool *q, uint64_t owner,
		     uint32_t *slot_of, uint64_t npages);
/* Slots holding a page of owner. */
uint64_t pager_pool_count(struct pager_pool *q, uint64_t owner);
/* Times a process died holding the pool's mutex and another went on. */
uint64_t pager_pool_recovered(struct pager_pool *q);
void pager_pool_close(struct pager_pool *q);

/*
 * Optional parts.  state_path: a file mapping each page's state and its
 * copies' version and tag, updated before the step each change
 * describes, so that a pager started after a crash can take over (see
 * pager_init).  pid names the registration, with the memfds' inodes and
 * the regions, so that a state file of another one is never adopted.
 * pool: the shared cache pool (above, opened by the caller, who closes
 * it after pager_fini) that swapped-out pages go to, served before any
 * store.  owner names the guest: it keys this pager's pages in the pool
 * (it must differ between pagers sharing a pool) and is bound into every
 * sealed page.  key: the VM's PAGER_KEY_SIZE-byte key (pager_read_key):
 * every copy is sealed with a key derived from it (crypt.h); NULL:
 * plaintext, checksummed.
 */
struct pager_opts {
	const char *state_path;
	uint64_t pid;
	struct pager_pool *pool;
	uint64_t owner;
	const uint8_t *key;
};

/* One mapping of a memfd: len bytes at base (in the uffd's memory map),
 * from offset in memfd. */
struct pager_region {
	uint64_t base, len;
	off_t offset;
	int memfd;
};

/* What a state file says it describes (pager_state_registration). */
struct pager_registration {
	uint64_t pid, features, nregions, npages;
	struct pager_registered {
		uint64_t base, len, offset, inode;
	} region[PAGER_MAX_REGIONS];
};

struct pager;

/*
 * Take charge of the regions (1..PAGER_MAX_REGIONS).  Does UFFDIO_API
 * (MISSING_SHMEM | WP_HUGETLBFS_SHMEM | MINOR_SHMEM, without MINOR if
 * the kernel refuses it) and UFFDIO_REGISTER (MISSING | WP | MINOR) of
 * every region on the uffd, and starts the fault thread.  A page goes
 * out only once `copies` stores hold it (0: every store there is then).
 * nstores may be 0: pager_add_store adds stores later.  The pager does
 * not own uffd, memfds or stores.
 *
 * With opts->key, at most 2^32 pages (the nonce has 32 bits of page).
 *
 * A uffd already set up (its pager died) is adopted instead, if
 * opts->state_path describes the same registration, sealed with the
 * same key (or both plaintext): no second API; the
 * features the state file records are registered again (the kernel
 * keeps ranges the same uffd holds); pages SWAPPING go back IN, OUT
 * pages still resident too, every IN page is un-protected, and every
 * region is woken so that threads whose faults (MINOR ones included)
 * the dead pager had read fault again.  The stores must be the same,
 * in the same order (added later is fine: a fault on a page only they
 * hold waits for them).  opts may be NULL.
 */
struct pager *pager_init(int uffd, const struct pager_region *regions,
			 int nregions, struct pager_store **stores,
			 int nstores, int copies,
			 const struct pager_opts *opts);

/*
 * The registration a state file describes, for a pager that must find
 * the uffd and memfds again (pidfd_getfd): 0, or -1 if there is none.
 */
int pager_state_registration(const char *state_path,
			     struct pager_registration *reg);

/* Append a store (-1, ENOSPC: PAGER_MAX_STORES already); faults waiting
 * for it go on. */
int pager_add_store(struct pager *p, struct pager_store *s);

/* s, one of the pager's stores, now presents a new credential (a newer
 * lease): it stops backing off, so that its next call tries it.  0, or
 * -1 (ENOENT: not a store of this pager). */
int pager_store_renewed(struct pager *p, struct pager_store *s);

/*
 * The stores later swap-outs write to: bit i for store i (0: every
 * store, the default), `copies` of them (0: all) acknowledging each
 * page.  Pages out already keep their copies where they are.  0, or -1
 * (EINVAL: a bit past the stores there are).
 */
int pager_swap_to(struct pager *p, unsigned stores);

/* Pages in the index space; 1 if MINOR faults are registered. */
uint64_t pager_npages(struct pager *p);
int pager_has_minor(struct pager *p);

/*
 * Swap out the listed page indexes (any order; pages already out, or
 * not resident, are skipped).  One caller at a time.  Returns the
 * number of pages dropped, or -1 on a fatal error (ENODEV: fewer stores
 * than copies).
 */
long pager_swap_out(struct pager *p, const uint64_t *pages, size_t n);

/*
 * Bring the OUT pages among first..first+count-1 back in without a
 * fault (prefetch): while sampling, into the memfd only, so that each
 * one's first access still faults (MINOR) and is recorded.  Returns the
 * number of pages brought in.
 */
long pager_swap_in(struct pager *p, uint64_t first, uint64_t count);

/*
 * Take the pages that faulted in from OUT (cancelled = 0) or whose
 * swap-out a write cancelled (cancelled = 1) since the last call, in
 * order, up to max; *overflow (if not NULL) gets how many were dropped
 * from the bounded log since the last call.  Returns how many.
 */
size_t pager_take_events(struct pager *p, int cancelled, uint64_t *pages,
			 size_t max, uint64_t *overflow);

/* Counters so far. */
void pager_get_stats(struct pager *p, struct pager_stats *out);

/*
 * Service time of faults answered from `source` (-1: any source), in
 * microseconds, from reading the fault to the UFFDIO_COPY that wakes the
 * faulting thread, over the latest samples; PAGER_LAT_MINOR: MINOR
 * faults, from reading the fault to the UFFDIO_CONTINUE.  Returns the
 * number of samples.
 */
size_t pager_fault_latency(struct pager *p, int source, double *p50,
			   double *p99);

/* Pages currently out. */
uint64_t pager_pages_out(struct pager *p);

/*
 * Access sampling (sampler.c).  Every interval, the pages of a fixed
 * hashed sample (SHARDS' hash of the page index and salt, below
 * rate * 2^24; memcanal.estimation.mrc.sample_mask gives the same set)
 * have their mappings zapped by `zap` (QEMU's shim: madvise), so the
 * next access to each is a MINOR fault; every full_pass_every-th
 * interval zaps every page instead.  Every fault of any kind is recorded
 * as an access of the interval it comes in (a write if it says so or
 * is a WP fault); sampled pages read are mapped write-protected, so a
 * later write is seen too.
 */
struct pager_sampling {
	double rate;                  /* (0, 1] */
	uint64_t salt;
	unsigned interval_ms;         /* 0: intervals end on pager_sample_tick */
	unsigned full_pass_every;     /* 0: never */
};

/* Zap the runs ({first, count} page index pairs): 0 and *zapped, or -1
 * (the sampler goes on recording faults, zapping nothing). */
typedef int (*pager_zap_fn)(void *arg, const uint64_t *runs, size_t nruns,
			    uint64_t *zapped);

/* A completed interval: runs are sorted {first, count} pairs; the
 * sample it zapped (rate, salt) and whether its zap was of every page
 * of it (whole) or only of those touched in the interval before. */
struct pager_interval {
	uint64_t index, start_ns, end_ns, zapped, zap_ns;
	int full, whole;
	double rate;
	uint64_t salt;
	size_t ntouched, nwritten;
	uint64_t *touched, *written;
};

struct pager_sampling_stats {
	struct pager_sampling cfg;
	uint64_t sampled_pages;
	uint64_t current;             /* the interval under way */
	uint64_t zapped, zap_ns;      /* the current interval's zap */
	uint64_t zap_requests, zap_ns_total, zap_failed;
	/* The latest zaps' times, [0] the sample's, [1] full passes': how
	 * many, p50, p99 (microseconds). */
	uint64_t zap_times[2];
	double zap_p50_us[2], zap_p99_us[2];
};

/* Start sampling: the first interval's zap now, then a thread ending
 * intervals every interval_ms.  0, or -1 (ENOTSUP: no MINOR faults;
 * EALREADY; EINVAL). */
int pager_start_sampling(struct pager *p, const struct pager_sampling *cfg,
			 pager_zap_fn zap, void *arg);
/* 1 and *st if sampling, else 0. */
int pager_sampling_stats(struct pager *p, struct pager_sampling_stats *st);
/* End the interval under way and zap for the next one now. */
int pager_sample_tick(struct pager *p);
/* The completed intervals since the last call, oldest first (free them
 * with pager_free_intervals); *overflow: how many the bounded queue
 * dropped meanwhile. */
size_t pager_take_intervals(struct pager *p, struct pager_interval **out,
			    uint64_t *overflow);
void pager_free_intervals(struct pager_interval *v, size_t n);
/* The sample as runs, a copy to free; returns how many runs. */
size_t pager_sample_runs(struct pager *p, uint64_t **runs);
/* Zap the sample of rate and salt from the next interval on, without
 * losing the one under way: 0, or -1 (ENOTSUP: not sampling; EINVAL). */
int pager_resample(struct pager *p, double rate, uint64_t salt);

/*
 * Stop the fault thread and free the pager.  Pages still out stay
 * out: whoever keeps the uffd open decides what happens to them.
 */
void pager_fini(struct pager *p);

#endif
