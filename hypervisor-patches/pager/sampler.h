/*
 * The access sampler behind pager.h's sampling calls (sampler.c): per
 * interval, the pages faults were seen on (bitmaps), a bounded queue of
 * completed intervals, the hashed sample and the thread that ends
 * intervals and has the sample zapped.  The pager uses it (fault.c
 * records faults into it and asks it which pages are sampled;
 * pager_setup.c makes it and answers pager.h's sampling calls with it);
 * it calls nothing of the pager's.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include "pager.h"

struct sampler;

/* A sampler of npages pages, cfg's sample zapped through zap(arg); NULL
 * with errno set (EINVAL: cfg's rate not in (0, 1], or no zap). */
struct sampler *sampler_new(uint64_t npages, const struct pager_sampling *cfg,
			    pager_zap_fn zap, void *arg);
/* Zap for the first interval, and start the thread ending intervals
 * (with an interval_ms): 0, or -1 if it could not start. */
int sampler_start(struct sampler *s);
/* An access to page pg in the interval under way; under no pager lock
 * of the sampler's (it has its own). */
void sampler_record(struct sampler *s, uint64_t pg, int write);
int sampler_sampled(const struct sampler *s, uint64_t pg);
/* pager.h's pager_sampling_stats, pager_sample_tick,
 * pager_take_intervals and pager_sample_runs, of this sampler. */
void sampler_stats(struct sampler *s, struct pager_sampling_stats *st);
void sampler_tick(struct sampler *s);
size_t sampler_take_intervals(struct sampler *s, struct pager_interval **out,
			      uint64_t *overflow);
/* A copy of the sample's runs (first, count pairs) the caller frees. */
size_t sampler_runs(struct sampler *s, uint64_t **runs);
/* Take rate and salt's sample from the next interval on: 0, or -1 with
 * EINVAL for a rate not in (0, 1]. */
int sampler_resample(struct sampler *s, double rate, uint64_t salt);
/* Stop the thread and free everything. */
void sampler_free(struct sampler *s);

#endif
