/*
 * sampler: which pages a guest accessed, interval by interval, from the
 * faults its pager serves.
 *
 * Faults of the interval under way set bits in a pair of bitmaps
 * (touched, written) under the sampler's lock; ending an interval swaps
 * in the other pair, turns the old one into sorted runs outside the lock
 * and queues them.  Then the next interval is armed: the hashed sample
 * (or every page, for a full pass) is zapped through the caller's
 * function, so that the first access to each page in the new interval
 * faults.  An access during the zap itself may go unseen in the new
 * interval (its page was still mapped): the boundary costs the zap's
 * duration, and no access is ever counted in a wrong interval.
 *
 * It knows nothing of the pager: pager_setup.c owns a pager's sampler
 * and answers pager.h's sampling calls with it; fault.c records faults.
 */
#define _GNU_SOURCE
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* The completed-interval queue's budget; older intervals are dropped. */
#define MAX_INTERVALS 64
#define ZAP_TIMES 64     /* latest zap times kept, of each kind */
#define MAX_RUNS (8u << 20)
/* SHARDS' hash (memcanal/estimation/_lru.c): Fibonacci hashing of
 * page + salt, 24 bits. */
#define HASH_BITS 24
#define GOLDEN_RATIO_64 0x9e3779b97f4a7c15ULL

struct sampler {
	struct pager_sampling cfg;
	uint64_t npages, threshold;
	uint64_t *runs, sampled;   /* the sample, {first, count} pairs */
	size_t nruns;
	pager_zap_fn zap;
	void *zap_arg;

	pthread_mutex_t lock;      /* everything below */
	uint64_t *bits[2][2];      /* [pair][touched, written] */
	int cur;                   /* the pair of the interval under way */
	uint64_t index, start_ns, zapped, zap_ns;
	int full;
	struct pager_interval queue[MAX_INTERVALS];
	size_t nqueue;
	uint64_t queued_runs, overflow;
	uint64_t zap_requests, zap_ns_total, zap_failed;
	uint64_t zap_times[2][ZAP_TIMES], nzaps[2];   /* [full] */

	pthread_mutex_t tick_lock; /* one interval ending at a time */
	pthread_t thread;
	int stopfd, threaded;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint32_t page_hash(uint64_t page, uint64_t salt)
{
	return (uint32_t)(((page + salt) * GOLDEN_RATIO_64) >>
			  (64 - HASH_BITS));
}

int sampler_sampled(const struct sampler *s, uint64_t pg)
{
	return page_hash(pg, s->cfg.salt) < s->threshold;
}

/* Append run {first, count} to *runs (n of cap): -1 if out of memory. */
static int append(uint64_t **runs, size_t *n, size_t *cap, uint64_t first,
		  uint64_t count)
{
	if (*n == *cap) {
		size_t more = *cap ? 2 * *cap : 256;
		uint64_t *grown = realloc(*runs, more * 2 * sizeof(**runs));

		if (!grown)
			return -1;
		*runs = grown;
		*cap = more;
	}
	(*runs)[2 * *n] = first;
	(*runs)[2 * *n + 1] = count;
	++*n;
	return 0;
}

/* The set bits of `bits` as runs, clearing them; NULL if out of memory
 * (bits cleared all the same). */
static uint64_t *take_runs(uint64_t *bits, uint64_t npages, size_t *n)
{
	uint64_t *runs = NULL, start = UINT64_MAX;
	size_t cap = 0;
	int failed = 0;

	*n = 0;
	for (uint64_t w = 0; w < (npages + 63) / 64; w++) {
		uint64_t word = bits[w];

		bits[w] = 0;
		if (word == (start == UINT64_MAX ? 0 : ~0ULL))
			continue;    /* no run starts or ends in it */
		for (int b = 0; b < 64; b++) {
			uint64_t pg = w * 64 + b;

			if ((word >> b & 1) && start == UINT64_MAX) {
				start = pg;
			} else if (!(word >> b & 1) && start != UINT64_MAX) {
				failed |= append(&runs, n, &cap, start,
						 pg - start);
				start = UINT64_MAX;
			}
		}
	}
	if (start != UINT64_MAX)
		failed |= append(&runs, n, &cap, start, npages - start);
	if (failed) {
		free(runs);
		return NULL;
	}
	return runs;
}

void pager_free_intervals(struct pager_interval *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].touched);
		free(v[i].written);
	}
	free(v);
}

/* Queue a completed interval, under the lock, dropping the oldest to
 * keep within budget. */
static void enqueue(struct sampler *s, const struct pager_interval *iv)
{
	size_t runs = iv->ntouched + iv->nwritten;

	while (s->nqueue && (s->nqueue == MAX_INTERVALS ||
			     s->queued_runs + runs > MAX_RUNS)) {
		struct pager_interval *old = &s->queue[0];

		s->queued_runs -= old->ntouched + old->nwritten;
		free(old->touched);
		free(old->written);
		memmove(s->queue, s->queue + 1, --s->nqueue * sizeof(*old));
		s->overflow++;
	}
	s->queue[s->nqueue++] = *iv;
	s->queued_runs += runs;
}

static int full_pass(const struct sampler *s, uint64_t index)
{
	return s->cfg.full_pass_every &&
	       index % s->cfg.full_pass_every == s->cfg.full_pass_every - 1;
}

/* Zap for the interval under way: the sample, or every page. */
static void arm(struct sampler *s)
{
	uint64_t all[2] = { 0, s->npages }, zapped = 0, t0 = now_ns(), ns;
	int full, rc;

	pthread_mutex_lock(&s->lock);
	full = s->full;
	pthread_mutex_unlock(&s->lock);
	rc = s->zap(s->zap_arg, full ? all : s->runs, full ? 1 : s->nruns,
		    &zapped);
	ns = now_ns() - t0;
	pthread_mutex_lock(&s->lock);
	s->zapped = rc ? 0 : zapped;
	s->zap_ns = ns;
	s->zap_requests++;
	s->zap_ns_total += ns;
	s->zap_failed += rc != 0;
	if (!rc)
		s->zap_times[full][s->nzaps[full]++ % ZAP_TIMES] = ns;
	pthread_mutex_unlock(&s->lock);
}

static void tick(struct sampler *s)
{
	struct pager_interval done;
	uint64_t *touched, *written;

	pthread_mutex_lock(&s->tick_lock);
	pthread_mutex_lock(&s->lock);
	done = (struct pager_interval){ .index = s->index,
		.start_ns = s->start_ns, .end_ns = now_ns(),
		.zapped = s->zapped, .zap_ns = s->zap_ns, .full = s->full };
	touched = s->bits[s->cur][0];
	written = s->bits[s->cur][1];
	s->cur ^= 1;
	s->index++;
	s->start_ns = done.end_ns;
	s->full = full_pass(s, s->index);
	s->zapped = s->zap_ns = 0;
	pthread_mutex_unlock(&s->lock);

	/* Nobody writes the old pair any more. */
	done.touched = take_runs(touched, s->npages, &done.ntouched);
	done.written = take_runs(written, s->npages, &done.nwritten);
	pthread_mutex_lock(&s->lock);
	if ((done.ntouched && !done.touched) ||
	    (done.nwritten && !done.written)) {
		free(done.touched);
		free(done.written);
		s->overflow++;     /* out of memory: the interval is lost */
	} else {
		enqueue(s, &done);
	}
	pthread_mutex_unlock(&s->lock);
	arm(s);
	pthread_mutex_unlock(&s->tick_lock);
}

static void *sampler_thread(void *arg)
{
	struct sampler *s = arg;
	struct pollfd pfd = { .fd = s->stopfd, .events = POLLIN };
	uint64_t period = s->cfg.interval_ms * 1000000ULL;
	uint64_t next = now_ns() + period;

	for (;;) {
		uint64_t now = now_ns();

		if (now >= next) {
			tick(s);
			/* A late tick is not caught up: intervals stay
			 * interval_ms long. */
			next = next + period > now_ns() ? next + period :
			       now_ns() + period;
			continue;
		}
		if (poll(&pfd, 1, (int)((next - now + 999999) / 1000000)) > 0)
			return NULL;
	}
}

struct sampler *sampler_new(uint64_t npages, const struct pager_sampling *cfg,
			    pager_zap_fn zap, void *arg)
{
	struct sampler *s;
	size_t words = (npages + 63) / 64, cap = 0;
	uint64_t run = UINT64_MAX;

	if (!(cfg->rate > 0 && cfg->rate <= 1) || !zap) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->npages = npages;
	s->zap = zap;
	s->zap_arg = arg;
	s->stopfd = cfg->interval_ms ? eventfd(0, EFD_CLOEXEC) : -1;
	if (cfg->interval_ms && s->stopfd < 0) {
		free(s);
		return NULL;
	}
	/* mrc._threshold: round half to even, as Python's round. */
	s->threshold = (uint64_t)nearbyint(cfg->rate * (1 << HASH_BITS));
	if (!s->threshold)
		s->threshold = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->tick_lock, NULL);
	for (int i = 0; i < 4; i++) {
		s->bits[i / 2][i % 2] = calloc(words ? words : 1,
					       sizeof(uint64_t));
		if (!s->bits[i / 2][i % 2])
			goto fail;
	}
	for (uint64_t pg = 0; pg <= npages; pg++) {
		int in = pg < npages && sampler_sampled(s, pg);

		s->sampled += in;
		if (in && run == UINT64_MAX) {
			run = pg;
		} else if (!in && run != UINT64_MAX) {
			if (append(&s->runs, &s->nruns, &cap, run, pg - run))
				goto fail;
			run = UINT64_MAX;
		}
	}
	s->start_ns = now_ns();
	s->full = full_pass(s, 0);
	return s;
fail:
	sampler_free(s);
	return NULL;
}

void sampler_free(struct sampler *s)
{
	uint64_t one = 1;

	if (s->threaded) {
		if (write(s->stopfd, &one, sizeof(one)) == sizeof(one))
			pthread_join(s->thread, NULL);
	}
	if (s->stopfd >= 0)
		close(s->stopfd);
	for (size_t i = 0; i < s->nqueue; i++) {
		free(s->queue[i].touched);
		free(s->queue[i].written);
	}
	for (int i = 0; i < 4; i++)
		free(s->bits[i / 2][i % 2]);
	free(s->runs);
	free(s);
}

void sampler_record(struct sampler *s, uint64_t pg, int write)
{
	pthread_mutex_lock(&s->lock);
	s->bits[s->cur][0][pg / 64] |= 1ULL << (pg % 64);
	if (write)
		s->bits[s->cur][1][pg / 64] |= 1ULL << (pg % 64);
	pthread_mutex_unlock(&s->lock);
}

int sampler_start(struct sampler *s)
{
	/* Faults count from here; the first interval's zap arms it. */
	arm(s);
	if (s->cfg.interval_ms &&
	    !pthread_create(&s->thread, NULL, sampler_thread, s))
		s->threaded = 1;
	return s->cfg.interval_ms && !s->threaded ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* p50 and p99 of the latest zaps of a kind, under the lock. */
static void zap_percentiles(struct sampler *s, int full,
			    struct pager_sampling_stats *st)
{
	uint64_t v[ZAP_TIMES];
	size_t n = s->nzaps[full] < ZAP_TIMES ? s->nzaps[full] : ZAP_TIMES;

	st->zap_times[full] = n;
	if (!n)
		return;
	memcpy(v, s->zap_times[full], n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u64);
	st->zap_p50_us[full] = v[n / 2] / 1e3;
	st->zap_p99_us[full] = v[n * 99 / 100] / 1e3;
}

void sampler_stats(struct sampler *s, struct pager_sampling_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = (struct pager_sampling_stats){ .cfg = s->cfg,
		.sampled_pages = s->sampled, .current = s->index,
		.zapped = s->zapped, .zap_ns = s->zap_ns,
		.zap_requests = s->zap_requests,
		.zap_ns_total = s->zap_ns_total, .zap_failed = s->zap_failed };
	zap_percentiles(s, 0, st);
	zap_percentiles(s, 1, st);
	pthread_mutex_unlock(&s->lock);
}

void sampler_tick(struct sampler *s)
{
	tick(s);
}

size_t sampler_take_intervals(struct sampler *s, struct pager_interval **out,
			      uint64_t *overflow)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->nqueue;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (*out) {
		memcpy(*out, s->queue, n * sizeof(**out));
		s->nqueue = 0;
		s->queued_runs = 0;
	} else {
		n = 0;
	}
	*overflow = s->overflow;
	s->overflow = 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t sampler_runs(const struct sampler *s, const uint64_t **runs)
{
	*runs = s->runs;
	return s->nruns;
}
