/*
 * pager: the fault service on a userfaultfd, and fetching pages back in
 * (a fault's, or a prefetch's); swap-out is pager.c.
 *
 * The fault thread holds the lock for a whole fault, so it never sees a
 * state without the page table to match (see pager.c).  MISSING on an
 * OUT page, or WP on one (a write that raced the punch): the page is
 * fetched from the pool, else the first store whose copy opens, stores
 * backing off last, and copied in; WP on SWAPPING cancels the swap-out;
 * never-populated pages are zero-filled.
 *
 * MINOR faults (a mapping zapped for access sampling while the memfd
 * keeps the page) are answered with UFFDIO_CONTINUE, write-protected for
 * a read of a sampled or SWAPPING page, so that its next write is a WP
 * fault: seen by the sampler, or cancelling the swap-out.  Every fault
 * is recorded by the sampler (sampler.c), if there is one; pages brought
 * in without a fault (read-ahead, swap-in) are left unmapped while it
 * samples, so that their first access is a fault too (bring_in).
 *
 * A copy is opened with the tag and version the swap-out kept (crypt.c):
 * one that does not open (forged, another page's or VM's, an older
 * version's) is a bad copy, and the next one is tried.  A page whose
 * every copy that came back was bad (issue 36) is not served: not zeros,
 * which the guest would take for its data, but no answer at all.  The
 * fault stays pending, so the vCPU that touched the page stops there;
 * the page stays OUT with its copies kept (for the operator to look at),
 * the pager says which page on stderr and counts it (`unauthentic`,
 * `unauthentic_page` in its stats), and the agent marks the VM failed.
 * A page only lost (every store failed to answer) is zeros, as before:
 * a store may drop pages, but none may forge them.
 */
#define _GNU_SOURCE
#include "pager_internal.h"
#include "sampler.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define ZERO_BLOCK 16   /* pages, a power of two */
#ifndef UFFDIO_CONTINUE_MODE_WP   /* Linux 6.4; older headers lack it */
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)
#endif

/* The page a fault address is in, or UINT64_MAX. */
static uint64_t page_at(const struct pager *p, uint64_t addr)
{
	for (int i = 0; i < p->nregions; i++) {
		const struct region *r = &p->region[i];

		if (addr >= r->base && addr < r->base + r->npages * PAGER_PAGE)
			return r->first + (addr - r->base) / PAGER_PAGE;
	}
	return UINT64_MAX;
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

/* In the sampler's sample?  Its accesses must all be seen. */
static int sampled(struct pager *p, uint64_t pg)
{
	return p->sampler && sampler_sampled(p->sampler, pg);
}

/*
 * A never-populated page: zeros (write-protected if wp, so that a write
 * after this read is seen), and zeros for the never-populated IN pages
 * of its aligned ZERO_BLOCK too (either direction), since first touches
 * come in runs; each would otherwise be a fault of its own.  Not for
 * sampled pages: their first access would go unseen.
 */
static void zero_fill(struct pager *p, uint64_t pg, int wp)
{
	uint64_t first = pg & ~(uint64_t)(ZERO_BLOCK - 1);

	if (zero_page(p, pg, wp ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0) < 0) {
		pager_wake(p, pg, 1);   /* EEXIST: filled since the fault */
	} else if (wp) {
		pager_write_protect(p, pg, 1, 1);
		pager_wake(p, pg, 1);
	}
	for (uint64_t n = first; n < first + ZERO_BLOCK && n < p->npages; n++)
		if (n != pg && p->ps.state[n] == PG_IN && !sampled(p, n))
			zero_page(p, n, UFFDIO_ZEROPAGE_MODE_DONTWAKE);
}

/* pg's data back in the memfd and mapped (write-protected if wp). */
static void copy_in(struct pager *p, uint64_t pg, const void *buf, int wp)
{
	struct uffdio_copy c = {
		.dst = addr_of(p, pg), .src = (uint64_t)(uintptr_t)buf,
		.len = PAGER_PAGE, .mode = wp ? UFFDIO_COPY_MODE_WP : 0,
	};

	while (ioctl(p->uffd, UFFDIO_COPY, &c) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno == EEXIST)
			pager_wake(p, pg, 1);
		else
			perror("pager: UFFDIO_COPY");
		return;
	}
}

/*
 * Map pg's page, which the memfd holds, for a MINOR fault; write-protected
 * if wp.  A page the memfd lost meanwhile (a discard: EFAULT) is zeros.
 */
static void continue_page(struct pager *p, uint64_t pg, int wp)
{
	struct uffdio_continue c = {
		.range = { .start = addr_of(p, pg), .len = PAGER_PAGE },
		.mode = wp ? UFFDIO_CONTINUE_MODE_WP : 0,
	};

	while (ioctl(p->uffd, UFFDIO_CONTINUE, &c) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno == EEXIST)
			pager_wake(p, pg, 1);
		else if (errno == EFAULT)
			zero_fill(p, pg, wp);
		else
			perror("pager: UFFDIO_CONTINUE");
		return;
	}
}

/*
 * pg's data into its memfd without mapping it: a page brought in ahead of
 * any access (read-ahead, swap-in) while sampling.  Its first access is
 * then a MINOR fault, recorded like a zapped page's; mapped, it would go
 * unseen (a sampled page's in any interval, every page's in a full pass).
 * 0, or -1 if the memfd refused it.
 */
static int place(struct pager *p, uint64_t pg, const void *buf)
{
	ssize_t n = pwrite(region_of(p, pg)->memfd, buf, PAGER_PAGE,
			   file_offset(p, pg));

	if (n == (ssize_t)PAGER_PAGE)
		return 0;
	if (n >= 0)
		errno = EIO;
	perror("pager: pwrite memfd");
	return -1;
}

/*
 * pg's data back in: mapped (write-protected if wp) for a fault, whose
 * thread UFFDIO_COPY wakes; without a fault, only placed in the memfd
 * while sampling (mapped if that fails: the data must not be lost).
 */
static void bring_in(struct pager *p, uint64_t pg, const void *buf,
		     int fault, int wp)
{
	if (fault || !p->sampler || place(p, pg, buf))
		copy_in(p, pg, buf, wp);
}

static void log_event(struct event_log *log, uint64_t pg)
{
	log->pages[log->head++ % PAGER_EVENT_LOG] = pg;
}

/* Move pg's copy out of the pool into buf; 0 if the pool lacks it. */
static int pool_take(struct pager *p, uint64_t pg, void *buf)
{
	struct pool *q = &p->pool;
	uint32_t slot = q->shared ? q->slot_of[pg] : NO_SLOT;

	if (slot == NO_SLOT)
		return 0;
	q->slot_of[pg] = NO_SLOT;
	return pager_pool_take(q->shared, slot, q->owner, pg, buf);
}

/* Open the copy of pg in fault_buf: 0 if it is pg's, as last sealed. */
static int open_copy(struct pager *p, uint64_t pg)
{
	return page_open(p->crypt, pg, p->ps.version[pg], p->fault_buf,
			 p->ps.tag[pg]);
}

/* pg's copy in store i, opened into fault_buf: 0 if it came back whole
 * and authentic. */
static int get_copy(struct pager *p, int i, uint64_t pg)
{
	struct pager_store *s = p->stores[i];

	if (s->get(s, pg, p->fault_buf) < 0) {
		p->st.get_failed[i]++;
		pager_store_failed(p, i);
		return -1;
	}
	pager_store_up(p, i);
	if (open_copy(p, pg)) {
		p->st.bad_sum[i]++;
		return -1;
	}
	p->st.served[i]++;
	return 0;
}

/* Copies that came back and did not open, so far. */
static uint64_t bad_copies(const struct pager *p)
{
	uint64_t n = p->st.pool_bad;

	for (int i = 0; i < p->nstores; i++)
		n += p->st.bad_sum[i];
	return n;
}

/*
 * pg's data into fault_buf from the pool, else the first store with a
 * good copy, stores backing off last; returns the source, -1 if none.
 */
static int find_copy(struct pager *p, uint64_t pg, int *store)
{
	uint64_t now = now_ns();

	/* The pool is shared: opened like any store's copy. */
	if (pool_take(p, pg, p->fault_buf)) {
		if (!open_copy(p, pg))
			return PAGER_SRC_POOL;
		p->st.pool_bad++;
	}
	for (int last = 0; last < 2; last++) {
		for (int i = 0; i < p->nstores; i++) {
			if (!(p->ps.have[pg] & (1u << i)))
				continue;
			if ((p->down_until[i] > now) != last) {
				p->st.skipped_down[i] += !last;
				continue;
			}
			if (!get_copy(p, i, pg)) {
				*store = i;
				return p->source[i];
			}
		}
	}
	return -1;
}

static void add_sample(struct pager *p, int src, uint64_t ns)
{
	p->samples[src][p->nsamples[src]++ % MAX_SAMPLES] = (uint32_t)ns;
	if (src < PAGER_NSOURCES)
		p->st.source_faults[src]++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Delete store i's copies of the pages waiting for it, in sorted runs,
 * under the lock: only of pages still IN, since one swapped out again
 * meanwhile has a new copy there under the same page number (the lock
 * keeps swap-out from marking any page while this runs).
 */
static void flush_deletes(struct pager *p, int i)
{
	uint64_t *v = p->deletes[i];
	size_t n = p->ndeletes[i], m = 0;

	p->ndeletes[i] = 0;
	if (p->down_until[i] > now_ns())
		return;             /* a stale copy is only space */
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t k = 0; k < n; k++)
		if (p->ps.state[v[k]] == PG_IN && (!m || v[m - 1] != v[k]))
			v[m++] = v[k];
	for (size_t k = 0, r; k < m; k += r) {
		for (r = 1; k + r < m && v[k + r] == v[k] + r; r++)
			;
		if (p->stores[i]->del(p->stores[i], v[k], r) < 0) {
			pager_store_failed(p, i);
			return;
		}
	}
}

void pager_flush_deletes(struct pager *p)
{
	for (int i = 0; i < p->nstores; i++)
		if (p->ndeletes[i])
			flush_deletes(p, i);
	__atomic_store_n(&p->deletes_waiting, 0, __ATOMIC_RELAXED);
}

/* pg is IN again: its copies are stale from its next write on.  They
 * go in a batch later (flush_deletes), not one round trip a fault. */
static void release_copies(struct pager *p, uint64_t pg)
{
	for (int i = 0; i < p->nstores; i++) {
		if (!(p->ps.have[pg] & (1u << i)) || !p->stores[i]->del)
			continue;
		p->deletes[i][p->ndeletes[i]++] = pg;
		__atomic_store_n(&p->deletes_waiting, 1, __ATOMIC_RELAXED);
		if (p->ndeletes[i] == DELETE_BATCH)
			flush_deletes(p, i);
	}
	p->ps.have[pg] = 0;
}

/* The store a run from pg comes from in one get_run: the first (up)
 * store holding pg that can, as find_copy would choose it; -1 if the
 * pool has pg or none can. */
static int run_store(struct pager *p, uint64_t pg)
{
	uint64_t now = now_ns();

	if (p->pool.shared && p->pool.slot_of[pg] != NO_SLOT)
		return -1;
	for (int i = 0; i < p->nstores; i++)
		if ((p->ps.have[pg] & (1u << i)) && p->down_until[i] <= now)
			return p->stores[i]->get_run ? i : -1;
	return -1;
}

/*
 * The OUT pages from `from` on, up to max (at most READ_AHEAD), whose
 * copy would come from store i (run_store: not those the pool has, nor
 * those an earlier store holds), in one get_run, opened and brought in
 * without a fault (bring_in: unmapped while sampling, so the sampler
 * still sees each one's first access).  Stops at the first copy that
 * does not open.  Returns how many came in, the first `from`'s.
 */
static uint64_t bring_run(struct pager *p, int i, uint64_t from,
			  uint64_t max)
{
	struct pager_store *s = p->stores[i];
	uint64_t n = 0;

	while (n < max && n < READ_AHEAD && from + n < p->npages &&
	       p->ps.state[from + n] == PG_OUT &&
	       run_store(p, from + n) == i)
		n++;
	if (!n || !s->get_run)
		return 0;
	if (s->get_run(s, from, p->ahead_buf, n) < 0) {
		pager_store_failed(p, i);
		return 0;
	}
	for (uint64_t k = 0; k < n; k++) {
		uint64_t pg = from + k;
		char *buf = p->ahead_buf + k * PAGER_PAGE;

		/* A copy that does not open is left to its own fault,
		 * which counts it and tries the next store. */
		if (page_open(p->crypt, pg, p->ps.version[pg], buf,
			      p->ps.tag[pg]))
			return k;
		if (p->pool.shared)
			p->pool.slot_of[pg] = NO_SLOT;
		bring_in(p, pg, buf, 0, 0);
		p->ps.state[pg] = PG_IN;   /* after the copy, as fetch */
		p->pages_out--;
		release_copies(p, pg);
		p->st.served[i]++;
	}
	return n;
}

/*
 * Bring an OUT page back in (write-protected if wp); a fault's is timed
 * and logged, and reads ahead if it follows the last one's page.  0, or
 * -1 if only stores not added yet hold it: the fault is left unanswered
 * until pager_add_store wakes it.
 */
static int fetch(struct pager *p, uint64_t pg, int fault, int wp)
{
	uint64_t t0 = now_ns(), bad = bad_copies(p);
	int store = -1, src = find_copy(p, pg, &store);

	if (src < 0 && p->ps.have[pg] >> p->nstores) {
		p->st.deferred++;
		return -1;
	}
	if (src < 0 && bad_copies(p) > bad) {
		/* Forged or replaced everywhere it came back from: the
		 * fault goes unanswered (see the header comment). */
		if (p->st.unauthentic < 10)
			fprintf(stderr, "pager: page %llu failed authentication "
				"in every store that returned it; not served: "
				"the guest stops at it\n",
				(unsigned long long)pg);
		p->st.unauthentic++;
		p->st.unauthentic_page = pg;
		return -1;
	}
	if (src < 0) {
		/* Nothing to give back: zeros make the loss visible. */
		if (p->st.lost < 10)
			fprintf(stderr, "pager: page %llu lost in every "
				"store\n", (unsigned long long)pg);
		memset(p->fault_buf, 0, PAGER_PAGE);
		p->st.lost++;
	}
	bring_in(p, pg, p->fault_buf, fault, wp);
	if (fault && src >= 0)
		add_sample(p, src, now_ns() - t0);
	if (fault)
		log_event(p->faults, pg);
	p->ps.state[pg] = PG_IN;   /* after the copy: see the header comment */
	p->pages_out--;
	release_copies(p, pg);
	if (fault) {
		/* A sequential read: the pages after it, from the store that
		 * had this one, in one request. */
		uint64_t n = pg == p->last_fault + 1 && store >= 0 ?
			     bring_run(p, store, pg + 1, READ_AHEAD) : 0;

		p->st.read_ahead += n;
		p->last_fault = pg + n;
	}
	return 0;
}

/* A write to a SWAPPING page: it stays IN. */
static void cancel(struct pager *p, uint64_t pg)
{
	p->ps.state[pg] = PG_IN;
	p->st.cancelled++;
	log_event(p->cancels, pg);
}

/* MINOR: the mapping was zapped, the memfd has the page (unless the
 * punch of a swap-out came first: OUT).  wp: a read of a sampled page. */
static void minor_fault(struct pager *p, uint64_t pg, int write, int wp)
{
	p->st.faults_minor++;
	if (p->ps.state[pg] == PG_OUT) {
		fetch(p, pg, 1, wp);
		return;
	}
	if (write && p->ps.state[pg] == PG_SWAPPING)
		cancel(p, pg);
	continue_page(p, pg, wp || (!write &&
				    p->ps.state[pg] == PG_SWAPPING));
}

static void handle_fault(struct pager *p, const struct uffd_msg *m)
{
	uint64_t t0 = now_ns(), flags = m->arg.pagefault.flags;
	uint64_t pg = page_at(p, m->arg.pagefault.address);
	int write = !!(flags & (UFFD_PAGEFAULT_FLAG_WRITE |
				UFFD_PAGEFAULT_FLAG_WP)), wp;

	if (pg == UINT64_MAX)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->sampler)
		sampler_record(p->sampler, pg, write);
	/* A sampled page is mapped write-protected on a read, whatever the
	 * fault: its next write in the interval must fault too. */
	wp = !write && sampled(p, pg);
	if (flags & UFFD_PAGEFAULT_FLAG_WP) {
		p->st.faults_wp++;
		if (p->ps.state[pg] == PG_OUT) {
			/* Validate won: the page is punched, give it back. */
			p->st.wp_on_out++;
			fetch(p, pg, 1, 0);
		} else {
			if (p->ps.state[pg] == PG_SWAPPING)
				cancel(p, pg);
			pager_write_protect(p, pg, 1, 0);   /* also wakes */
		}
	} else if (flags & UFFD_PAGEFAULT_FLAG_MINOR) {
		minor_fault(p, pg, write, wp);
		add_sample(p, PAGER_LAT_MINOR, now_ns() - t0);
	} else {
		p->st.faults_missing++;
		if (p->ps.state[pg] == PG_OUT)
			fetch(p, pg, 1, wp);
		else
			zero_fill(p, pg, wp);
	}
	pthread_mutex_unlock(&p->lock);
}

void *pager_fault_thread(void *arg)
{
	struct pager *p = arg;
	struct uffd_msg msgs[64];
	struct pollfd fds[2] = {
		{ .fd = p->uffd, .events = POLLIN },
		{ .fd = p->stopfd, .events = POLLIN },
	};

	for (;;) {
		/* Copies waiting to be deleted go when no fault waits. */
		int ready = poll(fds, 2, __atomic_load_n(&p->deletes_waiting,
							 __ATOMIC_RELAXED) ?
				 0 : -1);

		if (ready < 0) {
			if (errno == EINTR)
				continue;
			perror("pager: poll");
			return NULL;
		}
		if (!ready) {
			pthread_mutex_lock(&p->lock);
			pager_flush_deletes(p);
			pthread_mutex_unlock(&p->lock);
			continue;
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

/* v[k] as it would be sorted, v[0..k-1] no larger, v[k+1..n-1] no
 * smaller: the percentiles of up to 786,432 latencies in linear time
 * (on average), not a sort, at every stats. */
static uint32_t select_nth(uint32_t *v, size_t n, size_t k)
{
	long lo = 0, hi = (long)n - 1, want = (long)k;

	/* Wirth's: partition around v[k] until k is between the two. */
	while (lo < hi) {
		uint32_t pivot = v[want], t;
		long i = lo, j = hi;

		do {
			while (v[i] < pivot)
				i++;
			while (pivot < v[j])
				j--;
			if (i <= j) {
				t = v[i];
				v[i++] = v[j];
				v[j--] = t;
			}
		} while (i <= j);
		if (j < want)
			lo = i;
		if (want < i)
			hi = j;
	}
	return v[want];
}

size_t pager_fault_latency(struct pager *p, int source, double *p50,
			   double *p99)
{
	uint32_t *all;
	size_t n = 0;

	pthread_mutex_lock(&p->lock);
	all = malloc(PAGER_NSOURCES * MAX_SAMPLES * sizeof(*all));
	for (int s = 0; all && s < LATENCIES; s++) {
		size_t k = p->nsamples[s] < MAX_SAMPLES ? p->nsamples[s] :
			   MAX_SAMPLES;

		if (source >= 0 ? s != source : s >= PAGER_NSOURCES)
			continue;
		memcpy(all + n, p->samples[s], k * sizeof(*all));
		n += k;
	}
	pthread_mutex_unlock(&p->lock);
	*p50 = *p99 = 0;
	if (n) {
		*p99 = select_nth(all, n, n * 99 / 100) / 1000.0;
		/* The p99's selection left every smaller one below it. */
		*p50 = select_nth(all, n * 99 / 100 + 1, n / 2) / 1000.0;
	}
	free(all);
	return n;
}

long pager_swap_in(struct pager *p, uint64_t first, uint64_t count)
{
	long fetched = 0;

	for (uint64_t pg = first, n; pg < p->npages && pg - first < count;
	     pg += n ? n : 1) {
		int i;

		/* A run of pages a request (bring_run), else one; the lock
		 * per run: faults go first. */
		pthread_mutex_lock(&p->lock);
		n = 0;
		if (p->ps.state[pg] == PG_OUT) {
			i = run_store(p, pg);
			if (i >= 0)
				n = bring_run(p, i, pg, first + count - pg);
			if (!n && !fetch(p, pg, 0, 0))
				n = 1;
		}
		p->st.swapped_in += n;
		fetched += n;
		pthread_mutex_unlock(&p->lock);
	}
	/* The fault thread may be waiting for a fault: not for these. */
	pthread_mutex_lock(&p->lock);
	pager_flush_deletes(p);
	pthread_mutex_unlock(&p->lock);
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
