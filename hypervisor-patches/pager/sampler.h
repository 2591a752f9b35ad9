/*
 * The access sampler behind pager.h's sampling calls (sampler.c): per
 * interval, the pages faults were seen on (bitmaps), a bounded queue of
 * completed intervals, the hashed sample and the thread that ends
 * intervals and has the sample zapped.  pager.c records faults into it
 * and asks it which pages are sampled.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include "pager.h"

struct sampler;

/* An access to page pg in the interval under way; under no pager lock
 * of the sampler's (it has its own). */
void sampler_record(struct sampler *s, uint64_t pg, int write);
int sampler_sampled(const struct sampler *s, uint64_t pg);
/* Stop the thread and free everything. */
void sampler_free(struct sampler *s);

/* pager.c: the pager's sampler (NULL: not sampling), and setting it
 * (-1 with errno as pager_start_sampling says). */
struct sampler *pager_sampler(struct pager *p);
int pager_set_sampler(struct pager *p, struct sampler *s);

#endif
