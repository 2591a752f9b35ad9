/*
 * pager: mark, copy, validate swap-out and fault service on a userfaultfd.
 *
 * Page states: IN (in the memfd), SWAPPING (write-protected, being
 * copied), OUT (copies in the stores, hole punched in the memfd).  The
 * lock is held by the fault thread for a whole fault, and by swap-out
 * for mark (state + write-protect) and validate (state + punch), so the
 * fault thread never sees a state without the page table to match.
 */
#define _GNU_SOURCE
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum { PG_IN = 0, PG_SWAPPING = 1, PG_OUT = 2 };

#define BATCH 512
#define ZERO_BLOCK 16   /* pages, a power of two */
#define MAX_SAMPLES (1 << 20)

struct pager {
	int uffd, memfd, stopfd;
	uint64_t base;
	off_t offset;
	uint64_t npages;
	struct pager_store *stores[PAGER_MAX_STORES];
	int nstores, copies;

	pthread_mutex_t lock;       /* states, sums, have, stats */
	pthread_mutex_t swap_lock;  /* one swap-out at a time */
	uint8_t *state;
	uint8_t *have;              /* bit i: store i holds the copy */
	uint64_t *sum;
	uint64_t pages_out;
	struct pager_stats st;

	uint32_t *samples;          /* fault service times, ns */
	size_t nsamples;

	pthread_t thread;
	char *fault_buf;            /* one page, fault thread only */
	char *swap_buf;             /* BATCH pages, swap-out only */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Cheap 64-bit page checksum: catches a store that lost or zeroed data. */
static uint64_t page_sum(const void *buf)
{
	const uint64_t *w = buf;
	uint64_t h = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < PAGER_PAGE / 8; i++) {
		h ^= w[i] + i;
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	return h;
}

static uint64_t addr_of(struct pager *p, uint64_t pg)
{
	return p->base + pg * PAGER_PAGE;
}

static int write_protect(struct pager *p, uint64_t pg, uint64_t n, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = addr_of(p, pg), .len = n * PAGER_PAGE },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	while (ioctl(p->uffd, UFFDIO_WRITEPROTECT, &wp) < 0) {
		if (errno != EAGAIN) {
			perror("pager: UFFDIO_WRITEPROTECT");
			return -1;
		}
	}
	return 0;
}

static void wake(struct pager *p, uint64_t pg)
{
	struct uffdio_range r = { .start = addr_of(p, pg), .len = PAGER_PAGE };

	if (ioctl(p->uffd, UFFDIO_WAKE, &r) < 0)
		perror("pager: UFFDIO_WAKE");
	p->st.wakes++;
}

static int zero_page(struct pager *p, uint64_t pg, uint64_t mode)
{
	struct uffdio_zeropage z = {
		.range = { .start = addr_of(p, pg), .len = PAGER_PAGE },
		.mode = mode,
	};

	while (ioctl(p->uffd, UFFDIO_ZEROPAGE, &z) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno != EEXIST)
			perror("pager: UFFDIO_ZEROPAGE");
		return -1;
	}
	p->st.zero_fills++;
	return 0;
}

/*
 * A never-populated page: zeros, and zeros for the never-populated IN
 * pages of its aligned ZERO_BLOCK too (either direction), since first
 * touches come in runs; each would otherwise be a fault of its own.
 */
static void zero_fill(struct pager *p, uint64_t pg)
{
	uint64_t first = pg & ~(uint64_t)(ZERO_BLOCK - 1);

	if (zero_page(p, pg, 0) < 0)
		wake(p, pg);   /* EEXIST: filled since the fault */
	for (uint64_t n = first; n < first + ZERO_BLOCK && n < p->npages; n++)
		if (n != pg && p->state[n] == PG_IN)
			zero_page(p, n, UFFDIO_ZEROPAGE_MODE_DONTWAKE);
}

static void copy_in(struct pager *p, uint64_t pg, const void *buf)
{
	struct uffdio_copy c = {
		.dst = addr_of(p, pg), .src = (uint64_t)(uintptr_t)buf,
		.len = PAGER_PAGE,
	};

	while (ioctl(p->uffd, UFFDIO_COPY, &c) < 0) {
		if (errno == EAGAIN)
			continue;
		if (errno == EEXIST)
			wake(p, pg);
		else
			perror("pager: UFFDIO_COPY");
		return;
	}
}

/* Bring an OUT page back from the first store with a good copy. */
static void fetch(struct pager *p, uint64_t pg)
{
	uint64_t t0 = now_ns();
	int from = -1;

	for (int i = 0; i < p->nstores && from < 0; i++) {
		if (!(p->have[pg] & (1u << i)))
			continue;
		if (p->stores[i]->get(p->stores[i], pg, p->fault_buf) < 0)
			p->st.get_failed[i]++;
		else if (page_sum(p->fault_buf) != p->sum[pg])
			p->st.bad_sum[i]++;
		else
			from = i;
	}
	if (from < 0) {
		/* Nothing to give back: zeros make the loss visible. */
		if (p->st.lost < 10)
			fprintf(stderr, "pager: page %llu lost in every "
				"store\n", (unsigned long long)pg);
		memset(p->fault_buf, 0, PAGER_PAGE);
		p->st.lost++;
	} else {
		p->st.served[from]++;
	}
	copy_in(p, pg, p->fault_buf);
	if (p->nsamples < MAX_SAMPLES)
		p->samples[p->nsamples++] = (uint32_t)(now_ns() - t0);
	p->state[pg] = PG_IN;
	p->pages_out--;
	/* Copies are stale from the next write on; free them now, while
	 * the lock keeps swap-out from storing the page again. */
	for (int i = 0; i < p->nstores; i++)
		if ((p->have[pg] & (1u << i)) && p->stores[i]->del)
			p->stores[i]->del(p->stores[i], pg, 1);
	p->have[pg] = 0;
}

static void handle_fault(struct pager *p, const struct uffd_msg *m)
{
	uint64_t addr = m->arg.pagefault.address & ~(PAGER_PAGE - 1);
	uint64_t pg;

	if (addr < p->base || addr >= addr_of(p, p->npages))
		return;
	pg = (addr - p->base) / PAGER_PAGE;
	pthread_mutex_lock(&p->lock);
	if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
		p->st.faults_wp++;
		if (p->state[pg] == PG_OUT) {
			/* Validate won: the page is punched, give it back. */
			p->st.wp_on_out++;
			fetch(p, pg);
		} else {
			if (p->state[pg] == PG_SWAPPING) {
				p->state[pg] = PG_IN;
				p->st.cancelled++;
			}
			write_protect(p, pg, 1, 0);   /* also wakes */
		}
	} else {
		p->st.faults_missing++;
		if (p->state[pg] == PG_OUT)
			fetch(p, pg);
		else
			zero_fill(p, pg);
	}
	pthread_mutex_unlock(&p->lock);
}

static void *fault_thread(void *arg)
{
	struct pager *p = arg;
	struct uffd_msg msgs[64];
	struct pollfd fds[2] = {
		{ .fd = p->uffd, .events = POLLIN },
		{ .fd = p->stopfd, .events = POLLIN },
	};

	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("pager: poll");
			return NULL;
		}
		if (fds[1].revents)
			return NULL;
		if (!(fds[0].revents & POLLIN))
			continue;
		ssize_t n = read(p->uffd, msgs, sizeof(msgs));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			perror("pager: read uffd");
			return NULL;
		}
		for (size_t i = 0; i < n / sizeof(msgs[0]); i++)
			if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
				handle_fault(p, &msgs[i]);
	}
}

struct pager *pager_init(int uffd, uint64_t base, size_t len, int memfd,
			 off_t offset, struct pager_store **stores,
			 int nstores, int copies)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_MISSING_SHMEM |
			    UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
	};
	struct uffdio_register reg = {
		.range = { .start = base, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	struct pager *p;

	if (nstores < 1 || nstores > PAGER_MAX_STORES || copies < 1 ||
	    copies > nstores || len % PAGER_PAGE || base % PAGER_PAGE) {
		errno = EINVAL;
		return NULL;
	}
	if (ioctl(uffd, UFFDIO_API, &api) < 0) {
		perror("pager: UFFDIO_API (MISSING_SHMEM | WP_HUGETLBFS_SHMEM)");
		return NULL;
	}
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
		perror("pager: UFFDIO_REGISTER");
		return NULL;
	}
	if (!(reg.ioctls & (1ULL << _UFFDIO_WRITEPROTECT))) {
		fprintf(stderr, "pager: no UFFDIO_WRITEPROTECT on this range\n");
		errno = ENOTSUP;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->uffd = uffd;
	p->memfd = memfd;
	p->base = base;
	p->offset = offset;
	p->npages = len / PAGER_PAGE;
	memcpy(p->stores, stores, nstores * sizeof(*stores));
	p->nstores = nstores;
	p->copies = copies;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->swap_lock, NULL);
	p->state = calloc(p->npages, 1);
	p->have = calloc(p->npages, 1);
	p->sum = calloc(p->npages, sizeof(*p->sum));
	p->samples = calloc(MAX_SAMPLES, sizeof(*p->samples));
	p->stopfd = eventfd(0, EFD_CLOEXEC);
	if (posix_memalign((void **)&p->fault_buf, PAGER_PAGE, PAGER_PAGE) ||
	    posix_memalign((void **)&p->swap_buf, PAGER_PAGE,
			   BATCH * PAGER_PAGE) ||
	    !p->state || !p->have || !p->sum || !p->samples ||
	    p->stopfd < 0 ||
	    pthread_create(&p->thread, NULL, fault_thread, p)) {
		perror("pager: init");
		exit(1);
	}
	return p;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Resident in the memfd?  cursor caches the data extent last found. */
static int resident(struct pager *p, uint64_t pg, off_t cursor[2])
{
	off_t off = p->offset + pg * PAGER_PAGE;

	if (off >= cursor[0] && off < cursor[1])
		return 1;
	cursor[0] = lseek(p->memfd, off, SEEK_DATA);
	if (cursor[0] < 0) {
		cursor[0] = cursor[1] = 0;
		return 0;
	}
	cursor[1] = lseek(p->memfd, cursor[0], SEEK_HOLE);
	return off >= cursor[0] && off < cursor[1];
}

/* Length of the run of consecutive page numbers starting at list[i]. */
static size_t run_len(const uint64_t *list, size_t i, size_t n)
{
	size_t j = i + 1;

	while (j < n && list[j] == list[j - 1] + 1)
		j++;
	return j - i;
}

static long swap_batch(struct pager *p, uint64_t *pages, size_t n,
		       off_t cursor[2])
{
	uint64_t sums[BATCH];
	size_t m = 0, r;
	unsigned ok = 0;
	int nok = 0;
	long dropped = 0;

	/* 1. mark */
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t pg = pages[i];

		if (pg >= p->npages || p->state[pg] != PG_IN ||
		    (m && pages[m - 1] == pg))
			continue;
		if (!resident(p, pg, cursor)) {
			p->st.not_resident++;
			continue;
		}
		p->state[pg] = PG_SWAPPING;
		pages[m++] = pg;
	}
	for (size_t i = 0; i < m; i += r) {
		r = run_len(pages, i, m);
		if (write_protect(p, pages[i], r, 1) < 0) {
			pthread_mutex_unlock(&p->lock);
			return -1;
		}
	}
	pthread_mutex_unlock(&p->lock);

	/* 2. copy: from the memfd itself, not through the mapping */
	for (size_t i = 0; i < m; i += r) {
		char *buf = p->swap_buf + i * PAGER_PAGE;
		size_t len;
		ssize_t got;

		r = run_len(pages, i, m);
		len = r * PAGER_PAGE;
		got = pread(p->memfd, buf, len,
			    p->offset + pages[i] * PAGER_PAGE);
		if (got != (ssize_t)len) {
			perror("pager: pread memfd");
			return -1;
		}
	}
	for (size_t i = 0; i < m; i++)
		sums[i] = page_sum(p->swap_buf + i * PAGER_PAGE);
	for (int s = 0; s < p->nstores; s++) {
		int good = 1;

		for (size_t i = 0; i < m && good; i += r) {
			r = run_len(pages, i, m);
			if (p->stores[s]->put(p->stores[s], pages[i],
					      p->swap_buf + i * PAGER_PAGE,
					      r) < 0)
				good = 0;
		}
		if (good) {
			ok |= 1u << s;
			nok++;
		} else {
			p->st.put_failed[s]++;
		}
	}

	/* 3. validate and drop */
	pthread_mutex_lock(&p->lock);
	if (nok < p->copies)
		p->st.put_failed_batches++;
	for (size_t i = 0; i < m; i += r) {
		size_t k = i;

		r = run_len(pages, i, m);
		for (size_t j = i; j <= i + r; j++) {
			int out = j < i + r && p->state[pages[j]] == PG_SWAPPING;

			if (out && nok >= p->copies) {
				p->state[pages[j]] = PG_OUT;
				p->sum[pages[j]] = sums[j];
				p->have[pages[j]] = ok;
				continue;
			}
			if (out) {   /* too few copies: keep it in */
				p->state[pages[j]] = PG_IN;
				write_protect(p, pages[j], 1, 0);
			}
			if (j > k && fallocate(p->memfd, FALLOC_FL_PUNCH_HOLE |
					       FALLOC_FL_KEEP_SIZE,
					       p->offset + pages[k] * PAGER_PAGE,
					       (j - k) * PAGER_PAGE) < 0) {
				perror("pager: punch memfd");
				pthread_mutex_unlock(&p->lock);
				return -1;
			}
			dropped += j - k;
			k = j + 1;
		}
	}
	p->pages_out += dropped;
	p->st.swapped_out += dropped;
	pthread_mutex_unlock(&p->lock);
	return dropped;
}

long pager_swap_out(struct pager *p, const uint64_t *pages, size_t n)
{
	uint64_t *sorted = malloc(n * sizeof(*sorted) + 1);
	off_t cursor[2] = { 0, 0 };
	long total = 0;

	if (!sorted)
		return -1;
	memcpy(sorted, pages, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	pthread_mutex_lock(&p->swap_lock);
	for (size_t i = 0; i < n; i += BATCH) {
		long d = swap_batch(p, sorted + i,
				    n - i < BATCH ? n - i : BATCH, cursor);

		if (d < 0) {
			total = -1;
			break;
		}
		total += d;
	}
	pthread_mutex_unlock(&p->swap_lock);
	free(sorted);
	return total;
}

void pager_get_stats(struct pager *p, struct pager_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
}

uint64_t pager_pages_out(struct pager *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->pages_out;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

size_t pager_fault_latency(struct pager *p, double *p50, double *p99)
{
	uint32_t *copy;
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->nsamples;
	copy = malloc(n * sizeof(*copy) + 1);
	if (copy)
		memcpy(copy, p->samples, n * sizeof(*copy));
	pthread_mutex_unlock(&p->lock);
	*p50 = *p99 = 0;
	if (!copy || !n) {
		free(copy);
		return 0;
	}
	qsort(copy, n, sizeof(*copy), cmp_u32);
	*p50 = copy[n / 2] / 1000.0;
	*p99 = copy[n * 99 / 100] / 1000.0;
	free(copy);
	return n;
}

void pager_fini(struct pager *p)
{
	uint64_t one = 1;

	if (write(p->stopfd, &one, sizeof(one)) != sizeof(one))
		perror("pager: stop");
	pthread_join(p->thread, NULL);
	close(p->stopfd);
	free(p->state);
	free(p->have);
	free(p->sum);
	free(p->samples);
	free(p->fault_buf);
	free(p->swap_buf);
	free(p);
}
