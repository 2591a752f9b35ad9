/*
 * pager: mark, copy, validate swap-out and fault service on a userfaultfd.
 *
 * Page states: IN (in the memfd), SWAPPING (write-protected, being
 * copied), OUT (copies in the stores, hole punched in the memfd).  The
 * lock is held by the fault thread for a whole fault, and by swap-out
 * for mark (state + write-protect) and validate (state + punch), so the
 * fault thread never sees a state without the page table to match.
 *
 * With a state file, states and checksums live in a shared mapping of
 * it, each written before the step it describes (SWAPPING before the
 * write-protect, checksums and OUT before the punch, IN after the
 * UFFDIO_COPY), so a pager killed at any point leaves a file from which
 * the next one reconciles (pager_init).
 */
#define _GNU_SOURCE
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { PG_IN = 0, PG_SWAPPING = 1, PG_OUT = 2 };

#define BATCH 512
#define ZERO_BLOCK 16   /* pages, a power of two */
#define MAX_SAMPLES (1 << 18)   /* per source, the latest kept */
#define NO_SLOT UINT32_MAX
/* A store whose get failed is tried last for this long, doubling. */
#define BACKOFF_MIN_NS 250000000ULL
#define BACKOFF_MAX_NS 30000000000ULL
#define STATE_MAGIC 0x3174617473706d63ULL   /* "mcpstat1" */

const char *const pager_source_names[PAGER_NSOURCES] = {
	"pool", "file", "tcp",
};

/* The state file: this, then state[npages], have[npages], sum[npages]. */
struct state_header {
	uint64_t magic, registration[2], base, len, offset, npages, pad;
};

/* A bounded log of page numbers: head counts writes, tail takes. */
struct event_log {
	uint64_t pages[PAGER_EVENT_LOG];
	uint64_t head, tail;
};

/* This pager's view of the shared cache pool (pool.c). */
struct pool {
	struct pager_pool *shared;  /* NULL: no pool */
	uint64_t owner;
	uint32_t *slot_of;          /* per page: the slot it went to, or
				     * NO_SLOT; another pager may have
				     * reused that slot since */
};

struct pager {
	int uffd, memfd, stopfd;
	uint64_t base;
	off_t offset;
	uint64_t npages;
	struct pager_store *stores[PAGER_MAX_STORES];
	int nstores, copies;

	pthread_mutex_t lock;       /* states, sums, have, stats */
	pthread_mutex_t swap_lock;  /* one swap-out at a time */
	uint8_t *state;
	uint8_t *have;              /* bit i: store i holds the copy */
	uint64_t *sum;
	void *state_map;            /* the state file's mapping, or NULL */
	size_t state_len;
	int state_fd;               /* locked: one live pager per file */
	uint64_t pages_out;
	struct pager_stats st;
	struct pool pool;
	struct event_log *faults, *cancels;
	int source[PAGER_MAX_STORES];
	uint64_t down_until[PAGER_MAX_STORES], backoff[PAGER_MAX_STORES];

	uint32_t *samples[PAGER_NSOURCES];   /* fault service times, ns */
	uint64_t nsamples[PAGER_NSOURCES];

	pthread_t thread;
	char *fault_buf;            /* one page, fault thread only */
	char *swap_buf;             /* BATCH pages, swap-out only */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Cheap 64-bit page checksum: catches a store that lost or zeroed data. */
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

static uint64_t addr_of(struct pager *p, uint64_t pg)
{
	return p->base + pg * PAGER_PAGE;
}

static int write_protect(struct pager *p, uint64_t pg, uint64_t n, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = addr_of(p, pg), .len = n * PAGER_PAGE },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	while (ioctl(p->uffd, UFFDIO_WRITEPROTECT, &wp) < 0) {
		if (errno != EAGAIN) {
			perror("pager: UFFDIO_WRITEPROTECT");
			return -1;
		}
	}
	return 0;
}

static void wake(struct pager *p, uint64_t pg, uint64_t n)
{
	struct uffdio_range r = {
		.start = addr_of(p, pg), .len = n * PAGER_PAGE,
	};

	if (ioctl(p->uffd, UFFDIO_WAKE, &r) < 0)
		perror("pager: UFFDIO_WAKE");
	p->st.wakes++;
}

static int zero_page(struct pager *p, uint64_t pg, uint64_t mode)
{
	struct uffdio_zeropage z = {
		.range = { .start = addr_of(p, pg), .len = PAGER_PAGE },
		.mode = mode,
	};

	while (ioctl(p->uffd, UFFDIO_ZEROPAGE, &z) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno != EEXIST)
			perror("pager: UFFDIO_ZEROPAGE");
		return -1;
	}
	p->st.zero_fills++;
	return 0;
}

/*
 * A never-populated page: zeros, and zeros for the never-populated IN
 * pages of its aligned ZERO_BLOCK too (either direction), since first
 * touches come in runs; each would otherwise be a fault of its own.
 */
static void zero_fill(struct pager *p, uint64_t pg)
{
	uint64_t first = pg & ~(uint64_t)(ZERO_BLOCK - 1);

	if (zero_page(p, pg, 0) < 0)
		wake(p, pg, 1);   /* EEXIST: filled since the fault */
	for (uint64_t n = first; n < first + ZERO_BLOCK && n < p->npages; n++)
		if (n != pg && p->state[n] == PG_IN)
			zero_page(p, n, UFFDIO_ZEROPAGE_MODE_DONTWAKE);
}

static void copy_in(struct pager *p, uint64_t pg, const void *buf)
{
	struct uffdio_copy c = {
		.dst = addr_of(p, pg), .src = (uint64_t)(uintptr_t)buf,
		.len = PAGER_PAGE,
	};

	while (ioctl(p->uffd, UFFDIO_COPY, &c) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno == EEXIST)
			wake(p, pg, 1);
		else
			perror("pager: UFFDIO_COPY");
		return;
	}
}

static void log_event(struct event_log *log, uint64_t pg)
{
	log->pages[log->head++ % PAGER_EVENT_LOG] = pg;
}

static void pool_put(struct pager *p, uint64_t pg, const void *data)
{
	struct pool *q = &p->pool;

	if (q->shared)
		q->slot_of[pg] = pager_pool_put(q->shared, q->owner, pg, data);
}

/* Move pg's data out of the pool into buf; 0 if the pool lacks it. */
static int pool_take(struct pager *p, uint64_t pg, void *buf)
{
	struct pool *q = &p->pool;
	uint32_t slot = q->shared ? q->slot_of[pg] : NO_SLOT;

	if (slot == NO_SLOT)
		return 0;
	q->slot_of[pg] = NO_SLOT;
	return pager_pool_take(q->shared, slot, q->owner, pg, buf);
}

/* Store i failed as a whole (not one missing page): try it last for a
 * while, so a dead memory server does not cost every fault a get. */
static void store_down(struct pager *p, int i)
{
	p->backoff[i] = p->backoff[i] ? p->backoff[i] * 2 : BACKOFF_MIN_NS;
	if (p->backoff[i] > BACKOFF_MAX_NS)
		p->backoff[i] = BACKOFF_MAX_NS;
	p->down_until[i] = now_ns() + p->backoff[i];
}

/* A call on store i failed: ENOENT or EIO mean that copy is gone, not
 * the store. */
static void store_failed(struct pager *p, int i)
{
	if (errno != ENOENT && errno != EIO)
		store_down(p, i);
}

static void store_up(struct pager *p, int i)
{
	p->backoff[i] = p->down_until[i] = 0;
}

/* 1 if puts may go to store i: it is not backing off. */
static int store_usable(struct pager *p, int i)
{
	int up;

	pthread_mutex_lock(&p->lock);
	up = p->down_until[i] <= now_ns();
	pthread_mutex_unlock(&p->lock);
	return up;
}

/* Count a batch's puts to store i: 1 done, 0 skipped, -1 failed. */
static void put_done(struct pager *p, int i, int result)
{
	pthread_mutex_lock(&p->lock);
	if (result > 0)
		store_up(p, i);
	else
		p->st.put_failed[i]++;
	if (result < 0)
		store_down(p, i);
	pthread_mutex_unlock(&p->lock);
}

/* pg's copy in store i, into fault_buf: 0 if it came back whole. */
static int get_copy(struct pager *p, int i, uint64_t pg)
{
	struct pager_store *s = p->stores[i];

	if (s->get(s, pg, p->fault_buf) < 0) {
		p->st.get_failed[i]++;
		store_failed(p, i);
		return -1;
	}
	store_up(p, i);
	if (page_sum(p->fault_buf) != p->sum[pg]) {
		p->st.bad_sum[i]++;
		return -1;
	}
	p->st.served[i]++;
	return 0;
}

/*
 * pg's data into fault_buf from the pool, else the first store with a
 * good copy, stores backing off last; returns the source, -1 if none.
 */
static int find_copy(struct pager *p, uint64_t pg)
{
	uint64_t now = now_ns();

	/* The pool is shared: checked like any store's copy. */
	if (pool_take(p, pg, p->fault_buf) &&
	    page_sum(p->fault_buf) == p->sum[pg])
		return PAGER_SRC_POOL;
	for (int last = 0; last < 2; last++) {
		for (int i = 0; i < p->nstores; i++) {
			if (!(p->have[pg] & (1u << i)))
				continue;
			if ((p->down_until[i] > now) != last) {
				p->st.skipped_down[i] += !last;
				continue;
			}
			if (!get_copy(p, i, pg))
				return p->source[i];
		}
	}
	return -1;
}

static void add_sample(struct pager *p, int src, uint64_t ns)
{
	p->samples[src][p->nsamples[src]++ % MAX_SAMPLES] = (uint32_t)ns;
	p->st.source_faults[src]++;
}

/* Bring an OUT page back in; a fault's is timed and logged. */
static void fetch(struct pager *p, uint64_t pg, int fault)
{
	uint64_t t0 = now_ns();
	int src = find_copy(p, pg);

	if (src < 0) {
		/* Nothing to give back: zeros make the loss visible. */
		if (p->st.lost < 10)
			fprintf(stderr, "pager: page %llu lost in every "
				"store\n", (unsigned long long)pg);
		memset(p->fault_buf, 0, PAGER_PAGE);
		p->st.lost++;
	}
	copy_in(p, pg, p->fault_buf);
	if (fault && src >= 0)
		add_sample(p, src, now_ns() - t0);
	if (fault)
		log_event(p->faults, pg);
	p->state[pg] = PG_IN;   /* after the copy: see the header comment */
	p->pages_out--;
	/* Copies are stale from the next write on; free them now, while
	 * the lock keeps swap-out from storing the page again (not on a
	 * store backing off: a stale copy is only space). */
	for (int i = 0; i < p->nstores; i++)
		if ((p->have[pg] & (1u << i)) && p->stores[i]->del &&
		    p->down_until[i] <= t0 &&
		    p->stores[i]->del(p->stores[i], pg, 1) < 0)
			store_failed(p, i);
	p->have[pg] = 0;
}

static void handle_fault(struct pager *p, const struct uffd_msg *m)
{
	uint64_t addr = m->arg.pagefault.address & ~(PAGER_PAGE - 1);
	uint64_t pg;

	if (addr < p->base || addr >= addr_of(p, p->npages))
		return;
	pg = (addr - p->base) / PAGER_PAGE;
	pthread_mutex_lock(&p->lock);
	if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
		p->st.faults_wp++;
		if (p->state[pg] == PG_OUT) {
			/* Validate won: the page is punched, give it back. */
			p->st.wp_on_out++;
			fetch(p, pg, 1);
		} else {
			if (p->state[pg] == PG_SWAPPING) {
				p->state[pg] = PG_IN;
				p->st.cancelled++;
				log_event(p->cancels, pg);
			}
			write_protect(p, pg, 1, 0);   /* also wakes */
		}
	} else {
		p->st.faults_missing++;
		if (p->state[pg] == PG_OUT)
			fetch(p, pg, 1);
		else
			zero_fill(p, pg);
	}
	pthread_mutex_unlock(&p->lock);
}

static void *fault_thread(void *arg)
{
	struct pager *p = arg;
	struct uffd_msg msgs[64];
	struct pollfd fds[2] = {
		{ .fd = p->uffd, .events = POLLIN },
		{ .fd = p->stopfd, .events = POLLIN },
	};

	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("pager: poll");
			return NULL;
		}
		if (fds[1].revents)
			return NULL;
		if (!(fds[0].revents & POLLIN))
			continue;
		ssize_t n = read(p->uffd, msgs, sizeof(msgs));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			perror("pager: read uffd");
			return NULL;
		}
		for (size_t i = 0; i < n / sizeof(msgs[0]); i++)
			if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
				handle_fault(p, &msgs[i]);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Resident in the memfd?  cursor caches the data extent last found. */
static int resident(struct pager *p, uint64_t pg, off_t cursor[2])
{
	off_t off = p->offset + pg * PAGER_PAGE;

	if (off >= cursor[0] && off < cursor[1])
		return 1;
	cursor[0] = lseek(p->memfd, off, SEEK_DATA);
	if (cursor[0] < 0) {
		cursor[0] = cursor[1] = 0;
		return 0;
	}
	cursor[1] = lseek(p->memfd, cursor[0], SEEK_HOLE);
	return off >= cursor[0] && off < cursor[1];
}

/* Length of the run of consecutive page numbers starting at list[i]. */
static size_t run_len(const uint64_t *list, size_t i, size_t n)
{
	size_t j = i + 1;

	while (j < n && list[j] == list[j - 1] + 1)
		j++;
	return j - i;
}

static long swap_batch(struct pager *p, uint64_t *pages, size_t n,
		       off_t cursor[2])
{
	uint64_t sums[BATCH];
	size_t m = 0, r;
	unsigned ok = 0;
	int nok = 0;
	long dropped = 0;

	/* 1. mark */
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t pg = pages[i];

		if (pg >= p->npages || p->state[pg] != PG_IN ||
		    (m && pages[m - 1] == pg))
			continue;
		if (!resident(p, pg, cursor)) {
			p->st.not_resident++;
			continue;
		}
		p->state[pg] = PG_SWAPPING;
		pages[m++] = pg;
	}
	for (size_t i = 0; i < m; i += r) {
		r = run_len(pages, i, m);
		if (write_protect(p, pages[i], r, 1) < 0) {
			pthread_mutex_unlock(&p->lock);
			return -1;
		}
	}
	pthread_mutex_unlock(&p->lock);

	/* 2. copy: from the memfd itself, not through the mapping */
	for (size_t i = 0; i < m; i += r) {
		char *buf = p->swap_buf + i * PAGER_PAGE;
		size_t len;
		ssize_t got;

		r = run_len(pages, i, m);
		len = r * PAGER_PAGE;
		got = pread(p->memfd, buf, len,
			    p->offset + pages[i] * PAGER_PAGE);
		if (got != (ssize_t)len) {
			perror("pager: pread memfd");
			return -1;
		}
	}
	for (size_t i = 0; i < m; i++)
		sums[i] = page_sum(p->swap_buf + i * PAGER_PAGE);
	for (int s = 0; s < p->nstores; s++) {
		int good = store_usable(p, s);

		for (size_t i = 0; i < m && good > 0; i += r) {
			r = run_len(pages, i, m);
			if (p->stores[s]->put(p->stores[s], pages[i],
					      p->swap_buf + i * PAGER_PAGE,
					      r) < 0)
				good = -1;
		}
		put_done(p, s, good);
		if (good > 0) {
			ok |= 1u << s;
			nok++;
		}
	}

	/* 3. validate and drop */
	pthread_mutex_lock(&p->lock);
	if (nok < p->copies)
		p->st.put_failed_batches++;
	for (size_t i = 0; i < m; i += r) {
		size_t k = i;

		r = run_len(pages, i, m);
		for (size_t j = i; j <= i + r; j++) {
			int out = j < i + r && p->state[pages[j]] == PG_SWAPPING;

			if (out && nok >= p->copies) {
				p->sum[pages[j]] = sums[j];
				p->have[pages[j]] = ok;
				/* OUT, then punched */
				p->state[pages[j]] = PG_OUT;
				pool_put(p, pages[j],
					 p->swap_buf + j * PAGER_PAGE);
				continue;
			}
			if (out) {   /* too few copies: keep it in */
				p->state[pages[j]] = PG_IN;
				write_protect(p, pages[j], 1, 0);
			}
			if (j > k && fallocate(p->memfd, FALLOC_FL_PUNCH_HOLE |
					       FALLOC_FL_KEEP_SIZE,
					       p->offset + pages[k] * PAGER_PAGE,
					       (j - k) * PAGER_PAGE) < 0) {
				perror("pager: punch memfd");
				pthread_mutex_unlock(&p->lock);
				return -1;
			}
			dropped += j - k;
			k = j + 1;
		}
	}
	p->pages_out += dropped;
	p->st.swapped_out += dropped;
	pthread_mutex_unlock(&p->lock);
	return dropped;
}

static size_t state_size(uint64_t npages)
{
	return sizeof(struct state_header) + (2 * npages + 7) / 8 * 8 +
	       npages * sizeof(uint64_t);
}

/*
 * Keep states and checksums in the state file: a fresh registration
 * starts it anew (all IN), an adopted one must find its own there.
 */
static int map_state(struct pager *p, const struct pager_opts *o,
		     int fresh)
{
	size_t len = state_size(p->npages);
	struct state_header want = {
		.magic = STATE_MAGIC,
		.registration = { o->registration[0], o->registration[1] },
		.base = p->base, .len = p->npages * PAGER_PAGE,
		.offset = p->offset, .npages = p->npages,
	};
	int fd = open(o->state_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	char *map;

	p->state_fd = fd;
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "pager: %s: another pager runs on it\n",
			o->state_path);
		return -1;
	}
	/* Fresh: zeros, all IN. */
	if (fd < 0 || fstat(fd, &st) ||
	    (fresh && (ftruncate(fd, 0) || ftruncate(fd, len)))) {
		perror(o->state_path);
		return -1;
	}
	if (!fresh && (size_t)st.st_size != len)
		goto not_ours;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("pager: mmap state");
		return -1;
	}
	p->state_map = map;
	p->state_len = len;
	if (!fresh && memcmp(map, &want, sizeof(want)))
		goto not_ours;
	memcpy(map, &want, sizeof(want));
	p->state = (uint8_t *)map + sizeof(want);
	p->have = p->state + p->npages;
	p->sum = (uint64_t *)(map + len - p->npages * sizeof(uint64_t));
	return 0;
not_ours:
	fprintf(stderr, "pager: %s is not the state of this registration\n",
		o->state_path);
	errno = ESTALE;
	return -1;
}

int pager_state_registration(const char *state_path, uint64_t reg[2],
			     uint64_t *base, uint64_t *len, uint64_t *offset)
{
	struct state_header h;
	int fd = open(state_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, &h, sizeof(h), 0);

	if (fd >= 0)
		close(fd);
	if (n != sizeof(h) || h.magic != STATE_MAGIC)
		return -1;
	reg[0] = h.registration[0];
	reg[1] = h.registration[1];
	*base = h.base;
	*len = h.len;
	*offset = h.offset;
	return 0;
}

static void free_pager(struct pager *p)
{
	if (p->state_fd >= 0)
		close(p->state_fd);
	if (p->state_map) {
		munmap(p->state_map, p->state_len);
	} else {
		free(p->state);
		free(p->sum);
	}
	if (p->pool.shared)
		pager_pool_close(p->pool.shared);
	free(p->pool.slot_of);
	for (int s = 0; s < PAGER_NSOURCES; s++)
		free(p->samples[s]);
	free(p->faults);
	free(p->cancels);
	free(p->fault_buf);
	free(p->swap_buf);
	if (p->stopfd >= 0)
		close(p->stopfd);
	free(p);
}

static int alloc_pager(struct pager *p, const struct pager_opts *o,
		       int fresh)
{
	struct pool *q = &p->pool;

	if (o && o->state_path) {
		if (map_state(p, o, fresh))
			return -1;
	} else {
		p->state = calloc(p->npages, 2);
		p->have = p->state + p->npages;
		p->sum = calloc(p->npages, sizeof(*p->sum));
		if (!p->state || !p->sum)
			return -1;
	}
	if (o && (o->pool_pages || o->pool_path)) {
		q->owner = o->pool_owner;
		q->shared = pager_pool_open(o->pool_path, o->pool_pages);
		q->slot_of = malloc(p->npages * sizeof(*q->slot_of));
		if (!q->shared || !q->slot_of)
			return -1;
		memset(q->slot_of, 0xff, p->npages * sizeof(*q->slot_of));
		if (!fresh)   /* the dead pager's pages, checksummed on take */
			pager_pool_find(q->shared, q->owner, q->slot_of,
					p->npages);
	}
	for (int s = 0; s < PAGER_NSOURCES; s++) {
		p->samples[s] = calloc(MAX_SAMPLES, sizeof(*p->samples[s]));
		if (!p->samples[s])
			return -1;
	}
	p->faults = calloc(1, sizeof(*p->faults));
	p->cancels = calloc(1, sizeof(*p->cancels));
	p->stopfd = eventfd(0, EFD_CLOEXEC);
	if (!p->faults || !p->cancels || p->stopfd < 0 ||
	    posix_memalign((void **)&p->fault_buf, PAGER_PAGE, PAGER_PAGE) ||
	    posix_memalign((void **)&p->swap_buf, PAGER_PAGE,
			   BATCH * PAGER_PAGE))
		return -1;
	return 0;
}

/*
 * Adopting a dead pager's registration: what it left half done is
 * undone.  SWAPPING pages go back IN (their copy may be incomplete);
 * OUT pages still resident (not yet punched, or copied in before the
 * state said IN) are IN; every IN page is un-protected, which wakes
 * writers it held.
 */
static void reconcile(struct pager *p)
{
	off_t cursor[2] = { 0, 0 };
	uint64_t run = 0;

	for (uint64_t pg = 0; pg <= p->npages; pg++) {
		if (pg < p->npages && p->state[pg] == PG_OUT &&
		    !resident(p, pg, cursor)) {
			p->pages_out++;
		} else if (pg < p->npages) {
			if (p->state[pg] != PG_IN)
				p->st.reconciled++;
			p->state[pg] = PG_IN;
			p->have[pg] = 0;
			continue;
		}
		if (run < pg)
			write_protect(p, run, pg - run, 0);
		run = pg + 1;
	}
}

struct pager *pager_init(int uffd, uint64_t base, size_t len, int memfd,
			 off_t offset, struct pager_store **stores,
			 int nstores, int copies,
			 const struct pager_opts *opts)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_MISSING_SHMEM |
			    UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
	};
	struct uffdio_register reg = {
		.range = { .start = base, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	struct pager *p;
	int fresh;

	if (nstores < 1 || nstores > PAGER_MAX_STORES || copies < 1 ||
	    copies > nstores || len % PAGER_PAGE || base % PAGER_PAGE) {
		errno = EINVAL;
		return NULL;
	}
	/* EINVAL: the uffd is set up already, by a pager that died. */
	fresh = !ioctl(uffd, UFFDIO_API, &api);
	if (!fresh && (errno != EINVAL || !opts || !opts->state_path)) {
		perror("pager: UFFDIO_API (MISSING_SHMEM | WP_HUGETLBFS_SHMEM)");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->stopfd = p->state_fd = -1;
	p->uffd = uffd;
	p->memfd = memfd;
	p->base = base;
	p->offset = offset;
	p->npages = len / PAGER_PAGE;
	memcpy(p->stores, stores, nstores * sizeof(*stores));
	p->nstores = nstores;
	p->copies = copies;
	for (int i = 0; i < nstores; i++)
		p->source[i] = strcmp(stores[i]->kind, "tcp") ?
			       PAGER_SRC_FILE : PAGER_SRC_TCP;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->swap_lock, NULL);
	if (alloc_pager(p, opts, fresh)) {
		perror("pager: init");
		free_pager(p);
		return NULL;
	}
	/* Registering again on the same uffd changes nothing (the kernel
	 * skips ranges it holds) and tells whether WP is there. */
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
		perror("pager: UFFDIO_REGISTER");
		free_pager(p);
		return NULL;
	}
	if (!(reg.ioctls & (1ULL << _UFFDIO_WRITEPROTECT))) {
		fprintf(stderr, "pager: no UFFDIO_WRITEPROTECT on this range\n");
		free_pager(p);
		errno = ENOTSUP;
		return NULL;
	}
	if (!fresh)
		reconcile(p);
	p->st.adopted = !fresh;
	if (pthread_create(&p->thread, NULL, fault_thread, p)) {
		perror("pager: init");
		free_pager(p);
		return NULL;
	}
	/* Faults the dead pager read are lost: their threads fault again. */
	if (!fresh)
		wake(p, 0, p->npages);
	return p;
}

long pager_swap_out(struct pager *p, const uint64_t *pages, size_t n)
{
	uint64_t *sorted = malloc(n * sizeof(*sorted) + 1);
	off_t cursor[2] = { 0, 0 };
	long total = 0;

	if (!sorted)
		return -1;
	memcpy(sorted, pages, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	pthread_mutex_lock(&p->swap_lock);
	for (size_t i = 0; i < n; i += BATCH) {
		long d = swap_batch(p, sorted + i,
				    n - i < BATCH ? n - i : BATCH, cursor);

		if (d < 0) {
			total = -1;
			break;
		}
		total += d;
	}
	pthread_mutex_unlock(&p->swap_lock);
	free(sorted);
	return total;
}

void pager_get_stats(struct pager *p, struct pager_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
	/* The pool has its own lock: counting its slots under p->lock
	 * would hold up the fault path for the whole scan. */
	if (p->pool.shared) {
		out->pool_pages = pager_pool_count(p->pool.shared,
						   p->pool.owner);
		out->pool_capacity = pager_pool_capacity(p->pool.shared);
		out->pool_recovered = pager_pool_recovered(p->pool.shared);
	}
}

uint64_t pager_pages_out(struct pager *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->pages_out;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

size_t pager_fault_latency(struct pager *p, int source, double *p50,
			   double *p99)
{
	uint32_t *all;
	size_t n = 0;

	pthread_mutex_lock(&p->lock);
	all = malloc(PAGER_NSOURCES * MAX_SAMPLES * sizeof(*all));
	for (int s = 0; all && s < PAGER_NSOURCES; s++) {
		size_t k = p->nsamples[s] < MAX_SAMPLES ? p->nsamples[s] :
			   MAX_SAMPLES;

		if (source >= 0 && s != source)
			continue;
		memcpy(all + n, p->samples[s], k * sizeof(*all));
		n += k;
	}
	pthread_mutex_unlock(&p->lock);
	*p50 = *p99 = 0;
	if (n) {
		qsort(all, n, sizeof(*all), cmp_u32);
		*p50 = all[n / 2] / 1000.0;
		*p99 = all[n * 99 / 100] / 1000.0;
	}
	free(all);
	return n;
}

long pager_swap_in(struct pager *p, uint64_t first, uint64_t count)
{
	long fetched = 0;

	for (uint64_t pg = first; pg < p->npages && pg - first < count;
	     pg++) {
		pthread_mutex_lock(&p->lock);   /* per page: faults go first */
		if (p->state[pg] == PG_OUT) {
			fetch(p, pg, 0);
			p->st.swapped_in++;
			fetched++;
		}
		pthread_mutex_unlock(&p->lock);
	}
	return fetched;
}

size_t pager_take_events(struct pager *p, int cancelled, uint64_t *pages,
			 size_t max, uint64_t *overflow)
{
	struct event_log *log = cancelled ? p->cancels : p->faults;
	uint64_t lost;
	size_t n = 0;

	pthread_mutex_lock(&p->lock);
	lost = log->head - log->tail > PAGER_EVENT_LOG ?
	       log->head - log->tail - PAGER_EVENT_LOG : 0;
	log->tail += lost;
	while (log->tail < log->head && n < max)
		pages[n++] = log->pages[log->tail++ % PAGER_EVENT_LOG];
	pthread_mutex_unlock(&p->lock);
	if (overflow)
		*overflow = lost;
	return n;
}

void pager_fini(struct pager *p)
{
	uint64_t one = 1;

	if (write(p->stopfd, &one, sizeof(one)) != sizeof(one))
		perror("pager: stop");
	pthread_join(p->thread, NULL);
	free_pager(p);
}
