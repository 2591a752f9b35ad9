/*
 * memserver-client: a memory server's client through the pager's own
 * stores (../pager/store_tcp.c and store_tls.c), for tests and
 * benchmarks.
 *
 *   memserver-client --store tls:HOST:PORT --ca FILE --tokens FILE CMD
 *   memserver-client --store tcp:HOST:PORT CMD        (--insecure servers)
 *
 * --tokens: base64 lease tokens, one a line; a store uses the first, the
 * i-th thread of `bench` the i-th (its owner is the token's).
 *
 *   shell   commands on stdin, one answer line each on stdout ("ok", an
 *           errno name such as ENOENT, or "mismatch"):
 *             put FIRST COUNT SEED | get PAGE SEED | del FIRST COUNT
 *           (a page's bytes come from its number and SEED)
 *   bench [--threads N] [--seconds S] [--batch N] [--span N] [--idle N]
 *           each thread its own store: PUT batches of --batch pages
 *           (default 16) over --span pages (default 4096), and GETs each
 *           page alone, as faults do, for --seconds (default 5); --idle N
 *           plain connections opened first, never used. Prints PUT and
 *           GET latency percentiles and MB/s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "store_tls.h"

#define MAX_THREADS 1024
#define MAX_SAMPLES (1 << 20)

static struct {
	const char *kind; /* "tls" or "tcp" */
	char host[256], port[16];
	const char *ca;
	uint8_t (*tokens)[PAGER_LEASE_TOKEN_SIZE];
	int ntokens;
	int threads, seconds, batch, span, idle;
} opt = { .threads = 1, .seconds = 5, .batch = 16, .span = 4096 };

static void die(const char *what)
{
	fprintf(stderr, "memserver-client: %s\n", what);
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void read_tokens(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];

	if (!f)
		die("cannot read --tokens");
	while (fgets(line, sizeof(line), f)) {
		uint8_t raw[sizeof(line)];
		int n = EVP_DecodeBlock(raw, (uint8_t *)line,
					(int)strcspn(line, "\r\n"));

		/* EVP_DecodeBlock counts base64's padding as bytes. */
		if (n < PAGER_LEASE_TOKEN_SIZE)
			die("a line of --tokens is not a base64 lease token");
		opt.tokens = realloc(opt.tokens, (opt.ntokens + 1) *
				     sizeof(*opt.tokens));
		if (!opt.tokens)
			die("out of memory");
		memcpy(opt.tokens[opt.ntokens++], raw,
		       PAGER_LEASE_TOKEN_SIZE);
	}
	fclose(f);
}

static uint64_t token_owner(const uint8_t *token)
{
	uint64_t owner;

	memcpy(&owner, token + 24, 8);
	return le64toh(owner);
}

/* The i-th store: its own lease's, or owner i + 1 on plain TCP. */
static struct pager_store *open_store(int i, uint64_t *owner)
{
	if (!strcmp(opt.kind, "tcp")) {
		*owner = (uint64_t)i + 1;
		return pager_tcp_store(opt.host, opt.port, *owner);
	}
	if (i >= opt.ntokens) {
		errno = EINVAL;
		return NULL;
	}
	*owner = token_owner(opt.tokens[i]);
	struct pager_tls_opts o = {
		.host = opt.host, .port = opt.port, .owner = *owner,
		.ca_file = opt.ca, .token = opt.tokens[i],
		.token_len = PAGER_LEASE_TOKEN_SIZE,
	};
	return pager_tls_store(&o);
}

static void fill(uint8_t *page, uint64_t number, uint64_t seed)
{
	uint64_t x = number * 0x9E3779B97F4A7C15ull ^ seed;

	for (size_t i = 0; i < PAGER_PAGE; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(page + i, &x, 8);
	}
}

static const char *outcome(int failed)
{
	return failed ? strerrorname_np(errno) ?: "failed" : "ok";
}

static int shell(void)
{
	uint64_t owner;
	struct pager_store *s = open_store(0, &owner);
	char line[256];

	if (!s) {
		printf("open %s\n", strerrorname_np(errno) ?: "failed");
		return 1;
	}
	printf("open ok\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long a = 0, b = 0, c = 0;
		char cmd[8];
		int n = sscanf(line, "%7s %llu %llu %llu", cmd, &a, &b, &c);
		uint8_t want[PAGER_PAGE], got[PAGER_PAGE], *buf;

		if (n == 4 && !strcmp(cmd, "put") && b && b <= 4096) {
			buf = malloc(b * PAGER_PAGE);
			if (!buf)
				die("out of memory");
			for (uint64_t i = 0; i < b; i++)
				fill(buf + i * PAGER_PAGE, a + i, c);
			puts(outcome(s->put(s, a, buf, b)));
			free(buf);
		} else if (n == 3 && !strcmp(cmd, "get")) {
			fill(want, a, b);
			if (s->get(s, a, got))
				puts(outcome(1));
			else
				puts(memcmp(want, got, PAGER_PAGE) ? "mismatch"
				     : "ok");
		} else if (n == 3 && !strcmp(cmd, "del")) {
			puts(outcome(s->del(s, a, b)));
		} else {
			puts("EINVAL");
		}
		fflush(stdout);
	}
	s->destroy(s);
	return 0;
}

/* ---- bench ---- */

struct samples {
	float *us; /* MAX_SAMPLES latencies */
	size_t n;
};

struct worker {
	pthread_t tid;
	int index, failed;
	uint64_t puts, gets;
	struct samples put, get;
};

static void sample(struct samples *s, double seconds)
{
	if (s->n < MAX_SAMPLES)
		s->us[s->n++] = (float)(seconds * 1e6);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t owner;
	struct pager_store *s = open_store(w->index, &owner);
	uint8_t *buf = malloc((size_t)opt.batch * PAGER_PAGE);
	double end = now_s() + opt.seconds;
	uint64_t first = 0;

	if (!s || !buf) {
		fprintf(stderr, "thread %d: %s\n", w->index,
			strerrorname_np(errno) ?: "failed");
		w->failed = 1;
		free(buf);
		return NULL;
	}
	for (int i = 0; i < opt.batch; i++)
		fill(buf + (size_t)i * PAGER_PAGE, (uint64_t)i, owner);
	while (now_s() < end && !w->failed) {
		double t = now_s();

		if (s->put(s, first, buf, opt.batch)) {
			w->failed = 1;
			break;
		}
		sample(&w->put, now_s() - t);
		w->puts += opt.batch;
		for (int i = 0; i < opt.batch; i++) {
			t = now_s();
			if (s->get(s, first + i, buf + (size_t)i * PAGER_PAGE)) {
				w->failed = 1;
				break;
			}
			sample(&w->get, now_s() - t);
			w->gets++;
		}
		first = (first + opt.batch) % (opt.span - opt.batch + 1);
	}
	if (w->failed)
		fprintf(stderr, "thread %d: %s\n", w->index,
			strerrorname_np(errno) ?: "failed");
	s->destroy(s);
	free(buf);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* p50 and p99 of every worker's GET (get) or PUT samples. */
static void percentiles(struct worker *w, int get, double *p50,
			double *p99)
{
	size_t total = 0, k = 0;
	float *all;

	for (int i = 0; i < opt.threads; i++)
		total += get ? w[i].get.n : w[i].put.n;
	all = malloc((total + 1) * sizeof(*all));
	if (!all)
		die("out of memory");
	for (int i = 0; i < opt.threads; i++) {
		struct samples *s = get ? &w[i].get : &w[i].put;

		memcpy(all + k, s->us, s->n * sizeof(*all));
		k += s->n;
	}
	qsort(all, total, sizeof(*all), by_value);
	*p50 = total ? all[total / 2] : 0;
	*p99 = total ? all[total * 99 / 100] : 0;
	free(all);
}

/* --idle connections: plain TCP, never a byte sent. */
static void open_idle(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;

	if (!opt.idle)
		return;
	if (getaddrinfo(opt.host, opt.port, &hints, &res))
		die("cannot resolve the server");
	for (int i = 0; i < opt.idle; i++) {
		int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen))
			die("cannot open an idle connection");
	}
	freeaddrinfo(res);
}

static int bench(void)
{
	struct worker *w = calloc(opt.threads, sizeof(*w));
	uint64_t puts = 0, gets = 0;
	double t0, elapsed, p50, p99;
	int failed = 0;

	if (!w)
		die("out of memory");
	open_idle();
	t0 = now_s();
	for (int i = 0; i < opt.threads; i++) {
		w[i].index = i;
		w[i].put.us = malloc(MAX_SAMPLES * sizeof(float));
		w[i].get.us = malloc(MAX_SAMPLES * sizeof(float));
		if (!w[i].put.us || !w[i].get.us ||
		    pthread_create(&w[i].tid, NULL, work, &w[i]))
			die("cannot start a thread");
	}
	for (int i = 0; i < opt.threads; i++) {
		pthread_join(w[i].tid, NULL);
		puts += w[i].puts;
		gets += w[i].gets;
		failed += w[i].failed;
	}
	elapsed = now_s() - t0;
	printf("%s, %d thread(s), %d idle, %d-page PUTs, 1-page GETs, "
	       "%.1f s\n", opt.kind, opt.threads, opt.idle, opt.batch,
	       elapsed);
	percentiles(w, 0, &p50, &p99);
	printf("PUT: %.0f pages/s, %.1f MB/s; latency p50 %.1f us p99 %.1f us"
	       " per %d pages\n", puts / elapsed,
	       puts * PAGER_PAGE / elapsed / 1e6, p50, p99, opt.batch);
	percentiles(w, 1, &p50, &p99);
	printf("GET: %.0f pages/s, %.1f MB/s; latency p50 %.1f us p99 %.1f us"
	       "\n", gets / elapsed, gets * PAGER_PAGE / elapsed / 1e6, p50,
	       p99);
	printf("threads failed: %d\n", failed);
	return failed ? 1 : 0;
}

static int number(const char *text, int max)
{
	char *end;
	long n = strtol(text, &end, 10);

	if (*end || n < 0 || n > max)
		die("bad number");
	return (int)n;
}

int main(int argc, char **argv)
{
	const char *store = NULL, *tokens = NULL, *cmd = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-') {
			cmd = a;
			continue;
		}
		if (!v)
			die("an option without its value");
		i++;
		if (!strcmp(a, "--store"))
			store = v;
		else if (!strcmp(a, "--ca"))
			opt.ca = v;
		else if (!strcmp(a, "--tokens"))
			tokens = v;
		else if (!strcmp(a, "--threads"))
			opt.threads = number(v, MAX_THREADS);
		else if (!strcmp(a, "--seconds"))
			opt.seconds = number(v, 3600);
		else if (!strcmp(a, "--batch"))
			opt.batch = number(v, 4096);
		else if (!strcmp(a, "--span"))
			opt.span = number(v, 1 << 24);
		else if (!strcmp(a, "--idle"))
			opt.idle = number(v, 1 << 20);
		else
			die("unknown option (see the source's header)");
	}
	const char *colon = store ? strrchr(store, ':') : NULL;
	const char *first = store ? strchr(store, ':') : NULL;

	if (!cmd || !colon || colon == first || opt.threads < 1 ||
	    opt.batch < 1 || opt.span < opt.batch)
		die("usage: see the source's header");
	opt.kind = strncmp(store, "tls:", 4) ? "tcp" : "tls";
	if (strcmp(opt.kind, "tls") && strncmp(store, "tcp:", 4))
		die("a store is tls:HOST:PORT or tcp:HOST:PORT");
	snprintf(opt.host, sizeof(opt.host), "%.*s",
		 (int)(colon - first - 1), first + 1);
	snprintf(opt.port, sizeof(opt.port), "%s", colon + 1);
	if (!strcmp(opt.kind, "tls")) {
		if (!opt.ca || !tokens)
			die("a tls: store needs --ca and --tokens");
		read_tokens(tokens);
	}
	if (!strcmp(cmd, "shell"))
		return shell();
	if (!strcmp(cmd, "bench"))
		return bench();
	die("the command is shell or bench");
}
