/*
 * The shared cache pool: a ring of page slots in a shared mapping, the
 * oldest overwritten, shared by every pager that maps the same file.
 *
 * Layout: a header page (magic, version, capacity, next slot, a
 * process-shared robust mutex), then a key per slot (owner, page), then
 * the slots' data.  Every access to keys and data holds the mutex.  A
 * put clears the slot's key before copying the data in and sets it
 * after, so a holder killed mid-copy leaves an empty slot, never a key
 * over half a page: the next locker gets EOWNERDEAD and only marks the
 * mutex consistent.
 *
 * Whoever can write the file reads and forges what pagers put there and
 * holds every pager's lock, so it is root's alone: created O_EXCL and
 * O_NOFOLLOW, mode 0600, in a directory root owns and no one else may
 * write (no one can plant a file or a link there); an existing file is
 * used only if it is a regular file of this euid, mode 0600.
 */
#define _GNU_SOURCE
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define POOL_MAGIC 0x6c6f6f70706d636dULL   /* "mcmppool" */
#define POOL_VERSION 1
#define NO_PAGE UINT64_MAX

struct pool_header {
	uint64_t magic, version, capacity, next;
	uint64_t recovered;   /* EOWNERDEAD: a holder died holding it */
	pthread_mutex_t lock;
};

struct pool_key {
	uint64_t owner, page;
};

struct pager_pool {
	struct pool_header *h;
	struct pool_key *key;
	char *data;
	size_t len;
};

static size_t keys_len(uint64_t capacity)
{
	size_t n = capacity * sizeof(struct pool_key);

	return (n + PAGER_PAGE - 1) & ~(PAGER_PAGE - 1);
}

static size_t pool_len(uint64_t capacity)
{
	return PAGER_PAGE + keys_len(capacity) + capacity * PAGER_PAGE;
}

static int init_header(struct pool_header *h, uint64_t capacity)
{
	pthread_mutexattr_t a;
	struct pool_key *key = (void *)((char *)h + PAGER_PAGE);

	if (pthread_mutexattr_init(&a) ||
	    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
	    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) ||
	    pthread_mutex_init(&h->lock, &a))
		return -1;
	pthread_mutexattr_destroy(&a);
	for (uint64_t s = 0; s < capacity; s++)
		key[s].page = NO_PAGE;
	h->capacity = capacity;
	h->version = POOL_VERSION;
	h->magic = POOL_MAGIC;   /* last: the pool is usable */
	return 0;
}

static int header_ok(const struct pool_header *h, size_t len)
{
	return len >= PAGER_PAGE && h->magic == POOL_MAGIC &&
	       h->version == POOL_VERSION && pool_len(h->capacity) == len;
}

#define REFUSED -2   /* open_pool_file: said why on stderr */

/* Refuse a pool: why, on stderr; REFUSED, with errno EPERM. */
static int refuse(const char *path, const char *why, unsigned a, unsigned b)
{
	fprintf(stderr, "pager: pool %s refused: ", path);
	fprintf(stderr, why, a, b);
	fprintf(stderr, "\n");
	errno = EPERM;
	return REFUSED;
}

/*
 * The directory path is in, opened without following a final symbolic
 * link, if root (or this euid) owns it and no one else may write it;
 * else REFUSED.
 */
static int open_directory(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;
	int fd, theirs;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s",
			 slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return refuse(path, errno == ELOOP || errno == ENOTDIR ?
			      "its directory is a symbolic link" :
			      "its directory cannot be opened", 0, 0);
	}
	theirs = st.st_uid && st.st_uid != geteuid();
	if (theirs || st.st_mode & (S_IWGRP | S_IWOTH)) {
		close(fd);
		return refuse(path, theirs ?
			      "its directory is owned by uid %u, not root" :
			      "its directory is writable by others (mode %04o)",
			      theirs ? (unsigned)st.st_uid :
			      (unsigned)(st.st_mode & 07777), 0);
	}
	return fd;
}

/* path's descriptor: a new file (mode 0600), or an existing one that is
 * this euid's regular file, mode 0600; REFUSED, or -1 and errno. */
static int open_pool_file(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	int dir = open_directory(path), fd;
	struct stat st;

	if (dir < 0)
		return dir;
	fd = openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd >= 0 && fchmod(fd, 0600)) {   /* whatever the umask */
		close(fd);
		fd = -1;
	} else if (fd < 0 && errno == EEXIST) {
		fd = openat(dir, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	}
	close(dir);
	if (fd < 0)
		return errno == ELOOP ? refuse(path, "a symbolic link", 0, 0)
				      : -1;
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0600) {
		close(fd);
		if (!S_ISREG(st.st_mode))
			return refuse(path, "not a regular file", 0, 0);
		if (st.st_uid != geteuid())
			return refuse(path, "owned by uid %u, not %u",
				      st.st_uid, geteuid());
		return refuse(path, "mode %04o, not 0600",
			      st.st_mode & 07777, 0);
	}
	return fd;
}

/*
 * The pool's mapping: a new file (size 0) is sized for `pages` and
 * initialised, an existing one checked; flock keeps a second pager from
 * seeing it half initialised.  *len gets the mapping's length.
 */
static struct pool_header *map_file(const char *path, size_t pages,
				    size_t *len)
{
	struct pool_header *h = MAP_FAILED;
	struct stat st;
	int fd = open_pool_file(path);

	if (fd == REFUSED)
		return NULL;
	if (fd < 0 || flock(fd, LOCK_EX) || fstat(fd, &st))
		goto out;
	if (!st.st_size) {
		if (!pages) {
			errno = ENOENT;   /* a new pool needs a size */
			goto out;
		}
		if (ftruncate(fd, pool_len(pages)))
			goto out;
	}
	*len = st.st_size ? (size_t)st.st_size : pool_len(pages);
	h = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto out;
	if (st.st_size ? !header_ok(h, *len) : init_header(h, pages)) {
		munmap(h, *len);
		h = MAP_FAILED;
		errno = EINVAL;
	}
out:
	if (h == MAP_FAILED)
		fprintf(stderr, "pager: pool %s: %s\n", path,
			errno == EINVAL ? "not a pool of this version and size"
					: strerror(errno));
	if (fd >= 0) {
		/* not with the close: the mapping keeps the file open */
		flock(fd, LOCK_UN);
		close(fd);
	}
	return h == MAP_FAILED ? NULL : h;
}

static struct pool_header *map_anonymous(size_t pages, size_t *len)
{
	struct pool_header *h;

	*len = pool_len(pages);
	h = mmap(NULL, *len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		return NULL;
	if (init_header(h, pages)) {
		munmap(h, *len);
		return NULL;
	}
	return h;
}

struct pager_pool *pager_pool_open(const char *path, size_t pages)
{
	struct pager_pool *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->h = path ? map_file(path, pages, &q->len) :
		      map_anonymous(pages, &q->len);
	if (!q->h) {
		free(q);
		return NULL;
	}
	q->key = (void *)((char *)q->h + PAGER_PAGE);
	q->data = (char *)q->key + keys_len(q->h->capacity);
	return q;
}

size_t pager_pool_capacity(const struct pager_pool *q)
{
	return q->h->capacity;
}

static void lock(struct pager_pool *q)
{
	if (pthread_mutex_lock(&q->h->lock) == EOWNERDEAD) {
		q->h->recovered++;
		pthread_mutex_consistent(&q->h->lock);
	}
}

static void unlock(struct pager_pool *q)
{
	pthread_mutex_unlock(&q->h->lock);
}

uint32_t pager_pool_put(struct pager_pool *q, uint64_t owner, uint64_t page,
			const void *data)
{
	uint32_t slot;

	lock(q);
	slot = q->h->next++ % q->h->capacity;
	q->key[slot].page = NO_PAGE;
	memcpy(q->data + (size_t)slot * PAGER_PAGE, data, PAGER_PAGE);
	q->key[slot].owner = owner;
	q->key[slot].page = page;
	unlock(q);
	return slot;
}

int pager_pool_take(struct pager_pool *q, uint32_t slot, uint64_t owner,
		    uint64_t page, void *buf)
{
	int found;

	if (slot >= q->h->capacity)
		return 0;
	lock(q);
	found = q->key[slot].owner == owner && q->key[slot].page == page;
	if (found) {
		memcpy(buf, q->data + (size_t)slot * PAGER_PAGE, PAGER_PAGE);
		q->key[slot].page = NO_PAGE;
	}
	unlock(q);
	return found;
}

void pager_pool_find(struct pager_pool *q, uint64_t owner,
		     uint32_t *slot_of, uint64_t npages)
{
	lock(q);
	for (uint64_t s = 0; s < q->h->capacity; s++)
		if (q->key[s].owner == owner && q->key[s].page < npages)
			slot_of[q->key[s].page] = s;
	unlock(q);
}

uint64_t pager_pool_count(struct pager_pool *q, uint64_t owner)
{
	uint64_t n = 0;

	lock(q);
	for (uint64_t s = 0; s < q->h->capacity; s++)
		n += q->key[s].owner == owner && q->key[s].page != NO_PAGE;
	unlock(q);
	return n;
}

uint64_t pager_pool_recovered(struct pager_pool *q)
{
	return q->h->recovered;
}

void pager_pool_close(struct pager_pool *q)
{
	munmap(q->h, q->len);
	free(q);
}
