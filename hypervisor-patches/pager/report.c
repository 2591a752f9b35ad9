/*
 * memcanal-pager's answers: one JSON line each, on stdout or to the
 * control socket's client.  Counters come from the pager (pager.h); the
 * keys are the line protocol other programs read (README.md).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <sys/stat.h>

#include "daemon.h"

void print_u64s(FILE *f, const char *key, const uint64_t *v, size_t n)
{
	fprintf(f, ", \"%s\": [", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", v[i]);
	fprintf(f, "]");
}

void print_error(FILE *f, const char *what)
{
	fprintf(f, "{\"event\": \"error\", \"line\": \"%s\"}\n", what);
	fflush(f);
}

/* p50/p99 of a latency, as JSON numbers or null. */
static void print_latency(FILE *f, struct pager *p, int which,
			  const char *prefix)
{
	double p50, p99;

	if (pager_fault_latency(p, which, &p50, &p99))
		fprintf(f, ", \"%sp50_us\": %.1f, \"%sp99_us\": %.1f", prefix,
			p50, prefix, p99);
	else
		fprintf(f, ", \"%sp50_us\": null, \"%sp99_us\": null", prefix,
			prefix);
}

static void print_sampling(FILE *f, struct pager *p,
			   const struct pager_stats *st)
{
	struct pager_sampling_stats ss = { 0 };
	int on = pager_sampling_stats(p, &ss);

	fprintf(f, ", \"sampling\": {\"enabled\": %s, \"rate\": %.10g, "
		"\"interval_ms\": %u, \"full_pass_every\": %u, \"intervals\": "
		"%" PRIu64 ", \"sampled_pages\": %" PRIu64 ", \"minor_faults\": "
		"%" PRIu64, on ? "true" : "false", ss.cfg.rate,
		ss.cfg.interval_ms, ss.cfg.full_pass_every, ss.current,
		ss.sampled_pages, st->faults_minor);
	print_latency(f, p, PAGER_LAT_MINOR, "minor_");
	fprintf(f, ", \"zap_requests\": %" PRIu64 ", \"zap_ns\": %" PRIu64
		", \"zap_failed\": %" PRIu64, ss.zap_requests,
		ss.zap_ns_total, ss.zap_failed);
	for (int full = 0; full < 2; full++) {
		const char *kind = full ? "full_zap" : "zap";

		if (ss.zap_times[full])
			fprintf(f, ", \"%s_p50_us\": %.1f, \"%s_p99_us\": %.1f",
				kind, ss.zap_p50_us[full], kind,
				ss.zap_p99_us[full]);
		else
			fprintf(f, ", \"%s_p50_us\": null, \"%s_p99_us\": null",
				kind, kind);
	}
	fprintf(f, "}");
}

static uint64_t memfd_kib(const struct guest *g)
{
	uint64_t kib = 0;
	struct stat st;

	for (uint64_t i = 0; i < g->h.nregions; i++)
		if (!fstat(g->memfd[i], &st))
			kib += (uint64_t)st.st_blocks / 2;
	return kib;
}

/* The counters, as the rest of a JSON object already opened. */
void print_stats(FILE *f, struct daemon *d)
{
	struct pager *p = d->p;
	struct pager_stats st;
	uint64_t out = pager_pages_out(p);
	double p50 = 0, p99 = 0;
	size_t samples;

	pager_get_stats(p, &st);
	samples = pager_fault_latency(p, -1, &p50, &p99);
	fprintf(f, ", \"pages_out\": %" PRIu64 ", \"out_pages\": %" PRIu64
		", \"pool_pages\": %" PRIu64 ", \"pool_capacity\": %" PRIu64
		", \"pool_recovered\": %" PRIu64 ", \"memfd_kib\": %" PRIu64
		", \"swapped_out\": %" PRIu64 ", \"swapped_in\": %" PRIu64
		", \"read_ahead\": %" PRIu64
		", \"cancelled\": %" PRIu64
		", \"faults_missing\": %" PRIu64 ", \"faults_wp\": %" PRIu64
		", \"faults_minor\": %" PRIu64 ", \"deferred\": %" PRIu64
		", \"zero_fills\": %" PRIu64 ", \"wp_on_out\": %" PRIu64
		", \"put_failed_batches\": %" PRIu64 ", \"lost\": %" PRIu64
		", \"unauthentic\": %" PRIu64
		", \"unauthentic_page\": %" PRId64
		", \"sealed\": %s, \"pool_bad\": %" PRIu64
		", \"adopted\": %s, \"reconciled\": %" PRIu64
		", \"fault_samples\": %zu, \"fault_p50_us\": %.1f"
		", \"fault_p99_us\": %.1f",
		out, out, st.pool_pages, st.pool_capacity, st.pool_recovered,
		memfd_kib(&d->g), st.swapped_out, st.swapped_in,
		st.read_ahead, st.cancelled,
		st.faults_missing, st.faults_wp, st.faults_minor, st.deferred,
		st.zero_fills, st.wp_on_out, st.put_failed_batches, st.lost,
		st.unauthentic,
		st.unauthentic ? (int64_t)st.unauthentic_page : (int64_t)-1,
		st.sealed ? "true" : "false", st.pool_bad,
		st.adopted ? "true" : "false", st.reconciled, samples, p50,
		p99);
	print_u64s(f, "served", st.served, d->nstores);
	print_u64s(f, "get_failed", st.get_failed, d->nstores);
	print_u64s(f, "skipped_down", st.skipped_down, d->nstores);
	print_u64s(f, "bad_sum", st.bad_sum, d->nstores);
	print_u64s(f, "put_failed", st.put_failed, d->nstores);
	fprintf(f, ", \"swapout_ms\": {");
	for (int i = 0; i < PAGER_SWAP_PHASES; i++)
		fprintf(f, "%s\"%s\": %.1f", i ? ", " : "",
			pager_swap_phase_names[i], st.swap_ns[i] / 1e6);
	fprintf(f, "}, \"put_ms\": [");
	for (int i = 0; i < d->nstores; i++)
		fprintf(f, "%s%.1f", i ? ", " : "", st.put_ns[i] / 1e6);
	fprintf(f, "]");
	fprintf(f, ", \"sources\": {");
	for (int s = 0; s < PAGER_NSOURCES; s++) {
		fprintf(f, "%s\"%s\": {\"faults\": %" PRIu64, s ? ", " : "",
			pager_source_names[s], st.source_faults[s]);
		print_latency(f, p, s, "");
		fprintf(f, "}");
	}
	fprintf(f, "}");
	print_sampling(f, p, &st);
	fprintf(f, ", \"regions\": [");
	for (uint64_t i = 0; i < d->g.h.nregions; i++)
		fprintf(f, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]",
			i ? ", " : "", d->g.h.region[i].base,
			d->g.h.region[i].len, d->g.h.region[i].offset);
	fprintf(f, "], \"pages\": %" PRIu64 "}\n", pager_npages(p));
	fflush(f);
}

void print_stores(FILE *f, struct daemon *d)
{
	unsigned to = d->swap_to ? d->swap_to : (1u << d->nstores) - 1;

	fprintf(f, ", \"copies\": %d, \"stores\": [",
		d->copies ? d->copies : __builtin_popcount(to));
	for (int i = 0; i < d->nstores; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", d->stores[i]->name);
	fprintf(f, "], \"swap_to\": [");
	for (int i = 0, n = 0; i < d->nstores; i++)
		if (to & (1u << i))
			fprintf(f, "%s\"%s\"", n++ ? ", " : "",
				d->stores[i]->name);
	fprintf(f, "]");
}

void print_store(FILE *f, struct daemon *d, const char *event, int renewed)
{
	fprintf(f, "{\"event\": \"%s\"", event);
	print_stores(f, d);
	fprintf(f, "%s}\n", renewed ? ", \"renewed\": true" : "");
	fflush(f);
}

/* `attached`, or `hello` once attached: the guest and the counters. */
void print_attached(FILE *f, struct daemon *d, const char *event)
{
	const struct memcanal_handoff *h = &d->g.h;
	uint64_t len = 0;

	for (uint64_t i = 0; i < h->nregions; i++)
		len += h->region[i].len;
	fprintf(f, "{\"event\": \"%s\", \"attached\": true, \"handed_over\": "
		"%s, \"pid\": %d, \"base\": %" PRIu64 ", \"len\": %" PRIu64
		", \"offset\": %" PRIu64, event,
		d->handed_over ? "true" : "false", (int)d->g.pid,
		h->region[0].base, len, h->region[0].offset);
	print_stores(f, d);
	print_stats(f, d);
}

void print_samples(FILE *f, struct daemon *d)
{
	struct pager_sampling_stats ss;
	struct pager_interval *v;
	uint64_t overflow;
	size_t n;

	if (!d->p || !pager_sampling_stats(d->p, &ss)) {
		fprintf(f, "{\"event\": \"samples\", \"sampling\": false, "
			"\"overflow\": 0, \"intervals\": []}\n");
		fflush(f);
		return;
	}
	n = pager_take_intervals(d->p, &v, &overflow);
	fprintf(f, "{\"event\": \"samples\", \"sampling\": true, \"rate\": "
		"%.10g, \"salt\": %" PRIu64 ", \"interval_ms\": %u, "
		"\"full_pass_every\": %u, \"sampled_pages\": %" PRIu64
		", \"current\": %" PRIu64 ", \"overflow\": %" PRIu64
		", \"intervals\": [", ss.cfg.rate, ss.cfg.salt,
		ss.cfg.interval_ms, ss.cfg.full_pass_every, ss.sampled_pages,
		ss.current, overflow);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"index\": %" PRIu64 ", \"start_ns\": %" PRIu64
			", \"end_ns\": %" PRIu64 ", \"full\": %s, \"zapped\": %"
			PRIu64 ", \"zap_ns\": %" PRIu64 ", \"whole\": %s, "
			"\"rate\": %.10g, \"salt\": %" PRIu64, i ? ", " : "",
			v[i].index, v[i].start_ns, v[i].end_ns,
			v[i].full ? "true" : "false", v[i].zapped, v[i].zap_ns,
			v[i].whole ? "true" : "false", v[i].rate, v[i].salt);
		print_u64s(f, "touched", v[i].touched, 2 * v[i].ntouched);
		print_u64s(f, "written", v[i].written, 2 * v[i].nwritten);
		fprintf(f, "}");
	}
	fprintf(f, "]}\n");
	fflush(f);
	pager_free_intervals(v, n);
}
