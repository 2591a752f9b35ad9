/*
 * uffd_selftest: the pager on a plain process, racing writers.
 *
 * A shared memfd of -m MiB is mapped and filled with a pattern that
 * names each word's page, version and index (the last 1/16 is left
 * never-populated).  Writer threads each own the pages p % W == w: they
 * check a whole page against the version they last wrote, then rewrite
 * it with the next version, mostly on a hot quarter of the memory.  A
 * swapper swaps out random 16 MiB ranges, hot pages included, into two
 * file stores (both must hold a page before it is dropped).  Halfway,
 * store 0 is truncated to nothing (-k 0 turns that off): faults must
 * fall back to store 1.  With -t host:port, store 0 is a
 * memcanal-memserver instead, emptied halfway by RECLAIM.  At the end every page is read back and
 * checked, the cold three quarters go out, the memfd's blocks are
 * counted, and every page is checked once more.  -p MiB gives the pager
 * a shared cache pool of that size; -P path puts that pool in the file
 * path, shared with other selftests given the same path (this one's
 * pages keyed by its pid), created by the first.  -K path seals every
 * copy with the key in path (memcanal-pager's --key-file; without it,
 * plaintext).  -r 1 restarts the pager at a
 * quarter of the run, as after a crash: the first one stops (its uffd
 * stays set up, with pages out and writers faulting), the second adopts
 * the registration from the state file and must serve every page.  -R 2
 * maps the memfd's two halves in swapped order, as two regions (the
 * second half first): page indexes then differ from memfd offsets.
 *
 *   uffd_selftest [-m MiB] [-s seconds] [-w writers] [-d dir] [-k 0|1]
 *                 [-n 1|2] [-t host:port] [-p MiB] [-P path] [-K key]
 *                 [-r 0|1] [-R 1|2]
 *
 * Exit status 1 on any wrong word, lost page or swap-out error.  -n 1 (one store, no
 * redundancy) with -k 1 must lose pages: the check of the checker.
 */
#define _GNU_SOURCE
#include "crypt.h"
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WORDS (PAGER_PAGE / 8)
#define UNTOUCHED UINT32_MAX
#define MAX_WRITERS 16

static uint64_t *mem;
static uint64_t npages;
static uint32_t *version;           /* per page, owned by its writer */
static int nwriters = 2;
static atomic_int stop;
static atomic_ullong wrong_words, writes, reported;

static uint64_t word(uint64_t pg, uint32_t v, uint64_t i)
{
	return (pg << 40) ^ ((uint64_t)v << 12) ^ i ^ 0x5a5a000000000000ULL;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Check a page against its version; returns the wrong words. */
static uint64_t check(uint64_t pg)
{
	volatile uint64_t *w = mem + pg * WORDS;
	uint32_t v = version[pg];
	uint64_t bad = 0;

	for (uint64_t i = 0; i < WORDS; i++) {
		uint64_t want = v == UNTOUCHED ? 0 : word(pg, v, i);

		if (w[i] != want) {
			if (!bad && atomic_fetch_add(&reported, 1) < 10)
				fprintf(stderr, "page %llu word %llu: %llx, "
					"want %llx (version %u)\n",
					(unsigned long long)pg,
					(unsigned long long)i,
					(unsigned long long)w[i],
					(unsigned long long)want, v);
			bad++;
		}
	}
	return bad;
}

static void rewrite(uint64_t pg)
{
	volatile uint64_t *w = mem + pg * WORDS;
	uint32_t v = version[pg] == UNTOUCHED ? 0 : version[pg] + 1;

	for (uint64_t i = 0; i < WORDS; i++)
		w[i] = word(pg, v, i);
	version[pg] = v;
}

static void *writer(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t s = 0x1234567ULL * (id + 1), per = npages / nwriters;

	while (!atomic_load(&stop)) {
		uint64_t r = rng(&s), k = r % per;

		if (r >> 60 < 14)   /* 7/8 of the time: the hot quarter */
			k %= per / 4;
		uint64_t pg = k * nwriters + id;

		atomic_fetch_add(&wrong_words, check(pg));
		rewrite(pg);
		atomic_fetch_add(&writes, 1);
	}
	return NULL;
}

static long blocks(int fd)
{
	struct stat st;

	fstat(fd, &st);
	return st.st_blocks * 512;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long mib = 64, secs = 4, kill_store = 1, pool_mib = 0, restart = 0;
	int nstores = 2, nregions = 1;
	const char *dir = "/tmp", *server = NULL, *pool_path = NULL;
	const char *key_file = NULL;
	uint8_t key[PAGER_KEY_SIZE];
	int opt;

	while ((opt = getopt(argc, argv, "m:s:w:d:k:n:t:p:P:K:r:R:")) != -1) {
		switch (opt) {
		case 'm': mib = atol(optarg); break;
		case 's': secs = atol(optarg); break;
		case 'w': nwriters = atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'k': kill_store = atol(optarg); break;
		case 'n': nstores = atoi(optarg); break;
		case 't': server = optarg; break;
		case 'p': pool_mib = atol(optarg); break;
		case 'P': pool_path = optarg; break;
		case 'K': key_file = optarg; break;
		case 'r': restart = atol(optarg); break;
		case 'R': nregions = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-m MiB] [-s seconds] "
				"[-w writers] [-d dir] [-k 0|1] [-n 1|2] "
				"[-t host:port] [-p MiB] [-P path] [-K key] "
				"[-r 0|1] [-R 1|2]\n",
				argv[0]);
			return 2;
		}
	}
	if (nwriters < 1 || nwriters > MAX_WRITERS || mib < 2 ||
	    nstores < 1 || nstores > 2 || nregions < 1 || nregions > 2) {
		fprintf(stderr, "bad -w, -m, -n or -R\n");
		return 2;
	}
	size_t len = (size_t)mib << 20;

	npages = len / PAGER_PAGE;
	int memfd = memfd_create("uffd_selftest", MFD_CLOEXEC);

	if (memfd < 0 || ftruncate(memfd, len) < 0) {
		perror("memfd");
		return 2;
	}
	struct pager_region regions[2];
	size_t half = len / 2;

	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	regions[0] = (struct pager_region){ (uint64_t)(uintptr_t)mem, len, 0,
					    memfd };
	if (nregions == 2 && mem != MAP_FAILED &&
	    (mmap(mem, half, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		  memfd, half) == MAP_FAILED ||
	     mmap((char *)mem + half, half, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_FIXED, memfd, 0) == MAP_FAILED))
		mem = MAP_FAILED;
	if (nregions == 2) {
		regions[0] = (struct pager_region){ (uint64_t)(uintptr_t)mem,
						    half, half, memfd };
		regions[1] = (struct pager_region){ regions[0].base + half,
						    half, 0, memfd };
	}
	version = malloc(npages * sizeof(*version));
	if (mem == MAP_FAILED || !version) {
		perror("mmap");
		return 2;
	}
	uint64_t populated = npages - npages / 16;

	for (uint64_t pg = 0; pg < npages; pg++) {
		version[pg] = UNTOUCHED;
		if (pg < populated)
			rewrite(pg);
	}

	/* As QEMU would: the uffd is made by the process owning the map. */
	int uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (uffd < 0) {
		perror("userfaultfd (root or CAP_SYS_PTRACE needed)");
		return 2;
	}
	char path[2][4096];
	struct pager_store *stores[2];

	for (int i = 0; i < nstores; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/uffd_selftest.%d.store.%d",
			 dir, (int)getpid(), i);
		if (i == 0 && server) {
			char host[256];
			const char *colon = strrchr(server, ':');

			snprintf(host, sizeof(host), "%.*s",
				 colon ? (int)(colon - server) : 0, server);
			stores[0] = colon ? pager_tcp_store(host, colon + 1,
							    getpid()) : NULL;
			if (!stores[0]) {
				fprintf(stderr, "memserver %s: %s\n", server,
					strerror(errno));
				return 2;
			}
			continue;
		}
		stores[i] = pager_file_store(path[i]);
		if (!stores[i]) {
			perror(path[i]);
			return 2;
		}
	}
	char state_path[4096];
	struct pager_opts opts = {
		.state_path = state_path,
		.pid = getpid(),
		.owner = getpid(),
		.key = key_file ? key : NULL,
	};

	if (key_file && pager_read_key(key_file, key))
		return 2;
	if (pool_mib || pool_path) {
		opts.pool = pager_pool_open(pool_path,
					    (pool_mib << 20) / PAGER_PAGE);
		if (!opts.pool)
			return 2;
	}

	snprintf(state_path, sizeof(state_path), "%s/uffd_selftest.%d.state",
		 dir, (int)getpid());
	struct pager *p = pager_init(uffd, regions, nregions, stores, nstores,
				     nstores, &opts);
	struct pager_stats gone = { 0 };
	uint64_t out_at_restart = 0;

	if (!p)
		return 2;

	pthread_t th[MAX_WRITERS];
	for (int i = 0; i < nwriters; i++)
		pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i);

	uint64_t range = (16 << 20) / PAGER_PAGE, seed = 42, rounds = 0;
	uint64_t *list = malloc(npages * sizeof(*list));

	if (!list)
		return 2;
	double t0 = now(), killed_at = -1, restarted_at = -1;
	long swap_failed = 0;

	if (range > npages)
		range = npages;
	while (now() - t0 < secs) {
		uint64_t first = rng(&seed) % (npages - range + 1);

		for (uint64_t i = 0; i < range; i++)
			list[i] = first + i;
		if (pager_swap_out(p, list, range) < 0)
			swap_failed++;
		rounds++;
		if (kill_store && killed_at < 0 && now() - t0 >= secs / 2.0) {
			/* Store 0 dies: everything it held is gone. */
			if (server ? pager_tcp_store_reclaim_all(stores[0]) :
			    truncate(path[0], 0))
				perror("killing store 0");
			killed_at = now() - t0;
		}
		if (restart && restarted_at < 0 && now() - t0 >= secs / 4.0) {
			/* The pager goes; writers fault on its pages and
			 * wait until the next one adopts the uffd. */
			pager_get_stats(p, &gone);
			out_at_restart = pager_pages_out(p);
			pager_fini(p);
			usleep(100000);
			p = pager_init(uffd, regions, nregions, stores,
				       nstores, nstores, &opts);
			if (!p)
				return 1;
			restarted_at = now() - t0;
		}
		usleep(20000);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nwriters; i++)
		pthread_join(th[i], NULL);

	/* Every page back in and checked, then the cold three quarters
	 * out with nobody writing: the memory that frees. */
	uint64_t final_bad = 0;

	for (uint64_t pg = 0; pg < npages; pg++)
		final_bad += check(pg);
	long before = blocks(memfd);
	uint64_t nlist = 0;

	/* Writer w owns pages slot * W + w; slots below per/4 are hot. */
	for (uint64_t pg = 0; pg < npages; pg++)
		if (pg / nwriters >= npages / nwriters / 4)
			list[nlist++] = pg;
	double ts = now();
	long out = pager_swap_out(p, list, nlist);
	double swap_secs = now() - ts;
	long after = blocks(memfd);

	/* Every page once more, through the faults. */
	for (uint64_t pg = 0; pg < npages; pg++)
		final_bad += check(pg);
	atomic_fetch_add(&wrong_words, final_bad);

	struct pager_stats st;
	double p50, p99;
	size_t nlat;

	pager_get_stats(p, &st);
	st.lost += gone.lost;
	nlat = pager_fault_latency(p, -1, &p50, &p99);
	printf("memory: %ld MiB in %d regions, %llu pages, %d writers, %ld s, "
	       "%llu swap-out rounds of %llu pages\n", mib, nregions,
	       (unsigned long long)npages, nwriters, secs,
	       (unsigned long long)rounds, (unsigned long long)range);
	printf("writes: %llu page rewrites\n",
	       (unsigned long long)atomic_load(&writes));
	printf("swapped out: %llu pages (cancelled by validate: %llu, "
	       "write raced the punch: %llu, not resident: %llu)\n",
	       (unsigned long long)st.swapped_out,
	       (unsigned long long)st.cancelled,
	       (unsigned long long)st.wp_on_out,
	       (unsigned long long)st.not_resident);
	printf("final swap-out: %ld pages in %.3f s (%.0f MB/s)\n", out,
	       swap_secs, out * (double)PAGER_PAGE / 1e6 / swap_secs);
	printf("host memory freed: %ld MiB (memfd blocks %ld -> %ld KiB)\n",
	       (before - after) >> 20, before >> 10, after >> 10);
	printf("faults: %llu missing, %llu wp, %llu zero-filled, %llu woken\n",
	       (unsigned long long)st.faults_missing,
	       (unsigned long long)st.faults_wp,
	       (unsigned long long)st.zero_fills,
	       (unsigned long long)st.wakes);
	for (int i = 0; i < nstores; i++)
		printf("store %d: served %llu, failed gets %llu, skipped while "
		       "down %llu, bad checksums %llu, failed puts %llu\n", i,
		       (unsigned long long)st.served[i],
		       (unsigned long long)st.get_failed[i],
		       (unsigned long long)st.skipped_down[i],
		       (unsigned long long)st.bad_sum[i],
		       (unsigned long long)st.put_failed[i]);
	if (killed_at >= 0)
		printf("store 0 (%s) emptied at %.2f s\n",
		       server ? "memserver" : "file", killed_at);
	if (restarted_at >= 0)
		printf("pager restarted at %.2f s: adopted %llu, reconciled "
		       "%llu, %llu pages out before\n", restarted_at,
		       (unsigned long long)st.adopted,
		       (unsigned long long)st.reconciled,
		       (unsigned long long)out_at_restart);
	printf("fault latency (store fetches): %zu samples, p50 %.1f us, "
	       "p99 %.1f us\n", nlat, p50, p99);
	for (int s = 0; s < PAGER_NSOURCES; s++) {
		nlat = pager_fault_latency(p, s, &p50, &p99);
		printf("faults from %s: %zu, p50 %.1f us, p99 %.1f us\n",
		       pager_source_names[s], nlat, p50, p99);
	}
	printf("pool: %llu pages held of %llu\n",
	       (unsigned long long)st.pool_pages,
	       (unsigned long long)st.pool_capacity);
	printf("batches kept in for want of copies: %llu\n",
	       (unsigned long long)st.put_failed_batches);
	printf("sealed: %s, bad pool copies: %llu\n",
	       st.sealed ? "AES-256-GCM" : "no (plaintext)",
	       (unsigned long long)st.pool_bad);
	printf("lost pages: %llu\n", (unsigned long long)st.lost);
	printf("wrong words: %llu\n",
	       (unsigned long long)atomic_load(&wrong_words));

	pager_fini(p);
	if (opts.pool)
		pager_pool_close(opts.pool);
	free(list);
	free(version);
	munmap(mem, len);
	for (int i = 0; i < nstores; i++) {
		stores[i]->destroy(stores[i]);
		unlink(path[i]);
	}
	unlink(state_path);
	close(uffd);
	return (atomic_load(&wrong_words) || st.lost || swap_failed ||
		out < 0) ? 1 : 0;
}
