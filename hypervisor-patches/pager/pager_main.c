/*
 * memcanal-pager: page a QEMU guest's RAM out to stores and back, and
 * sample which of its pages the guest accesses.
 *
 *   memcanal-pager --socket PATH [--store SPEC [--store-token-file F]]...
 *                  [--copies N] [--owner N] [--key-file PATH]
 *                  [--tls-ca PATH] [--state PATH] [--pool-mb N]
 *                  [--pool PATH] [--control PATH] [--sample-rate R]
 *                  [--sample-salt S] [--sample-interval-ms MS]
 *                  [--full-pass-every N]
 *
 * It waits on the Unix socket PATH for libmemcanal-uffd.so (preloaded
 * into QEMU), or a relay of its handoff, to hand over the uffd and the
 * memfds of guest RAM (every memory backend), takes charge of them with
 * pager_init, and answers commands, one a line, one JSON line each (with
 * "event", the command's name), on stdin/stdout or, with --control, on
 * that Unix socket (one client at a time; the next is accepted once it
 * leaves; stdin is not read):
 *
 *   hello                 attached yet?  The guest's regions if so
 *   store SPEC [TOKEN]    add a store (file:PATH, tls:HOST:PORT and its
 *                         lease token, tcp:HOST:PORT: --insecure
 *                         memory servers, for tests); a tls: store it
 *                         has, with a newer lease's token: that token
 *                         from its next connection on
 *   swapout START COUNT   swap out pages START..START+COUNT-1 (indexes in
 *                         the regions concatenated; pages not resident
 *                         are skipped)
 *   swapoutv START COUNT [START COUNT]...
 *                         the same for every run given, in one swap-out
 *                         (batches span runs) and one answer
 *   swapto [SPEC]...      later swap-outs write to these stores only
 *                         (none: every store, the default)
 *   swapin START COUNT    bring the OUT pages of that range back in
 *                         without a fault (prefetch)
 *   faults                the pages faulted in from OUT, and those whose
 *                         swap-out a write cancelled, since the last
 *                         `faults` (a bounded log: `overflow` were lost)
 *   samples               the sampled intervals completed since the last
 *                         `samples`: pages touched and written in each,
 *                         and the sample (rate, salt) each had
 *   resample RATE SALT    zap the hashed sample of RATE and SALT from the
 *                         next interval on (the agent's adaptive rate):
 *                         no restart, the interval under way kept
 *   stats                 the counters
 *   quit                  stop and exit (pages still out stay out: QEMU's
 *                         accesses to them hang until a pager takes over)
 *
 * and two for tests: `tick` ends the interval under way now (with
 * --sample-interval-ms 0 intervals end only so), `sampleset` prints the
 * sample.  With --sample-rate R (0 < R <= 1) the pager has a hashed
 * sample of the pages zapped by the shim every MS (default 10000), every
 * page every Nth interval (--full-pass-every), and records every fault
 * (pager.h, sampler.c).
 *
 * With --state PATH the pages' states live in PATH, and a pager started
 * with the same --state and stores after one died takes over: the shim
 * offers it the uffd again on PATH's socket, or else it duplicates the
 * uffd and memfds out of QEMU with pidfd_getfd (root).  --pool-mb N
 * keeps up to N MiB of swapped-out pages in memory, served before any
 * store; with --pool PATH that memory is the file PATH (in a directory
 * of root's alone, such as /run/memcanal), shared by every pager given
 * the same PATH, pages keyed by --owner, which must then differ per
 * guest.
 *
 * --key-file PATH: the VM's 32-byte key (root's, 0600, not a link):
 * every page leaves the pager sealed with AES-256-GCM (crypt.h), bound
 * to --owner, the page and its version.  Without it pages go out in
 * plaintext, which the pager says on stderr (tests of old behaviour).
 * tls: stores check their server against --tls-ca and present the lease
 * token given after them: --store-token-file names a file of root's
 * alone (0600, not a link, as --key-file) holding it in base64, so that
 * it is not on the command line for any local user to read; or the
 * `store` command's.  A memory server that cannot be reached at start
 * (down, not answering) does not stop the pager: the store backs off and
 * is tried again later, the other copies serving meanwhile; one that
 * refuses it (TLS, the token) does.
 *
 * "listening", "attached" and "exit" events go to stdout.  The pager
 * runs until QEMU exits (it must outlive the guest) or `quit`.  Stores
 * are tried in the order given; a page goes out once `copies` (default:
 * all) of them hold it.
 */
#define _GNU_SOURCE
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

#include <openssl/crypto.h>

#include "daemon.h"

/* How long a pager taking over waits for the shim to hand it the uffd
 * again (it offers it every 200 ms) before taking it out of QEMU. */
#define RESEND_WAIT_MS 2000
#define DEFAULT_SALT 0x6d656d63616e616cULL   /* mrc.DEFAULT_SALT */

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

/* START COUNT clipped to the guest's pages. */
static void clip(struct pager *p, uint64_t *start, uint64_t *count)
{
	uint64_t npages = pager_npages(p);

	if (*start > npages)
		*start = npages;
	if (*count > npages - *start)
		*count = npages - *start;
}

/*
 * Swap out the runs of `args` ("START COUNT" pairs, `swapoutv`'s; one
 * pair for `swapout`) in one pager_swap_out: its batches span runs, so
 * many short runs cost what one long one does, and one answer (with the
 * stats, which are not free) for all of them.
 */
static void swapout(FILE *f, struct daemon *d, const char *event,
		    const char *args)
{
	uint64_t *pages = NULL, asked = 0, runs = 0, start, count;
	size_t cap = 0;
	char *end;
	double t0;
	long dropped;

	for (;;) {
		start = strtoull(args, &end, 10);
		if (end == args)
			break;
		count = strtoull(end, (char **)&args, 10);
		if ((const char *)end == args)
			break;
		clip(d->p, &start, &count);
		if (asked + count > cap) {
			cap = (asked + count) * 2;
			pages = realloc(pages, cap * sizeof(*pages));
			if (!pages)
				die("realloc");
		}
		for (uint64_t n = 0; n < count; n++)
			pages[asked++] = start + n;
		runs++;
	}
	if (!runs) {
		free(pages);
		print_error(f, "bad command");
		return;
	}
	t0 = now_s();
	dropped = pager_swap_out(d->p, pages ? pages : &start, asked);
	t0 = now_s() - t0;
	free(pages);
	if (dropped < 0 && errno == ENODEV) {
		print_error(f, "swapout: fewer stores than copies");
		return;
	}
	fprintf(f, "{\"event\": \"%s\", \"runs\": %" PRIu64 ", \"asked\": %"
		PRIu64 ", \"dropped\": %ld, \"seconds\": %.3f, \"mb_per_s\": "
		"%.1f", event, runs, asked, dropped, t0,
		dropped > 0 ? dropped * PAGER_PAGE / 1e6 / t0 : 0.0);
	print_stats(f, d);
}

static void faults(FILE *f, struct pager *p)
{
	static uint64_t pages[PAGER_EVENT_LOG];
	uint64_t lost, more;
	size_t n = pager_take_events(p, 0, pages, PAGER_EVENT_LOG, &lost);

	fprintf(f, "{\"event\": \"faults\"");
	print_u64s(f, "faults", pages, n);
	n = pager_take_events(p, 1, pages, PAGER_EVENT_LOG, &more);
	print_u64s(f, "cancelled", pages, n);
	fprintf(f, ", \"overflow\": %" PRIu64 "}\n", lost + more);
	fflush(f);
}

static void add_store(FILE *f, struct daemon *d, const char *spec,
		      const char *token)
{
	struct pager_store *s;
	char why[200], line[256];
	int had = find_store(d, spec);

	if (had >= 0 && token) {   /* a newer lease of a store it has */
		s = d->stores[had];
		if (renew_store(s, spec, token, d->owner, why, sizeof(why)))
			goto refused;
		if (d->p)
			pager_store_renewed(d->p, s);
	}
	if (had >= 0) {
		print_store(f, d, "store", !!token);
		return;
	}
	if (d->nstores == PAGER_MAX_STORES) {
		print_error(f, "store: too many stores");
		return;
	}
	s = open_store(spec, token, d->owner, d->tls_ca, why, sizeof(why));
	if (!s)
		goto refused;
	if (keep_store(d, spec, s, why)) {
		s->destroy(s);
		print_error(f, "store: out of memory");
		return;
	}
	if (d->p && pager_add_store(d->p, s)) {
		free(d->specs[--d->nstores]);
		s->destroy(s);
		print_error(f, "store: refused");
		return;
	}
	print_store(f, d, "store", 0);
	return;
refused:
	snprintf(line, sizeof(line), "store: %s", why);
	print_error(f, line);
}

/* `swapto [SPEC]...`: the stores later swap-outs write to, by their
 * specs (none: every store). */
static void swap_to(FILE *f, struct daemon *d, char *specs)
{
	unsigned stores = 0;
	char line[LINE_MAX_LEN + 32];

	for (char *spec = strtok(specs, " "); spec; spec = strtok(NULL, " ")) {
		int i = find_store(d, spec);

		if (i < 0) {
			snprintf(line, sizeof(line), "swapto: no store %s",
				 spec);
			print_error(f, line);
			return;
		}
		stores |= 1u << i;
	}
	if (pager_swap_to(d->p, stores)) {
		print_error(f, "swapto: refused");
		return;
	}
	d->swap_to = stores;
	print_store(f, d, "swapto", 0);
}

static void tick(FILE *f, struct daemon *d)
{
	struct pager_sampling_stats ss;

	if (!d->p || pager_sample_tick(d->p) || !pager_sampling_stats(d->p, &ss)) {
		print_error(f, "tick: not sampling");
		return;
	}
	fprintf(f, "{\"event\": \"tick\", \"current\": %" PRIu64
		", \"zapped\": %" PRIu64 ", \"zap_ns\": %" PRIu64 "}\n",
		ss.current, ss.zapped, ss.zap_ns);
	fflush(f);
}

static void sampleset(FILE *f, struct daemon *d)
{
	uint64_t *runs = NULL;
	size_t n = d->p ? pager_sample_runs(d->p, &runs) : 0;

	fprintf(f, "{\"event\": \"sampleset\", \"pages\": %" PRIu64,
		d->p ? pager_npages(d->p) : 0);
	print_u64s(f, "runs", runs, 2 * n);
	fprintf(f, "}\n");
	fflush(f);
	free(runs);
}

/* `resample R S`: the next interval's sample. */
static void resample(FILE *f, struct daemon *d, double rate, uint64_t salt)
{
	if (!d->p || pager_resample(d->p, rate, salt)) {
		print_error(f, errno == EINVAL ? "resample: bad rate" :
			    "resample: not sampling");
		return;
	}
	fprintf(f, "{\"event\": \"resample\", \"rate\": %.10g, \"salt\": %"
		PRIu64 "}\n", rate, salt);
	fflush(f);
}

/* One command line, answered on f. */
static void command(struct daemon *d, char *line, FILE *f)
{
	uint64_t start, count, salt;
	double rate;
	char spec[LINE_MAX_LEN], token[LINE_MAX_LEN];
	int n;

	if (!strcmp(line, "hello") && !d->p) {
		fprintf(f, "{\"event\": \"hello\", \"attached\": false}\n");
		fflush(f);
	} else if (!strcmp(line, "hello")) {
		print_attached(f, d, "hello");
	} else if (!strncmp(line, "store ", 6) &&
		   (n = sscanf(line + 6, "%4095s %4095s", spec, token)) >= 1) {
		add_store(f, d, spec, n == 2 ? token : NULL);
	} else if (!strcmp(line, "quit")) {
		d->quit = 1;
	} else if (!strcmp(line, "samples")) {
		print_samples(f, d);
	} else if (!d->p) {
		print_error(f, "not attached");
	} else if (sscanf(line, "swapout %" SCNu64 " %" SCNu64, &start,
			  &count) == 2) {
		swapout(f, d, "swapout", line + 7);
	} else if (!strncmp(line, "swapoutv ", 9)) {
		swapout(f, d, "swapoutv", line + 9);
	} else if (sscanf(line, "swapin %" SCNu64 " %" SCNu64, &start,
			  &count) == 2) {
		clip(d->p, &start, &count);
		fprintf(f, "{\"event\": \"swapin\", \"fetched\": %ld}\n",
			pager_swap_in(d->p, start, count));
		fflush(f);
	} else if (!strcmp(line, "swapto") || !strncmp(line, "swapto ", 7)) {
		swap_to(f, d, line + 6);
	} else if (!strcmp(line, "faults")) {
		faults(f, d->p);
	} else if (!strcmp(line, "stats")) {
		fprintf(f, "{\"event\": \"stats\"");
		print_stats(f, d);
	} else if (!strcmp(line, "tick")) {
		tick(f, d);
	} else if (!strcmp(line, "sampleset")) {
		sampleset(f, d);
	} else if (sscanf(line, "resample %lf %" SCNu64, &rate, &salt) == 2) {
		resample(f, d, rate, salt);
	} else {
		print_error(f, "bad command");
	}
}

/*
 * Read what the client sent and run its complete lines.  0, or -1 at
 * its end of input (a last line without newline is run first).
 */
static int serve_client(struct daemon *d)
{
	struct client *c = &d->client;
	ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	char *nl;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n > 0)
		c->len += n;
	else if (c->len)
		c->buf[c->len++] = '\n';   /* never full: see below */
	while (!d->quit && (nl = memchr(c->buf, '\n', c->len))) {
		size_t used = nl - c->buf + 1;

		*nl = 0;
		if (nl > c->buf && nl[-1] == '\r')
			nl[-1] = 0;
		if (*c->buf)
			command(d, c->buf, c->out);
		memmove(c->buf, c->buf + used, c->len - used);
		c->len -= used;
	}
	if (c->len == sizeof(c->buf)) {     /* no newline in a whole buffer */
		c->len = 0;
		print_error(c->out, "line too long");
	}
	return n <= 0 || ferror(c->out) ? -1 : 0;
}

static void drop_client(struct daemon *d)
{
	if (d->control >= 0) {
		fclose(d->client.out);
		close(d->client.fd);
	}
	d->client.fd = -1;
	d->client.len = 0;
}

static void accept_client(struct daemon *d)
{
	int fd = accept4(d->control, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	d->client.out = fdopen(dup(fd), "w");
	if (!d->client.out) {
		close(fd);
		return;
	}
	d->client.fd = fd;
}

static int listen_control(const char *path)
{
	mode_t old = umask(0177);   /* mode 0600: the socket commands paging */
	int s = guest_listen(path);

	umask(old);
	if (s < 0)
		die(path);
	return s;
}

/* Take charge of the guest d->g holds. */
static void attach(struct daemon *d, int handed_over)
{
	struct pager_region r[MEMCANAL_MAX_REGIONS];
	struct guest *g = &d->g;

	/* The fault thread polls: a blocking uffd polls as POLLERR only. */
	if (fcntl(g->uffd, F_SETFL, fcntl(g->uffd, F_GETFL) | O_NONBLOCK))
		die("uffd O_NONBLOCK");
	for (uint64_t i = 0; i < g->h.nregions; i++)
		r[i] = (struct pager_region){ g->h.region[i].base,
			g->h.region[i].len, (off_t)g->h.region[i].offset,
			g->memfd[i] };
	d->opts.pid = g->pid;
	d->p = pager_init(g->uffd, r, (int)g->h.nregions, d->stores,
			  d->nstores, d->copies, &d->opts);
	/* The pager derived what it seals with: the VM's key is not kept. */
	OPENSSL_cleanse(d->key, sizeof(d->key));
	d->opts.key = NULL;
	if (!d->p)
		die("pager_init");
	d->handed_over = handed_over;
	if (guest_answer(g))
		fprintf(stderr, "memcanal-pager: QEMU's connection is gone\n");
	/* Sampling zaps through QEMU's shim: a pager that took the uffd
	 * out of QEMU itself has no connection to it. */
	if (d->sampling.rate > 0 && (g->shim < 0 ||
	    pager_start_sampling(d->p, &d->sampling, guest_zap, g)))
		fprintf(stderr, "memcanal-pager: no sampling: %s\n",
			g->shim < 0 ? "no connection to QEMU's shim" :
			!pager_has_minor(d->p) ? "no MINOR faults on shmem" :
			strerror(errno));
	d->pidfd = syscall(SYS_pidfd_open, g->pid, 0);
	print_attached(stdout, d, "attached");
}

/*
 * A pager taking over (PATH's QEMU still runs): the shim hands it the
 * uffd again within RESEND_WAIT_MS, else it is taken out of QEMU.
 */
static void take_over(struct daemon *d, int s)
{
	struct pager_registration reg;
	double deadline = now_s() + RESEND_WAIT_MS / 1000.0;

	if (!d->opts.state_path ||
	    pager_state_registration(d->opts.state_path, &reg) ||
	    kill((pid_t)reg.pid, 0))
		return;
	while (now_s() < deadline) {
		if (guest_accept(s, (int)((deadline - now_s()) * 1000) + 1,
				 &d->g) == 1) {
			attach(d, 1);
			return;
		}
	}
	if (!guest_recover(d->opts.state_path, &d->g))
		attach(d, 0);
}

/* Serve until QEMU exits or `quit`. */
static void serve(struct daemon *d, const char *socket)
{
	int s = guest_listen(socket);

	if (s < 0)
		die(socket);
	printf("{\"event\": \"listening\", \"socket\": \"%s\"}\n", socket);
	fflush(stdout);
	take_over(d, s);
	while (!d->quit) {
		struct pollfd fds[3];
		int n = 0, wait_guest = !d->p, wait_client;

		if (!wait_guest && s >= 0) {  /* a live pager unlinks it */
			close(s);
			unlink(socket);
			s = -1;
		}
		wait_client = d->client.fd >= 0 || d->control >= 0;
		if (wait_guest)
			fds[n++] = (struct pollfd){ .fd = s, .events = POLLIN };
		if (d->client.fd >= 0)
			fds[n++] = (struct pollfd){ .fd = d->client.fd,
						    .events = POLLIN };
		else if (d->control >= 0)
			fds[n++] = (struct pollfd){ .fd = d->control,
						    .events = POLLIN };
		if (d->p && d->pidfd >= 0)
			fds[n++] = (struct pollfd){ .fd = d->pidfd,
						    .events = POLLIN };
		else if (d->p && !wait_client)
			return;           /* no QEMU to outlive */
		if (poll(fds, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (int i = 0; i < n && !d->quit; i++) {
			if (!fds[i].revents)
				continue;
			if (fds[i].fd == d->pidfd)
				return;          /* QEMU exited */
			if (fds[i].fd == s && guest_accept(s, 0, &d->g) == 1)
				attach(d, 1);
			else if (fds[i].fd == d->control)
				accept_client(d);
			else if (fds[i].fd == d->client.fd && serve_client(d))
				drop_client(d);
		}
	}
	if (s >= 0) {            /* quit before any handoff */
		close(s);
		unlink(socket);
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: memcanal-pager --socket PATH [--store "
		"file:PATH|tls:HOST:PORT|tcp:HOST:PORT [--store-token-file F]]... "
		"[--copies N] [--owner N] [--key-file PATH] [--tls-ca PATH] "
		"[--state PATH] [--pool-mb N] [--pool PATH] [--control PATH] "
		"[--sample-rate R] [--sample-salt S] [--sample-interval-ms MS] "
		"[--full-pass-every N]\n");
	return 2;
}

/* The key, the pool and the stores the command line names, each store
 * with its token file's token; exits if any is refused (a memory server
 * it cannot reach now is not: see keep_store). */
static void open_all(struct daemon *d, const char *key_file,
		     const char *pool_path, uint64_t pool_mb,
		     const char *const *specs, const char *const *token_files,
		     int nspecs)
{
	char why[200], token[TOKEN_BASE64 + 1];

	if (key_file && pager_read_key(key_file, d->key))
		exit(1);
	if (key_file)
		d->opts.key = d->key;
	else
		fprintf(stderr, "memcanal-pager: no --key-file: pages leave "
			"this pager in plaintext\n");
	if (pool_mb || pool_path) {
		d->opts.pool = pager_pool_open(pool_path,
					       (pool_mb << 20) / PAGER_PAGE);
		if (!d->opts.pool)
			exit(1);
	}
	for (int i = 0; i < nspecs; i++) {
		struct pager_store *s;

		if (token_files[i] && read_token_file(token_files[i], token))
			exit(1);
		s = open_store(specs[i], token_files[i] ? token : NULL,
			       d->owner, d->tls_ca, why, sizeof(why));
		OPENSSL_cleanse(token, sizeof(token));
		if (!s) {
			fprintf(stderr, "memcanal-pager: %s: %s\n", specs[i],
				why);
			exit(1);
		}
		if (keep_store(d, specs[i], s, why))
			die("malloc");
	}
}

int main(int argc, char **argv)
{
	struct daemon d = { .pidfd = -1, .control = -1, .owner = 1,
		.client = { .fd = 0 },
		.sampling = { .salt = DEFAULT_SALT, .interval_ms = 10000 } };
	const char *path = NULL, *control = NULL, *key_file = NULL;
	const char *specs[PAGER_MAX_STORES];
	const char *token_files[PAGER_MAX_STORES] = { 0 };
	const char *pool_path = NULL;
	int nspecs = 0;
	uint64_t pool_mb = 0;

	/* A peer that went away (QEMU, a store, a client) is an error to
	 * handle, not a signal that kills the pager and hangs its guest. */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i < argc; i += 2) {
		const char *arg = argv[i], *val = argv[i + 1];

		if (!val)
			return usage();
		if (!strcmp(arg, "--socket"))
			path = val;
		else if (!strcmp(arg, "--store") && nspecs < PAGER_MAX_STORES)
			specs[nspecs++] = val;
		else if (!strcmp(arg, "--store-token-file") && nspecs &&
			 !token_files[nspecs - 1])
			token_files[nspecs - 1] = val;  /* the store before it */
		else if (!strcmp(arg, "--copies"))
			d.copies = atoi(val);
		else if (!strcmp(arg, "--owner"))
			d.owner = strtoull(val, NULL, 0);
		else if (!strcmp(arg, "--key-file"))
			key_file = val;
		else if (!strcmp(arg, "--tls-ca"))
			d.tls_ca = val;
		else if (!strcmp(arg, "--state"))
			d.opts.state_path = val;
		else if (!strcmp(arg, "--pool-mb"))
			pool_mb = strtoull(val, NULL, 0);
		else if (!strcmp(arg, "--pool"))
			pool_path = val;
		else if (!strcmp(arg, "--control"))
			control = val;
		else if (!strcmp(arg, "--sample-rate"))
			d.sampling.rate = strtod(val, NULL);
		else if (!strcmp(arg, "--sample-salt"))
			d.sampling.salt = strtoull(val, NULL, 0);
		else if (!strcmp(arg, "--sample-interval-ms"))
			d.sampling.interval_ms = strtoul(val, NULL, 0);
		else if (!strcmp(arg, "--full-pass-every"))
			d.sampling.full_pass_every = strtoul(val, NULL, 0);
		else
			return usage();
	}
	if (!path || d.copies < 0 || d.copies > PAGER_MAX_STORES ||
	    !(d.sampling.rate >= 0 && d.sampling.rate <= 1))
		return usage();
	d.opts.owner = d.owner;
	open_all(&d, key_file, pool_path, pool_mb, specs, token_files, nspecs);
	d.client.out = stdout;
	if (control) {
		d.control = listen_control(control);
		d.client.fd = -1;
	}
	serve(&d, path);
	printf("{\"event\": \"exit\"");
	if (d.p) {
		print_stats(stdout, &d);
		pager_fini(d.p);
	} else {
		printf("}\n");
	}
	if (control)
		unlink(control);
	for (int i = 0; i < d.nstores; i++) {
		d.stores[i]->destroy(d.stores[i]);
		free(d.specs[i]);
	}
	if (d.opts.pool)
		pager_pool_close(d.opts.pool);
	return 0;
}
