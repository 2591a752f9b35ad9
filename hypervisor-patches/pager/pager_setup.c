/*
 * pager_setup: taking charge of a guest's registration and letting go.
 *
 * A fresh uffd gets UFFDIO_API (with MINOR faults if the kernel has
 * them) and every region UFFDIO_REGISTER; the page states start all IN.
 * A uffd set up already belonged to a pager that died: its state file
 * says which features it has; the regions are registered again (the
 * kernel keeps what the same uffd holds), what the dead pager left half
 * done is reconciled, and every region is woken, so the threads whose
 * faults it read and never answered (MISSING, WP or MINOR) fault again
 * and are answered by this one.
 */
#define _GNU_SOURCE
#include "pager_internal.h"
#include "sampler.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define FEATURES (UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_WP_HUGETLBFS_SHMEM)

static void free_pager(struct pager *p)
{
	states_close(&p->ps);
	page_crypt_free(p->crypt);
	free(p->pool.slot_of);
	for (int s = 0; s < LATENCIES; s++)
		free(p->samples[s]);
	free(p->faults);
	free(p->cancels);
	free(p->fault_buf);
	free(p->swap_buf);
	free(p->ahead_buf);
	if (p->stopfd >= 0)
		close(p->stopfd);
	free(p);
}

/*
 * The registration's sealing: a fresh one gets a new salt and records
 * its key's id, before anything is sealed; an adopted one must be sealed
 * the same way, with the same key (pages sealed otherwise would all be
 * refused, as forged).
 */
static int set_up_sealing(struct pager *p, const struct pager_opts *o,
			  int fresh)
{
	struct state_seal *seal = p->ps.seal;
	const uint8_t *key = o ? o->key : NULL;
	uint8_t id[PAGER_KEY_ID_SIZE];

	if (key && p->npages > (1ULL << 32)) {
		fprintf(stderr, "pager: more than 2^32 pages cannot be sealed\n");
		errno = EINVAL;
		return -1;
	}
	if (fresh && key && page_crypt_salt(seal->salt))
		return -1;
	if (!fresh && seal->sealed != !!key) {
		fprintf(stderr, "pager: the state file's pages are %s, and "
			"this pager has %s key\n", seal->sealed ? "sealed" :
			"plaintext", key ? "a" : "no");
		errno = EKEYREJECTED;
		return -1;
	}
	p->crypt = page_crypt_new(key, seal->salt, o ? o->owner : 0, id);
	if (!p->crypt)
		return -1;
	if (fresh) {
		memcpy(seal->key_id, id, sizeof(id));
		seal->sealed = !!key;
	} else if (memcmp(seal->key_id, id, sizeof(id))) {
		fprintf(stderr, "pager: the state file's pages were sealed "
			"with another key\n");
		errno = EKEYREJECTED;
		return -1;
	}
	p->st.sealed = !!key;
	return 0;
}

static int alloc_pager(struct pager *p, const struct pager_opts *o,
		       struct pager_registration *reg, int fresh)
{
	struct pool *q = &p->pool;

	if (states_open(&p->ps, o ? o->state_path : NULL, reg, fresh) ||
	    set_up_sealing(p, o, fresh))
		return -1;
	if (o && o->pool) {
		q->owner = o->owner;
		q->shared = o->pool;
		q->slot_of = malloc(p->npages * sizeof(*q->slot_of));
		if (!q->slot_of)
			return -1;
		memset(q->slot_of, 0xff, p->npages * sizeof(*q->slot_of));
		if (!fresh)   /* the dead pager's pages, opened on take */
			pager_pool_find(q->shared, q->owner, q->slot_of,
					p->npages);
	}
	for (int s = 0; s < LATENCIES; s++) {
		p->samples[s] = calloc(MAX_SAMPLES, sizeof(*p->samples[s]));
		if (!p->samples[s])
			return -1;
	}
	p->faults = calloc(1, sizeof(*p->faults));
	p->cancels = calloc(1, sizeof(*p->cancels));
	p->stopfd = eventfd(0, EFD_CLOEXEC);
	if (!p->faults || !p->cancels || p->stopfd < 0 ||
	    posix_memalign((void **)&p->fault_buf, PAGER_PAGE, PAGER_PAGE) ||
	    posix_memalign((void **)&p->swap_buf, PAGER_PAGE,
			   BATCH * PAGER_PAGE) ||
	    posix_memalign((void **)&p->ahead_buf, PAGER_PAGE,
			   READ_AHEAD * PAGER_PAGE))
		return -1;
	p->last_fault = UINT64_MAX - 1;
	return 0;
}

/*
 * Adopting a dead pager's registration: what it left half done is
 * undone.  SWAPPING pages go back IN (their copy may be incomplete);
 * OUT pages still resident (not yet punched, or copied in before the
 * state said IN) are IN; every IN page is un-protected, which wakes
 * writers it held.
 */
static void reconcile(struct pager *p)
{
	struct cursor cursor = { 0 };
	uint64_t run = 0;

	for (uint64_t pg = 0; pg <= p->npages; pg++) {
		if (pg < p->npages && p->ps.state[pg] == PG_OUT &&
		    !pager_resident(p, pg, &cursor)) {
			p->pages_out++;
		} else if (pg < p->npages) {
			if (p->ps.state[pg] != PG_IN)
				p->st.reconciled++;
			p->ps.state[pg] = PG_IN;
			p->ps.have[pg] = 0;
			continue;
		}
		if (run < pg)
			pager_write_protect(p, run, pg - run, 0);
		run = pg + 1;
	}
}

/*
 * UFFDIO_API: the features set, or 0 if the uffd was set up already (by
 * a pager that died: EINVAL whatever is asked), or -1.  A kernel without
 * MINOR faults on shmem (before 5.14) refuses that feature alone.
 */
static int64_t uffd_api(int uffd)
{
	uint64_t want[2] = { FEATURES | UFFD_FEATURE_MINOR_SHMEM, FEATURES };

	for (int i = 0; i < 2; i++) {
		struct uffdio_api api = { .api = UFFD_API,
					  .features = want[i] };

		if (!ioctl(uffd, UFFDIO_API, &api))
			return want[i];
		if (errno != EINVAL) {
			perror("pager: UFFDIO_API");
			return -1;
		}
	}
	return 0;
}

/* UFFDIO_REGISTER every region for the features' faults.  Registering
 * again on the same uffd (adopting) keeps what the kernel holds. */
static int register_regions(struct pager *p)
{
	int minor = !!(p->features & UFFD_FEATURE_MINOR_SHMEM);
	uint64_t need = 1ULL << _UFFDIO_WRITEPROTECT |
			(minor ? 1ULL << _UFFDIO_CONTINUE : 0);

	for (int i = 0; i < p->nregions; i++) {
		struct uffdio_register reg = {
			.range = { .start = p->region[i].base,
				   .len = p->region[i].npages * PAGER_PAGE },
			.mode = UFFDIO_REGISTER_MODE_MISSING |
				UFFDIO_REGISTER_MODE_WP |
				(minor ? UFFDIO_REGISTER_MODE_MINOR : 0),
		};

		if (ioctl(p->uffd, UFFDIO_REGISTER, &reg) < 0) {
			perror("pager: UFFDIO_REGISTER");
			return -1;
		}
		if ((reg.ioctls & need) != need) {
			fprintf(stderr, "pager: no UFFDIO_WRITEPROTECT%s on "
				"this range\n", minor ? " or CONTINUE" : "");
			errno = ENOTSUP;
			return -1;
		}
	}
	return 0;
}

/* The pager's regions and the registration naming them; -1 if the
 * regions are not page-aligned. */
static int set_regions(struct pager *p, const struct pager_region *regions,
		       int n, struct pager_registration *reg)
{
	for (int i = 0; i < n; i++) {
		const struct pager_region *r = &regions[i];
		struct stat st;

		if (r->base % PAGER_PAGE || r->len % PAGER_PAGE || !r->len ||
		    r->offset % PAGER_PAGE || fstat(r->memfd, &st)) {
			errno = EINVAL;
			return -1;
		}
		p->region[i] = (struct region){ r->base, p->npages,
			r->len / PAGER_PAGE, r->offset, r->memfd };
		reg->region[i] = (struct pager_registered){ r->base, r->len,
			r->offset, st.st_ino };
		p->npages += r->len / PAGER_PAGE;
	}
	p->nregions = n;
	reg->nregions = n;
	reg->npages = p->npages;
	return 0;
}

/* Store i is s: its latency source, and backing off if it could not
 * reach its server when opened. */
static void set_store(struct pager *p, int i, struct pager_store *s)
{
	p->stores[i] = s;
	p->source[i] = strcmp(s->kind, "tcp") ? PAGER_SRC_FILE : PAGER_SRC_TCP;
	if (s->down)
		pager_store_down(p, i);
}

struct pager *pager_init(int uffd, const struct pager_region *regions,
			 int nregions, struct pager_store **stores,
			 int nstores, int copies,
			 const struct pager_opts *opts)
{
	struct pager_registration reg = { .pid = opts ? opts->pid : 0 };
	int64_t features = -1;
	struct pager *p;

	if (nregions < 1 || nregions > PAGER_MAX_REGIONS || nstores < 0 ||
	    nstores > PAGER_MAX_STORES || copies < 0 ||
	    copies > PAGER_MAX_STORES) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->stopfd = p->ps.fd = -1;
	p->uffd = uffd;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->swap_lock, NULL);
	if (set_regions(p, regions, nregions, &reg))
		goto fail;
	/* Not set up yet: ours.  Set up: adopted, with the dead pager's
	 * features from its state file. */
	features = uffd_api(uffd);
	if (features < 0)
		goto fail;
	if (!features && (!opts || !opts->state_path)) {
		fprintf(stderr, "pager: the uffd is set up already and no "
			"state file says how\n");
		errno = EINVAL;
		goto fail;
	}
	reg.features = features;
	if (alloc_pager(p, opts, &reg, features > 0))
		goto fail;
	p->features = reg.features;
	p->pid = reg.pid;
	p->nstores = nstores;
	p->copies = copies;
	for (int i = 0; i < nstores; i++)
		set_store(p, i, stores[i]);
	if (register_regions(p))
		goto fail;
	if (!features)
		reconcile(p);
	p->st.adopted = !features;
	if (pthread_create(&p->thread, NULL, pager_fault_thread, p))
		goto fail;
	/* Faults the dead pager read are lost, MINOR ones included: their
	 * threads fault again. */
	if (!features)
		pager_wake(p, 0, p->npages);
	return p;
fail:
	perror("pager: init");
	free_pager(p);
	return NULL;
}

int pager_add_store(struct pager *p, struct pager_store *s)
{
	int rc = -1;

	pthread_mutex_lock(&p->swap_lock);
	pthread_mutex_lock(&p->lock);
	if (p->nstores < PAGER_MAX_STORES) {
		set_store(p, p->nstores++, s);
		/* Faults left waiting for this store fault again. */
		if (p->st.deferred)
			pager_wake(p, 0, p->npages);
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->swap_lock);
	if (rc)
		errno = ENOSPC;
	return rc;
}

uint64_t pager_npages(struct pager *p)
{
	return p->npages;
}

int pager_has_minor(struct pager *p)
{
	return !!(p->features & UFFD_FEATURE_MINOR_SHMEM);
}

static struct sampler *pager_sampler(struct pager *p)
{
	struct sampler *s;

	pthread_mutex_lock(&p->lock);
	s = p->sampler;
	pthread_mutex_unlock(&p->lock);
	return s;
}

int pager_start_sampling(struct pager *p, const struct pager_sampling *cfg,
			 pager_zap_fn zap, void *arg)
{
	struct sampler *s = sampler_new(p->npages, cfg, zap, arg);
	int taken = 0;

	if (!s)
		return -1;
	pthread_mutex_lock(&p->lock);
	if (!pager_has_minor(p) || p->sampler) {
		errno = p->sampler ? EALREADY : ENOTSUP;
	} else {
		p->sampler = s;
		taken = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (!taken) {
		sampler_free(s);
		return -1;
	}
	return sampler_start(s);
}

int pager_sampling_stats(struct pager *p, struct pager_sampling_stats *st)
{
	struct sampler *s = pager_sampler(p);

	if (s)
		sampler_stats(s, st);
	return !!s;
}

int pager_sample_tick(struct pager *p)
{
	struct sampler *s = pager_sampler(p);

	if (!s) {
		errno = ENOTSUP;
		return -1;
	}
	sampler_tick(s);
	return 0;
}

size_t pager_take_intervals(struct pager *p, struct pager_interval **out,
			    uint64_t *overflow)
{
	struct sampler *s = pager_sampler(p);

	*out = NULL;
	*overflow = 0;
	return s ? sampler_take_intervals(s, out, overflow) : 0;
}

size_t pager_sample_runs(struct pager *p, uint64_t **runs)
{
	struct sampler *s = pager_sampler(p);

	*runs = NULL;
	return s ? sampler_runs(s, runs) : 0;
}

int pager_resample(struct pager *p, double rate, uint64_t salt)
{
	struct sampler *s = pager_sampler(p);

	if (!s) {
		errno = ENOTSUP;
		return -1;
	}
	return sampler_resample(s, rate, salt);
}

void pager_get_stats(struct pager *p, struct pager_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
	/* The pool has its own lock: counting its slots under p->lock
	 * would hold up the fault path for the whole scan. */
	if (p->pool.shared) {
		out->pool_pages = pager_pool_count(p->pool.shared,
						   p->pool.owner);
		out->pool_capacity = pager_pool_capacity(p->pool.shared);
		out->pool_recovered = pager_pool_recovered(p->pool.shared);
	}
}

uint64_t pager_pages_out(struct pager *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->pages_out;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void pager_fini(struct pager *p)
{
	struct sampler *s = pager_sampler(p);
	uint64_t one = 1;

	if (s) {
		pthread_mutex_lock(&p->lock);
		p->sampler = NULL;
		pthread_mutex_unlock(&p->lock);
		sampler_free(s);
	}
	if (write(p->stopfd, &one, sizeof(one)) != sizeof(one))
		perror("pager: stop");
	pthread_join(p->thread, NULL);
	free_pager(p);
}
