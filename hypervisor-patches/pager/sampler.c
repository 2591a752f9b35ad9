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
 * Only the sampled pages touched in the interval that ended are mapped
 * (the others were zapped before it and not accessed since: the pager
 * maps no sampled page without a fault, and the kernel does no
 * fault-around on a MINOR-registered range), so only those are zapped
 * again: a steady interval's zap costs in proportion to its sampled
 * working set, not to the sample.  The whole sample is zapped at the
 * start, after a failed zap and in the two intervals after the sample
 * changes to one not within the last (another salt, a higher rate):
 * `resample` takes a new
 * rate and salt for the next interval, and each interval says which it
 * had and whether its zap was of the whole sample.
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
#include <stdio.h>
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
	struct pager_sampling cfg;  /* its rate and salt: the sample's */
	uint64_t npages, threshold;
	uint64_t *runs, sampled;   /* the sample, {first, count} pairs */
	size_t nruns;
	pager_zap_fn zap;
	void *zap_arg;
	/* Under tick_lock: the next `whole` arms zap the whole sample, or
	 * else these runs, the sampled pages touched in the interval that
	 * ended. */
	int whole;
	uint64_t *rezap;
	size_t nrezap;

	pthread_mutex_t lock;      /* everything below */
	uint64_t *bits[2][2];      /* [pair][touched, written] */
	int cur;                   /* the pair of the interval under way */
	uint64_t index, start_ns, zapped, zap_ns;
	int full, zapped_whole;
	/* The sample the next interval is to have (resample), if next_set. */
	double next_rate;
	uint64_t next_salt;
	int next_set;
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
	/* Read without the lock by the fault thread: a fault racing a
	 * change of sample is judged by either (the change's arm zaps the
	 * whole new sample after it anyway). */
	return page_hash(pg, __atomic_load_n(&s->cfg.salt, __ATOMIC_RELAXED)) <
	       __atomic_load_n(&s->threshold, __ATOMIC_RELAXED);
}

/* mrc._threshold: round half to even, as Python's round; at least 1. */
static uint64_t threshold_of(double rate)
{
	uint64_t t = (uint64_t)nearbyint(rate * (1 << HASH_BITS));

	return t ? t : 1;
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

/* Zap for the interval under way: every page on a full pass, else the
 * whole sample or the sampled pages touched since its last zap; under
 * tick_lock. */
static void arm(struct sampler *s)
{
	uint64_t all[2] = { 0, s->npages }, zapped = 0, t0 = now_ns(), ns;
	int full, whole = s->whole, rc = 0;

	pthread_mutex_lock(&s->lock);
	full = s->full;
	pthread_mutex_unlock(&s->lock);
	if (full)
		rc = s->zap(s->zap_arg, all, 1, &zapped);
	else if (whole)
		rc = s->zap(s->zap_arg, s->runs, s->nruns, &zapped);
	else if (s->nrezap)
		rc = s->zap(s->zap_arg, s->rezap, s->nrezap, &zapped);
	free(s->rezap);
	s->rezap = NULL;
	s->nrezap = 0;
	/* A failed zap may have left sampled pages mapped. */
	s->whole = rc ? 1 : whole > 1 ? whole - 1 : 0;
	ns = now_ns() - t0;
	pthread_mutex_lock(&s->lock);
	s->zapped = rc ? 0 : zapped;
	s->zap_ns = ns;
	s->zapped_whole = full || whole;
	s->zap_requests++;
	s->zap_ns_total += ns;
	s->zap_failed += rc != 0;
	if (!rc)
		s->zap_times[full][s->nzaps[full]++ % ZAP_TIMES] = ns;
	pthread_mutex_unlock(&s->lock);
}

/* The sample of salt and threshold as runs in *runs (n of them), its
 * pages in *count: 0, or -1 if out of memory. */
static int sample_runs(uint64_t npages, uint64_t salt, uint64_t threshold,
		       uint64_t **runs, size_t *n, uint64_t *count)
{
	uint64_t run = UINT64_MAX;
	size_t cap = 0;

	*runs = NULL;
	*n = 0;
	*count = 0;
	for (uint64_t pg = 0; pg <= npages; pg++) {
		int in = pg < npages && page_hash(pg, salt) < threshold;

		*count += in;
		if (in && run == UINT64_MAX) {
			run = pg;
		} else if (!in && run != UINT64_MAX) {
			if (append(runs, n, &cap, run, pg - run)) {
				free(*runs);
				*runs = NULL;
				return -1;
			}
			run = UINT64_MAX;
		}
	}
	return 0;
}

/* The sampled pages of `touched` (n runs) as runs in s->rezap: 0, or -1
 * if out of memory. */
static int touched_sample(struct sampler *s, const uint64_t *touched,
			  size_t n)
{
	uint64_t run = UINT64_MAX, next = UINT64_MAX;
	size_t cap = 0;

	for (size_t i = 0; i < n; i++) {
		for (uint64_t pg = touched[2 * i];
		     pg < touched[2 * i] + touched[2 * i + 1]; pg++) {
			if (!sampler_sampled(s, pg))
				continue;
			if (run != UINT64_MAX && pg != next) {
				if (append(&s->rezap, &s->nrezap, &cap, run,
					   next - run))
					return -1;
				run = UINT64_MAX;
			}
			if (run == UINT64_MAX)
				run = pg;
			next = pg + 1;
		}
	}
	if (run != UINT64_MAX)
		return append(&s->rezap, &s->nrezap, &cap, run, next - run);
	return 0;
}

/* Take the sample resample asked for, under tick_lock, before the next
 * interval's arm; its first zap is of the whole sample unless it lies
 * within the last (same salt, no higher rate). */
static void take_new_sample(struct sampler *s, double rate, uint64_t salt)
{
	uint64_t threshold = threshold_of(rate), *runs, count, *old;
	size_t n;

	if (salt == s->cfg.salt && threshold == s->threshold) {
		pthread_mutex_lock(&s->lock);
		s->cfg.rate = rate;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (sample_runs(s->npages, salt, threshold, &runs, &n, &count)) {
		fprintf(stderr, "memcanal-pager: out of memory for a new "
			"sample; keeping the last\n");
		return;
	}
	/* Twice: a fault judged by the last sample while this one came in
	 * may have mapped a page of this one beside it (zero_fill) after
	 * the first zap. */
	if (salt != s->cfg.salt || threshold > s->threshold)
		s->whole = 2;
	pthread_mutex_lock(&s->lock);
	old = s->runs;
	s->runs = runs;
	s->nruns = n;
	s->sampled = count;
	s->cfg.rate = rate;
	__atomic_store_n(&s->cfg.salt, salt, __ATOMIC_RELAXED);
	__atomic_store_n(&s->threshold, threshold, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	free(old);
}

static void tick(struct sampler *s)
{
	struct pager_interval done;
	uint64_t *touched, *written, next_salt = 0;
	double next_rate = 0;
	int next_set;

	pthread_mutex_lock(&s->tick_lock);
	pthread_mutex_lock(&s->lock);
	done = (struct pager_interval){ .index = s->index,
		.start_ns = s->start_ns, .end_ns = now_ns(),
		.zapped = s->zapped, .zap_ns = s->zap_ns, .full = s->full,
		.rate = s->cfg.rate, .salt = s->cfg.salt,
		.whole = s->zapped_whole };
	touched = s->bits[s->cur][0];
	written = s->bits[s->cur][1];
	s->cur ^= 1;
	s->index++;
	s->start_ns = done.end_ns;
	s->full = full_pass(s, s->index);
	s->zapped = s->zap_ns = 0;
	next_set = s->next_set;
	next_rate = s->next_rate;
	next_salt = s->next_salt;
	s->next_set = 0;
	pthread_mutex_unlock(&s->lock);

	/* Nobody writes the old pair any more. */
	done.touched = take_runs(touched, s->npages, &done.ntouched);
	done.written = take_runs(written, s->npages, &done.nwritten);
	if (next_set)
		take_new_sample(s, next_rate, next_salt);
	if (!s->whole && ((done.ntouched && !done.touched) ||
			  touched_sample(s, done.touched, done.ntouched)))
		s->whole = 1;       /* out of memory: zap it all */
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
	size_t words = (npages + 63) / 64;

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
	s->threshold = threshold_of(cfg->rate);
	s->whole = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->tick_lock, NULL);
	for (int i = 0; i < 4; i++) {
		s->bits[i / 2][i % 2] = calloc(words ? words : 1,
					       sizeof(uint64_t));
		if (!s->bits[i / 2][i % 2])
			goto fail;
	}
	if (sample_runs(npages, cfg->salt, s->threshold, &s->runs, &s->nruns,
			&s->sampled))
		goto fail;
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
	free(s->rezap);
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

size_t sampler_runs(struct sampler *s, uint64_t **runs)
{
	size_t n = 0;

	pthread_mutex_lock(&s->tick_lock);
	*runs = malloc((s->nruns ? s->nruns : 1) * 2 * sizeof(**runs));
	if (*runs) {
		n = s->nruns;
		memcpy(*runs, s->runs, n * 2 * sizeof(**runs));
	}
	pthread_mutex_unlock(&s->tick_lock);
	return n;
}

int sampler_resample(struct sampler *s, double rate, uint64_t salt)
{
	if (!(rate > 0 && rate <= 1)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	s->next_rate = rate;
	s->next_salt = salt;
	s->next_set = 1;
	pthread_mutex_unlock(&s->lock);
	return 0;
}
