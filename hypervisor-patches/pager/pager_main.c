/*
 * memcanal-pager: page a QEMU guest's RAM out to stores and back.
 *
 *   memcanal-pager --socket PATH --store tcp:HOST:PORT --store file:PATH
 *                  [--copies N] [--owner N] [--state PATH] [--pool-mb N]
 *                  [--pool PATH]
 *
 * It waits on the Unix socket PATH for libmemcanal-uffd.so (preloaded
 * into QEMU) to hand over [uffd, memfd] of guest RAM, takes charge of it
 * with pager_init, and then reads commands on stdin, one a line:
 *
 *   swapout START COUNT   swap out memfd pages START..START+COUNT-1
 *                         (page indexes from the mapping's offset; pages
 *                         not resident are skipped)
 *   swapin START COUNT    bring the OUT pages of that range back in
 *                         without a fault (prefetch)
 *   faults                the pages faulted in from OUT, and those whose
 *                         swap-out a write cancelled, since the last
 *                         `faults` (a bounded log: `overflow` were lost)
 *   stats                 print the counters
 *   quit                  stop serving faults and exit (pages still out
 *                         stay out: QEMU's accesses to them hang)
 *
 * With --state PATH the pages' states live in PATH, and a pager started
 * with the same --state and --store after one died takes over without a
 * handoff: PATH names QEMU's pid and memfd, and the uffd and memfd are
 * duplicated out of QEMU with pidfd_getfd (root), the registration
 * adopted and reconciled (pager_init).  --pool-mb N keeps up to N MiB of
 * swapped-out pages in memory, served before any store.  With --pool PATH
 * that memory is the file PATH (/dev/shm/...), shared by every pager
 * given the same PATH: the host-wide pool, created N MiB by the first,
 * pages keyed by --owner, which must then differ per guest (as it must
 * for a shared memory server).
 *
 * Every answer is one JSON line on stdout.  At end of input the pager
 * keeps serving faults until QEMU exits: it must outlive the guest.
 * Stores are tried in the order given; a page goes out once `copies`
 * (default: all) of them hold it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "handoff.h"
#include "pager.h"

struct guest {
	struct memcanal_handoff h;
	int uffd, memfd;
};

/* How long a pager taking over waits for the shim to hand it the uffd
 * again (it offers it every 200 ms) before taking it out of QEMU. */
#define RESEND_WAIT_MS 2000

static void die(const char *what)
{
	fprintf(stderr, "memcanal-pager: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct pager_store *open_store(const char *spec, uint64_t owner)
{
	char buf[512], *port;

	if (!strncmp(spec, "file:", 5))
		return pager_file_store(spec + 5);
	if (strncmp(spec, "tcp:", 4))
		return NULL;
	snprintf(buf, sizeof(buf), "%s", spec + 4);
	port = strrchr(buf, ':');
	if (!port)
		return NULL;
	*port++ = 0;
	return pager_tcp_store(buf, port, owner);
}

/*
 * The registration `state_path` describes, if its QEMU still runs: the
 * uffd and memfd duplicated out of it (pidfd_getfd), found among its
 * descriptors by kind and by inode.  0 on success.
 */
static int recover_guest(const char *state_path, struct guest *g)
{
	uint64_t reg[2];
	char dir[64], link[384], target[64];
	struct dirent *e;
	struct stat st;
	int pidfd;
	DIR *fds;

	g->uffd = g->memfd = -1;
	if (pager_state_registration(state_path, reg, &g->h.base, &g->h.len,
				     &g->h.offset))
		return -1;
	g->h.pid = reg[0];
	pidfd = syscall(SYS_pidfd_open, (pid_t)reg[0], 0);
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)reg[0]);
	fds = pidfd < 0 ? NULL : opendir(dir);
	while (fds && (e = readdir(fds))) {
		int fd = atoi(e->d_name);
		ssize_t n;

		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		if (g->uffd < 0 && !strcmp(target, "anon_inode:[userfaultfd]"))
			g->uffd = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		else if (g->memfd < 0 && !stat(link, &st) &&
			 S_ISREG(st.st_mode) && st.st_ino == reg[1])
			g->memfd = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	}
	if (fds)
		closedir(fds);
	if (pidfd >= 0)
		close(pidfd);
	if (g->uffd >= 0 && g->memfd >= 0)
		return 0;
	if (g->uffd >= 0)
		close(g->uffd);
	if (g->memfd >= 0)
		close(g->memfd);
	return -1;
}

/* Listen on `path` for QEMU's handoff. */
static int listen_on(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int s;

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	unlink(path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(s, 1))
		die(path);
	printf("{\"event\": \"listening\", \"socket\": \"%s\"}\n", path);
	fflush(stdout);
	return s;
}

/*
 * Accept one handoff on `s` within timeout_ms (-1: no limit): the
 * header and [uffd, memfd].  Returns the connection, -1 on timeout.
 */
static int accept_handoff(int s, int timeout_ms, struct guest *g)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &g->h, sizeof(g->h) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	struct cmsghdr *c;
	int conn, ready;

	while ((ready = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (ready <= 0)
		return -1;
	conn = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		die("accept");
	if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) != sizeof(g->h) ||
	    g->h.magic != MEMCANAL_HANDOFF_MAGIC)
		die("bad handoff");
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
		errno = EPROTO;
		die("handoff without [uffd, memfd]");
	}
	memcpy(&g->uffd, CMSG_DATA(c), sizeof(int));
	memcpy(&g->memfd, CMSG_DATA(c) + sizeof(int), sizeof(int));
	return conn;
}

/*
 * QEMU's [uffd, memfd]: handed over on `path` (first, or again by the
 * shim to a pager taking over), else, when the state file names a QEMU
 * that is still running and nothing came within RESEND_WAIT_MS,
 * duplicated out of it.  Returns the connection to answer, or -1.
 */
static int get_guest(const char *path, const char *state_path,
		     struct guest *g)
{
	uint64_t reg[2], base, len, offset;
	int s = listen_on(path), conn = -1;
	int running = state_path &&
		!pager_state_registration(state_path, reg, &base, &len,
					  &offset) &&
		!kill((pid_t)reg[0], 0);

	if (running)
		conn = accept_handoff(s, RESEND_WAIT_MS, g);
	if (conn < 0 && (!running || recover_guest(state_path, g)))
		conn = accept_handoff(s, -1, g);
	close(s);
	unlink(path);
	return conn;
}

static uint64_t memfd_kib(int memfd)
{
	struct stat st;

	return fstat(memfd, &st) ? 0 : (uint64_t)st.st_blocks / 2;
}

static void print_list(const char *key, const uint64_t *v, size_t n)
{
	printf(", \"%s\": [", key);
	for (size_t i = 0; i < n; i++)
		printf("%s%" PRIu64, i ? ", " : "", v[i]);
	printf("]");
}

/* p50/p99 of a fault source, as JSON numbers or null. */
static void print_source(struct pager *p, int source, uint64_t faults)
{
	double p50, p99;

	printf("%s\"%s\": {\"faults\": %" PRIu64, source ? ", " : "",
	       pager_source_names[source], faults);
	if (pager_fault_latency(p, source, &p50, &p99))
		printf(", \"p50_us\": %.1f, \"p99_us\": %.1f}", p50, p99);
	else
		printf(", \"p50_us\": null, \"p99_us\": null}");
}

/* The counters, as the rest of a JSON object already opened. */
static void print_stats(struct pager *p, const struct guest *g, int nstores)
{
	struct pager_stats st;
	double p50 = 0, p99 = 0;
	uint64_t out = pager_pages_out(p);
	size_t samples;

	pager_get_stats(p, &st);
	samples = pager_fault_latency(p, -1, &p50, &p99);
	printf(", \"pages_out\": %" PRIu64 ", \"out_pages\": %" PRIu64
	       ", \"pool_pages\": %" PRIu64 ", \"pool_capacity\": %" PRIu64
	       ", \"pool_recovered\": %" PRIu64 ", \"memfd_kib\": %" PRIu64
	       ", \"swapped_out\": %" PRIu64 ", \"swapped_in\": %" PRIu64
	       ", \"cancelled\": %" PRIu64
	       ", \"faults_missing\": %" PRIu64 ", \"faults_wp\": %" PRIu64
	       ", \"zero_fills\": %" PRIu64 ", \"wp_on_out\": %" PRIu64
	       ", \"put_failed_batches\": %" PRIu64 ", \"lost\": %" PRIu64
	       ", \"adopted\": %s, \"reconciled\": %" PRIu64
	       ", \"fault_samples\": %zu, \"fault_p50_us\": %.1f"
	       ", \"fault_p99_us\": %.1f",
	       out, out, st.pool_pages, st.pool_capacity, st.pool_recovered,
	       memfd_kib(g->memfd), st.swapped_out,
	       st.swapped_in, st.cancelled, st.faults_missing, st.faults_wp,
	       st.zero_fills, st.wp_on_out, st.put_failed_batches, st.lost,
	       st.adopted ? "true" : "false", st.reconciled, samples, p50,
	       p99);
	print_list("served", st.served, nstores);
	print_list("get_failed", st.get_failed, nstores);
	print_list("skipped_down", st.skipped_down, nstores);
	print_list("bad_sum", st.bad_sum, nstores);
	print_list("put_failed", st.put_failed, nstores);
	printf(", \"sources\": {");
	for (int s = 0; s < PAGER_NSOURCES; s++)
		print_source(p, s, st.source_faults[s]);
	printf("}}\n");
	fflush(stdout);
}

/* START COUNT clipped to the guest's pages. */
static void clip(const struct guest *g, uint64_t *start, uint64_t *count)
{
	uint64_t npages = g->h.len / PAGER_PAGE;

	if (*start > npages)
		*start = npages;
	if (*count > npages - *start)
		*count = npages - *start;
}

static void swapin(struct pager *p, const struct guest *g, uint64_t start,
		   uint64_t count)
{
	clip(g, &start, &count);
	printf("{\"event\": \"swapin\", \"fetched\": %ld}\n",
	       pager_swap_in(p, start, count));
	fflush(stdout);
}

static void faults(struct pager *p)
{
	static uint64_t pages[PAGER_EVENT_LOG];
	uint64_t lost, more;
	size_t n = pager_take_events(p, 0, pages, PAGER_EVENT_LOG, &lost);

	printf("{\"event\": \"faults\"");
	print_list("faults", pages, n);
	n = pager_take_events(p, 1, pages, PAGER_EVENT_LOG, &more);
	print_list("cancelled", pages, n);
	printf(", \"overflow\": %" PRIu64 "}\n", lost + more);
	fflush(stdout);
}

static void swapout(struct pager *p, const struct guest *g, int nstores,
		    uint64_t start, uint64_t count)
{
	uint64_t *pages, n = 0;
	double t0;
	long dropped;

	clip(g, &start, &count);
	pages = malloc((count ? count : 1) * sizeof(*pages));
	if (!pages)
		die("malloc");
	for (n = 0; n < count; n++)
		pages[n] = start + n;
	t0 = now_s();
	dropped = pager_swap_out(p, pages, count);
	t0 = now_s() - t0;
	free(pages);
	printf("{\"event\": \"swapout\", \"asked\": %" PRIu64
	       ", \"dropped\": %ld, \"seconds\": %.3f, \"mb_per_s\": %.1f",
	       count, dropped, t0,
	       dropped > 0 ? dropped * PAGER_PAGE / 1e6 / t0 : 0.0);
	print_stats(p, g, nstores);
}

/* Serve faults until QEMU exits. */
static void outlive(pid_t pid)
{
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	if (pidfd < 0)
		return;
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
	close(pidfd);
}

int main(int argc, char **argv)
{
	struct pager_store *stores[PAGER_MAX_STORES];
	const char *specs[PAGER_MAX_STORES], *path = NULL;
	int nstores = 0, copies = 0, conn = -1, quit = 0;
	uint64_t owner = 1, pool_mb = 0;
	struct pager_opts opts = { 0 };
	struct guest g;
	struct pager *p;
	struct stat st;
	char line[256];

	/* A peer that went away (QEMU, a store) is an error to handle, not
	 * a signal that kills the pager and leaves its guest hung. */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val)
			goto usage;
		if (!strcmp(arg, "--socket"))
			path = val;
		else if (!strcmp(arg, "--store") && nstores < PAGER_MAX_STORES)
			specs[nstores++] = val;
		else if (!strcmp(arg, "--copies"))
			copies = atoi(val);
		else if (!strcmp(arg, "--owner"))
			owner = strtoull(val, NULL, 0);
		else if (!strcmp(arg, "--state"))
			opts.state_path = val;
		else if (!strcmp(arg, "--pool-mb"))
			pool_mb = strtoull(val, NULL, 0);
		else if (!strcmp(arg, "--pool"))
			opts.pool_path = val;
		else
			goto usage;
		i++;
	}
	if (!path || !nstores)
		goto usage;
	if (!copies)
		copies = nstores;
	conn = get_guest(path, opts.state_path, &g);
	/* The fault thread polls: a blocking uffd polls as POLLERR only. */
	if (fcntl(g.uffd, F_SETFL, fcntl(g.uffd, F_GETFL) | O_NONBLOCK))
		die("uffd O_NONBLOCK");
	for (int i = 0; i < nstores; i++) {
		stores[i] = open_store(specs[i], owner);
		if (!stores[i])
			die(specs[i]);
	}
	if (fstat(g.memfd, &st))
		die("memfd");
	opts.registration[0] = g.h.pid;
	opts.registration[1] = st.st_ino;
	opts.pool_pages = (pool_mb << 20) / PAGER_PAGE;
	opts.pool_owner = owner;
	p = pager_init(g.uffd, g.h.base, g.h.len, g.memfd, g.h.offset, stores,
		       nstores, copies, &opts);
	if (!p)
		die("pager_init");
	if (conn >= 0 && write(conn, "k", 1) != 1)
		die("handoff answer");
	printf("{\"event\": \"attached\", \"handed_over\": %s",
	       conn >= 0 ? "true" : "false");
	if (conn >= 0)
		close(conn);
	printf(", \"pid\": %" PRIu64 ", \"base\": %"
	       PRIu64 ", \"len\": %" PRIu64 ", \"offset\": %" PRIu64
	       ", \"copies\": %d, \"stores\": [",
	       g.h.pid, g.h.base, g.h.len, g.h.offset, copies);
	for (int i = 0; i < nstores; i++)
		printf("%s\"%s\"", i ? ", " : "", stores[i]->name);
	printf("]");
	print_stats(p, &g, nstores);

	while (!quit && fgets(line, sizeof(line), stdin)) {
		uint64_t start, count;

		if (sscanf(line, "swapout %" SCNu64 " %" SCNu64, &start,
			   &count) == 2) {
			swapout(p, &g, nstores, start, count);
		} else if (sscanf(line, "swapin %" SCNu64 " %" SCNu64, &start,
				  &count) == 2) {
			swapin(p, &g, start, count);
		} else if (!strncmp(line, "faults", 6)) {
			faults(p);
		} else if (!strncmp(line, "stats", 5)) {
			printf("{\"event\": \"stats\"");
			print_stats(p, &g, nstores);
		} else if (!strncmp(line, "quit", 4)) {
			quit = 1;
		} else {
			printf("{\"event\": \"error\", \"line\": \"bad command\"}\n");
			fflush(stdout);
		}
	}
	if (!quit)
		outlive(g.h.pid);
	printf("{\"event\": \"exit\"");
	print_stats(p, &g, nstores);
	pager_fini(p);
	for (int i = 0; i < nstores; i++)
		stores[i]->destroy(stores[i]);
	return 0;
usage:
	fprintf(stderr, "usage: memcanal-pager --socket PATH --store "
		"file:PATH|tcp:HOST:PORT [--store ...] [--copies N] "
		"[--owner N] [--state PATH] [--pool-mb N] [--pool PATH]\n");
	return 2;
}
