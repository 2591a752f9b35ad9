/*
 * sample_guest: a stand-in for QEMU for the sampling tests, run under
 * the real shim:
 *
 *   MEMCANAL_PAGER_SOCKET=PATH LD_PRELOAD=libmemcanal-uffd.so \
 *       sample_guest [-m MiB] [-r regions] [-t threads] [-p percent]
 *                    [-l seconds] [-S secret]
 *
 * It maps -r memfds (memfd:sample_guest.N, MAP_SHARED, -m MiB in all),
 * as QEMU maps its memory backends, and fills every page with words that
 * name the page, its version and the word (-S: every page starts with
 * the text secret instead, for tests that look for it where pages go).  Pages are numbered as the
 * pager numbers them: the regions in address order, concatenated.  Then
 * it prints {"ready": true, "pages": N, ...} and reads commands:
 *
 *   touch K   phase K: a pseudo-random -p percent of the pages (seeded by
 *             K, plus the pages on each side of every region boundary),
 *             each read only (60 %), written only (30 %: the first
 *             access is a store) or read then written (10 %), split
 *             among -t threads; every read checks the whole page.
 *             Prints {"phase": K, "touched": [first, count, ...],
 *             "written": [...], "bad": wrong words}
 *   check     checks every page: {"check": wrong words}
 *   quit
 *
 * -l seconds instead runs phases back to back for that long (a load to
 * measure sampling's costs under) and prints {"phases", "pages_per_s",
 * "bad"}; exit status 1 on any wrong word.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define WORDS (PAGE / 8)
#define MAX_REGIONS 8
#define MAX_THREADS 16

enum { UNTOUCHED, READ, WRITE, READ_WRITE };

struct region {
	char *base;
	uint64_t pages;
};

static struct region regions[MAX_REGIONS];
static int nregions = 2, nthreads = 4, percent = 30;
static uint64_t npages;
static uint32_t *version;
static uint8_t *kind;       /* the phase's access to each page */
static const char *secret = "";
static atomic_ullong bad;

static volatile uint64_t *page_at(uint64_t pg)
{
	for (int i = 0; i < nregions; i++) {
		if (pg < regions[i].pages)
			return (volatile uint64_t *)(regions[i].base +
						     pg * PAGE);
		pg -= regions[i].pages;
	}
	abort();
}

static uint64_t word(uint64_t pg, uint32_t v, uint64_t i)
{
	return (pg << 40) ^ ((uint64_t)v << 12) ^ i ^ 0x3c3c000000000000ULL;
}

/* Word i of page pg at version v: the secret's, then word()'s. */
static uint64_t expected(uint64_t pg, uint32_t v, uint64_t i)
{
	size_t len = strlen(secret);
	uint64_t w = 0;

	if (i * 8 >= len)
		return word(pg, v, i);
	memcpy(&w, secret + i * 8, len - i * 8 < 8 ? len - i * 8 : 8);
	return w;
}

static uint64_t check(uint64_t pg)
{
	volatile uint64_t *w = page_at(pg);
	uint64_t wrong = 0;

	for (uint64_t i = 0; i < WORDS; i++)
		wrong += w[i] != expected(pg, version[pg], i);
	return wrong;
}

static void rewrite(uint64_t pg, uint32_t v)
{
	volatile uint64_t *w = page_at(pg);

	for (uint64_t i = 0; i < WORDS; i++)
		w[i] = expected(pg, v, i);
	version[pg] = v;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t wrong = 0;

	for (uint64_t pg = id; pg < npages; pg += nthreads) {
		if (kind[pg] == READ || kind[pg] == READ_WRITE)
			wrong += check(pg);
		if (kind[pg] == WRITE || kind[pg] == READ_WRITE)
			rewrite(pg, version[pg] + 1);
	}
	atomic_fetch_add(&bad, wrong);
	return NULL;
}

/* Choose phase k's accesses into kind[]; returns how many pages. */
static uint64_t choose(uint64_t k)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL * (k + 1), n = 0, edge = 0;

	for (uint64_t pg = 0; pg < npages; pg++) {
		uint64_t r = rng(&s) % 1000;

		kind[pg] = UNTOUCHED;
		if (r >= (uint64_t)percent * 10)
			continue;
		r = rng(&s) % 10;
		kind[pg] = r < 6 ? READ : r < 9 ? WRITE : READ_WRITE;
		n++;
	}
	/* Runs cross region boundaries: the pages each side are touched. */
	for (int i = 0; i + 1 < nregions; i++) {
		edge += regions[i].pages;
		n += (kind[edge - 1] == UNTOUCHED) + (kind[edge] == UNTOUCHED);
		kind[edge - 1] = kind[edge] = READ_WRITE;
	}
	return n;
}

static uint64_t run_phase(uint64_t k)
{
	pthread_t th[MAX_THREADS];
	uint64_t n = choose(k);

	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	return n;
}

/* The pages whose kind is in `mask` (bits of kinds), as runs. */
static void print_runs(const char *key, unsigned mask)
{
	uint64_t start = UINT64_MAX;
	int first = 1;

	printf(", \"%s\": [", key);
	for (uint64_t pg = 0; pg <= npages; pg++) {
		int in = pg < npages && (mask >> kind[pg] & 1);

		if (in && start == UINT64_MAX) {
			start = pg;
		} else if (!in && start != UINT64_MAX) {
			printf("%s%" PRIu64 ", %" PRIu64, first ? "" : ", ",
			       start, pg - start);
			first = 0;
			start = UINT64_MAX;
		}
	}
	printf("]");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int map_regions(long mib)
{
	uint64_t per = (uint64_t)mib * 256 / nregions;

	for (int i = 0; i < nregions; i++) {
		char name[32];
		int fd;

		snprintf(name, sizeof(name), "sample_guest.%d", i);
		fd = memfd_create(name, MFD_CLOEXEC);
		/* The fd stays open, as QEMU's: the shim hands it over. */
		if (fd < 0 || ftruncate(fd, per * PAGE))
			return -1;
		regions[i].base = mmap(NULL, per * PAGE, PROT_READ | PROT_WRITE,
				       MAP_SHARED, fd, 0);
		regions[i].pages = per;
		if (regions[i].base == MAP_FAILED)
			return -1;
	}
	/* The pager's order: addresses. */
	for (int i = 1; i < nregions; i++)
		for (int j = i; j > 0 && regions[j].base < regions[j - 1].base;
		     j--) {
			struct region t = regions[j];

			regions[j] = regions[j - 1];
			regions[j - 1] = t;
		}
	npages = per * nregions;
	return 0;
}

int main(int argc, char **argv)
{
	long mib = 64, loop = 0;
	char line[256];
	int opt;

	while ((opt = getopt(argc, argv, "m:r:t:p:l:S:")) != -1) {
		switch (opt) {
		case 'm': mib = atol(optarg); break;
		case 'r': nregions = atoi(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'p': percent = atoi(optarg); break;
		case 'l': loop = atol(optarg); break;
		case 'S': secret = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-m MiB] [-r regions] "
				"[-t threads] [-p percent] [-l seconds] "
				"[-S secret]\n",
				argv[0]);
			return 2;
		}
	}
	if (nregions < 1 || nregions > MAX_REGIONS || nthreads < 1 ||
	    nthreads > MAX_THREADS || percent < 1 || percent > 100 ||
	    mib * 256 / nregions < 512 || strlen(secret) > PAGE / 2 ||
	    map_regions(mib)) {
		fprintf(stderr, "bad arguments, or no memory\n");
		return 2;
	}
	version = calloc(npages, sizeof(*version));
	kind = calloc(npages, 1);
	if (!version || !kind)
		return 2;
	for (uint64_t pg = 0; pg < npages; pg++)
		rewrite(pg, 0);
	printf("{\"ready\": true, \"pages\": %" PRIu64 ", \"regions\": [",
	       npages);
	for (int i = 0; i < nregions; i++)
		printf("%s[%" PRIuPTR ", %" PRIu64 "]", i ? ", " : "",
		       (uintptr_t)regions[i].base, regions[i].pages * PAGE);
	printf("]}\n");
	fflush(stdout);
	if (loop) {
		double t0 = now(), secs;
		uint64_t phases = 0, pages = 0;

		while ((secs = now() - t0) < loop)
			pages += run_phase(++phases);
		printf("{\"phases\": %" PRIu64 ", \"pages_per_s\": %.0f, "
		       "\"bad\": %llu}\n", phases, pages / secs,
		       (unsigned long long)atomic_load(&bad));
		return atomic_load(&bad) ? 1 : 0;
	}
	while (fgets(line, sizeof(line), stdin)) {
		uint64_t k;

		if (sscanf(line, "touch %" SCNu64, &k) == 1) {
			atomic_store(&bad, 0);
			run_phase(k);
			printf("{\"phase\": %" PRIu64, k);
			print_runs("touched", 1u << READ | 1u << WRITE |
				   1u << READ_WRITE);
			print_runs("written", 1u << WRITE | 1u << READ_WRITE);
			printf(", \"bad\": %llu}\n",
			       (unsigned long long)atomic_load(&bad));
		} else if (!strncmp(line, "check", 5)) {
			uint64_t wrong = 0;

			for (uint64_t pg = 0; pg < npages; pg++)
				wrong += check(pg);
			printf("{\"check\": %" PRIu64 "}\n", wrong);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
