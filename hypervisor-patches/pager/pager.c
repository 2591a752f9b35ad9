/*
 * pager: mark, copy, validate swap-out on a userfaultfd, and the stores'
 * back-off; the fault service that answers the guest is fault.c.
 *
 * Page states: IN (in the memfd), SWAPPING (write-protected, being
 * copied), OUT (copies in the stores, hole punched in the memfd).  The
 * lock is held by the fault thread for a whole fault, and by swap-out
 * for mark (state + write-protect) and validate (state + punch), so the
 * fault thread never sees a state without the page table to match.
 * Pages are indexes in the regions concatenated; every range operation
 * (write-protect, wake, pread, punch) is split at region boundaries.
 *
 * Copies are sealed (crypt.c): a page's version goes up when it is
 * marked, before it is read and sealed, so no two seals of a page share
 * a nonce; the tag is kept for the fault service to open copies with.
 *
 * With a state file (state.c), states, versions and tags live in a
 * shared mapping of it, each written before the step it describes
 * (SWAPPING and the version before the write-protect and the seal, tags
 * and OUT before the punch, IN after the UFFDIO_COPY), so a pager killed
 * at any point leaves a file from which the next one reconciles
 * (pager_setup.c).
 */
#define _GNU_SOURCE
#include "pager_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* A store whose get failed is tried last for this long, doubling. */
#define BACKOFF_MIN_NS 250000000ULL
#define BACKOFF_MAX_NS 30000000000ULL

const char *const pager_source_names[PAGER_NSOURCES] = {
	"pool", "file", "tcp",
};

const char *const pager_swap_phase_names[PAGER_SWAP_PHASES] = {
	"mark", "read", "seal", "put", "validate",
};

int pager_write_protect(struct pager *p, uint64_t pg, uint64_t n, int on)
{
	for (uint64_t k; n; pg += k, n -= k) {
		struct uffdio_writeprotect wp = {
			.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
		};

		k = in_region(p, pg, n);
		wp.range.start = addr_of(p, pg);
		wp.range.len = k * PAGER_PAGE;
		while (ioctl(p->uffd, UFFDIO_WRITEPROTECT, &wp) < 0) {
			if (errno != EAGAIN) {
				perror("pager: UFFDIO_WRITEPROTECT");
				return -1;
			}
		}
	}
	return 0;
}

void pager_wake(struct pager *p, uint64_t pg, uint64_t n)
{
	for (uint64_t k; n; pg += k, n -= k) {
		struct uffdio_range r;

		k = in_region(p, pg, n);
		r.start = addr_of(p, pg);
		r.len = k * PAGER_PAGE;
		if (ioctl(p->uffd, UFFDIO_WAKE, &r) < 0)
			perror("pager: UFFDIO_WAKE");
	}
	p->st.wakes++;
}

static void pool_put(struct pager *p, uint64_t pg, const void *data)
{
	struct pool *q = &p->pool;

	if (q->shared)
		q->slot_of[pg] = pager_pool_put(q->shared, q->owner, pg, data);
}

/* Store i failed as a whole (not one missing page): try it last for a
 * while, so a dead memory server does not cost every fault a get. */
void pager_store_down(struct pager *p, int i)
{
	p->backoff[i] = p->backoff[i] ? p->backoff[i] * 2 : BACKOFF_MIN_NS;
	if (p->backoff[i] > BACKOFF_MAX_NS)
		p->backoff[i] = BACKOFF_MAX_NS;
	p->down_until[i] = now_ns() + p->backoff[i];
}

/* A call on store i failed: ENOENT or EIO mean that copy is gone, not
 * the store. */
void pager_store_failed(struct pager *p, int i)
{
	if (errno != ENOENT && errno != EIO)
		pager_store_down(p, i);
}

void pager_store_up(struct pager *p, int i)
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

/* Count a batch's puts to store i: 1 done, 0 skipped, -1 failed; they
 * took ns. */
static void put_done(struct pager *p, int i, int result, uint64_t ns)
{
	pthread_mutex_lock(&p->lock);
	p->st.put_ns[i] += ns;
	if (result > 0)
		pager_store_up(p, i);
	else
		p->st.put_failed[i]++;
	if (result < 0)
		pager_store_down(p, i);
	pthread_mutex_unlock(&p->lock);
}

int pager_store_renewed(struct pager *p, struct pager_store *s)
{
	int rc = -1;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->nstores; i++) {
		if (p->stores[i] == s) {
			pager_store_up(p, i);
			rc = 0;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (rc)
		errno = ENOENT;
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Resident in its memfd?  Pages are asked in increasing order: c caches
 * the hole [from, lo) and the data [lo, hi) last found, so a sparse
 * memfd costs two lseeks per extent, not one per page.
 */
int pager_resident(struct pager *p, uint64_t pg, struct cursor *c)
{
	const struct region *r = region_of(p, pg);
	off_t off = file_offset(p, pg);

	if (c->r == r && off >= c->from && off < c->hi)
		return off >= c->lo;
	c->r = r;
	c->from = off;
	c->lo = lseek(r->memfd, off, SEEK_DATA);
	if (c->lo < 0) {            /* ENXIO: a hole to the end */
		c->lo = c->hi = INT64_MAX;
		return 0;
	}
	c->hi = lseek(r->memfd, c->lo, SEEK_HOLE);
	return off >= c->lo;
}

/* Length of the run of consecutive page numbers starting at list[i],
 * within one region. */
static size_t run_len(const struct pager *p, const uint64_t *list, size_t i,
		      size_t n)
{
	size_t j = i + 1, max = in_region(p, list[i], n - i);

	while (j < n && j - i < max && list[j] == list[j - 1] + 1)
		j++;
	return j - i;
}

/* Every run to store s, at once where it can take them so. */
static int put_runs(struct pager_store *s, const struct pager_run *runs,
		    size_t nruns)
{
	if (s->put_runs)
		return s->put_runs(s, runs, nruns);
	for (size_t i = 0; i < nruns; i++)
		if (s->put(s, runs[i].first, runs[i].buf, runs[i].count) < 0)
			return -1;
	return 0;
}

static long swap_batch(struct pager *p, uint64_t *pages, size_t n,
		       struct cursor *cursor)
{
	uint8_t tags[BATCH][PAGER_TAG_SIZE];
	struct pager_run runs[BATCH];
	size_t m = 0, r, nruns = 0;
	unsigned ok = 0;
	unsigned to = p->swap_to ? p->swap_to : (1u << p->nstores) - 1;
	int nok = 0, sealed = 1;
	int copies = p->copies ? p->copies : __builtin_popcount(to);
	long dropped = 0;
	uint64_t t[PAGER_SWAP_PHASES + 1];

	/* 1. mark */
	t[0] = now_ns();
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t pg = pages[i];

		if (pg >= p->npages || p->ps.state[pg] != PG_IN ||
		    (m && pages[m - 1] == pg))
			continue;
		if (!pager_resident(p, pg, cursor)) {
			p->st.not_resident++;
			continue;
		}
		p->ps.state[pg] = PG_SWAPPING;
		/* A new version before anything is sealed with it: stored
		 * (state file) first, so no crash ever seals twice with one
		 * nonce. */
		p->ps.version[pg]++;
		pages[m++] = pg;
	}
	for (size_t i = 0; i < m; i += r) {
		r = run_len(p, pages, i, m);
		if (pager_write_protect(p, pages[i], r, 1) < 0) {
			pthread_mutex_unlock(&p->lock);
			return -1;
		}
	}
	pthread_mutex_unlock(&p->lock);

	/* 2. copy: from the memfd itself, not through the mapping */
	t[1] = now_ns();
	for (size_t i = 0; i < m; i += r) {
		char *buf = p->swap_buf + i * PAGER_PAGE;
		size_t len;
		ssize_t got;

		r = run_len(p, pages, i, m);
		len = r * PAGER_PAGE;
		got = pread(region_of(p, pages[i])->memfd, buf, len,
			    file_offset(p, pages[i]));
		if (got != (ssize_t)len) {
			perror("pager: pread memfd");
			return -1;
		}
	}
	/* Sealed in place: stores and the pool get ciphertext.  A marked
	 * page's version changes only in a swap-out (swap_lock): read here
	 * without the lock. */
	t[2] = now_ns();
	for (size_t i = 0; i < m && sealed; i++)
		sealed = !page_seal(p->crypt, pages[i],
				    p->ps.version[pages[i]],
				    p->swap_buf + i * PAGER_PAGE, tags[i]);
	t[3] = now_ns();
	for (size_t i = 0; i < m; i += r) {
		r = run_len(p, pages, i, m);
		runs[nruns++] = (struct pager_run){ pages[i], r,
			p->swap_buf + i * PAGER_PAGE };
	}
	for (int s = 0; s < p->nstores && sealed; s++) {
		int good;
		uint64_t t_put = now_ns();

		if (!(to & (1u << s)))
			continue;
		good = store_usable(p, s);

		if (good > 0)
			good = put_runs(p->stores[s], runs, nruns) ? -1 : 1;
		put_done(p, s, good, now_ns() - t_put);
		if (good > 0) {
			ok |= 1u << s;
			nok++;
		}
	}

	/* 3. validate and drop (kept in: too few copies, or unsealed) */
	t[4] = now_ns();
	pthread_mutex_lock(&p->lock);
	if (nok < copies)
		p->st.put_failed_batches++;
	for (size_t i = 0; i < m; i += r) {
		size_t k = i;

		r = run_len(p, pages, i, m);
		for (size_t j = i; j <= i + r; j++) {
			int out = j < i + r && p->ps.state[pages[j]] == PG_SWAPPING;

			if (out && nok >= copies) {
				memcpy(p->ps.tag[pages[j]], tags[j],
				       PAGER_TAG_SIZE);
				p->ps.have[pages[j]] = ok;
				/* OUT, then punched */
				p->ps.state[pages[j]] = PG_OUT;
				pool_put(p, pages[j],
					 p->swap_buf + j * PAGER_PAGE);
				continue;
			}
			if (out) {   /* too few copies: keep it in */
				p->ps.state[pages[j]] = PG_IN;
				pager_write_protect(p, pages[j], 1, 0);
			}
			if (j > k && fallocate(region_of(p, pages[k])->memfd,
					       FALLOC_FL_PUNCH_HOLE |
					       FALLOC_FL_KEEP_SIZE,
					       file_offset(p, pages[k]),
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
	t[5] = now_ns();
	for (int phase = 0; phase < PAGER_SWAP_PHASES; phase++)
		p->st.swap_ns[phase] += t[phase + 1] - t[phase];
	pthread_mutex_unlock(&p->lock);
	return dropped;
}

long pager_swap_out(struct pager *p, const uint64_t *pages, size_t n)
{
	uint64_t *sorted = malloc(n * sizeof(*sorted) + 1);
	struct cursor cursor = { 0 };
	long total = 0;

	if (!sorted)
		return -1;
	memcpy(sorted, pages, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	pthread_mutex_lock(&p->swap_lock);
	if (!p->nstores || p->copies > __builtin_popcount(
		    p->swap_to ? p->swap_to : (1u << p->nstores) - 1)) {
		errno = ENODEV;
		total = -1;
		n = 0;
	}
	for (size_t i = 0; i < n; i += BATCH) {
		long d = swap_batch(p, sorted + i,
				    n - i < BATCH ? n - i : BATCH, &cursor);

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

int pager_swap_to(struct pager *p, unsigned stores)
{
	pthread_mutex_lock(&p->swap_lock);
	if (stores >> p->nstores) {
		pthread_mutex_unlock(&p->swap_lock);
		errno = EINVAL;
		return -1;
	}
	p->swap_to = stores;
	pthread_mutex_unlock(&p->swap_lock);
	return 0;
}
