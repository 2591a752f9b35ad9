/*
 * pool_selftest: two processes, owners 1 and 2, on one pool file.
 *
 * A (this process) creates a pool of 64 slots and puts its pages 0..31.
 * B (a child) maps the same file and puts its pages 100..131, then
 * 0..15: capacity is shared, so B's puts evict A's 16 oldest, and B's
 * pages 0..15 land in the very slots where A's pages 0..15 were.  B
 * takes back its pages 100..115; A must then miss its pages 0..15 (the
 * same page numbers, another owner's data) and get 16..31, and B's
 * pages 0..15 are still there for owner 2.  Then children putting in a
 * loop are SIGKILLed until some died holding the pool's mutex: A must
 * go on using the pool every time.  A file that is not a pool, and a
 * new pool without a size, must be refused.
 *
 *   pool_selftest PATH      (PATH is removed first)
 *
 * Exit status 1 on any failed check.
 */
#define _GNU_SOURCE
#include "pager.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 64
#define KILLS 200

static int failed;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAILED", what);
	failed |= !ok;
}

static void fill(uint64_t *buf, uint64_t owner, uint64_t page)
{
	for (size_t i = 0; i < PAGER_PAGE / 8; i++)
		buf[i] = owner << 48 ^ page << 16 ^ i;
}

/* 1 if owner's page is in slot, with its data, and now taken. */
static int take_exact(struct pager_pool *q, uint32_t slot, uint64_t owner,
		      uint64_t page)
{
	uint64_t got[PAGER_PAGE / 8], want[PAGER_PAGE / 8];

	fill(want, owner, page);
	return pager_pool_take(q, slot, owner, page, got) &&
	       !memcmp(got, want, PAGER_PAGE);
}

static uint32_t put(struct pager_pool *q, uint64_t owner, uint64_t page)
{
	uint64_t buf[PAGER_PAGE / 8];

	fill(buf, owner, page);
	return pager_pool_put(q, owner, page, buf);
}

/* B: its own mapping of the file, owner 2. */
static int pager_b(const char *path)
{
	struct pager_pool *q = pager_pool_open(path, 0);
	int ok = 1;

	if (!q)
		return 1;
	for (uint64_t pg = 100; pg < 132; pg++)
		ok &= put(q, 2, pg) == pg - 68;
	for (uint64_t pg = 0; pg < 16; pg++)
		ok &= put(q, 2, pg) == pg;
	for (uint64_t pg = 100; pg < 116; pg++)
		ok &= take_exact(q, pg - 68, 2, pg);
	pager_pool_close(q);
	return !ok;
}

static void putter(const char *path)
{
	struct pager_pool *q = pager_pool_open(path, 0);

	for (uint64_t pg = 0; q; pg++)
		put(q, 3, pg);
	_exit(1);
}

/* Kill putters until KILLS or some died holding the mutex; A must get
 * through the pool after each. */
static void kill_holders(struct pager_pool *q, const char *path)
{
	int kills = 0, wedged = 0;
	struct timespec pause = { 0, 0 };

	while (kills < KILLS && !pager_pool_recovered(q)) {
		pid_t pid = fork();

		if (!pid)
			putter(path);
		pause.tv_nsec = 1000000 + kills * 37000 % 2000000;
		nanosleep(&pause, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		kills++;
		alarm(10);   /* a wedged mutex: SIGALRM fails the test */
		wedged += !take_exact(q, put(q, 1, 999), 1, 999);
		alarm(0);
	}
	printf("holders killed: %d, died holding the mutex: %llu\n", kills,
	       (unsigned long long)pager_pool_recovered(q));
	expect(pager_pool_recovered(q) > 0,
	       "a holder killed holding the mutex does not wedge the pool");
	expect(!wedged, "puts and takes go on after every kill");
}

int main(int argc, char **argv)
{
	char bad[4096];
	struct pager_pool *q;
	uint32_t slot[32];
	int status, ok = 1;
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: pool_selftest PATH\n");
		return 2;
	}
	unlink(argv[1]);
	expect(!pager_pool_open(argv[1], 0), "a new pool needs a size");
	q = pager_pool_open(argv[1], SLOTS);
	if (!q)
		return 1;
	for (uint64_t pg = 0; pg < 32; pg++)
		slot[pg] = put(q, 1, pg);
	if (!fork())
		_exit(pager_b(argv[1]));
	wait(&status);
	expect(WIFEXITED(status) && !WEXITSTATUS(status),
	       "B maps the pool, evicts the oldest, takes its own pages");
	expect(pager_pool_count(q, 1) == 16 && pager_pool_count(q, 2) == 32,
	       "capacity is shared: A holds 16 pages, B 32");
	for (uint64_t pg = 0; pg < 16; pg++)
		ok &= !pager_pool_take(q, slot[pg], 1, pg, bad);
	expect(ok, "A's evicted pages miss, B's same page numbers not served");
	for (uint64_t pg = 16; pg < 32; pg++)
		ok &= take_exact(q, slot[pg], 1, pg);
	expect(ok, "A's 16 newest pages come back with A's data");
	for (uint64_t pg = 0; pg < 16; pg++)
		ok &= take_exact(q, pg, 2, pg);
	expect(ok, "B's pages 0..15 come back with B's data");
	expect(!pager_pool_count(q, 1) && pager_pool_count(q, 2) == 16,
	       "taken pages leave the pool");
	kill_holders(q, argv[1]);
	pager_pool_close(q);

	snprintf(bad, sizeof(bad), "%s.bad", argv[1]);
	f = fopen(bad, "w");
	if (f) {
		fprintf(f, "%4096s", "not a pool");
		fclose(f);
		chmod(bad, 0600);   /* refused for what it holds */
	}
	expect(!pager_pool_open(bad, SLOTS), "a file that is no pool is refused");
	unlink(bad);
	unlink(argv[1]);
	return failed;
}
