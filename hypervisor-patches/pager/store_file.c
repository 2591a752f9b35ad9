/*
 * A pager store in a local file: page i at offset i * PAGER_PAGE.
 * Dropped copies are punched out of the file.  It holds what the pager
 * gives it, sealed pages (crypt.h); it is created 0600 and never opened
 * through a symbolic link.
 */
#define _GNU_SOURCE
#include "pager.h"
#include "io_all.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct file_store {
	struct pager_store s;
	int fd;
};

static ssize_t pwrite_step(int fd, void *buf, size_t len, off_t at)
{
	return pwrite(fd, buf, len, at);
}

static int file_put(struct pager_store *s, uint64_t page, const void *buf,
		    size_t npages)
{
	struct file_store *f = (struct file_store *)s;

	return io_all(pwrite_step, f->fd, (void *)buf, npages * PAGER_PAGE,
		      page * PAGER_PAGE);
}

static int file_get(struct pager_store *s, uint64_t page, void *buf)
{
	struct file_store *f = (struct file_store *)s;
	ssize_t n = pread(f->fd, buf, PAGER_PAGE, page * PAGER_PAGE);

	if (n != (ssize_t)PAGER_PAGE) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	/* A hole (punched, or past a truncation the file grew back over)
	 * is a copy this store lost, not one that came back forged: the
	 * pager tells the two apart (fault.c).  Only an all-zero read is
	 * asked about: a sealed copy never is one. */
	if (!((const char *)buf)[0] &&
	    !memcmp(buf, (const char *)buf + 1, PAGER_PAGE - 1) &&
	    lseek(f->fd, (off_t)(page * PAGER_PAGE), SEEK_DATA) !=
	    (off_t)(page * PAGER_PAGE)) {
		errno = ENOENT;   /* that copy is gone, not the store */
		return -1;
	}
	return 0;
}

static int file_del(struct pager_store *s, uint64_t page, size_t npages)
{
	struct file_store *f = (struct file_store *)s;

	return fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			 page * PAGER_PAGE, npages * PAGER_PAGE);
}

static void file_destroy(struct pager_store *s)
{
	struct file_store *f = (struct file_store *)s;

	close(f->fd);
	free((char *)f->s.name);
	free(f);
}

struct pager_store *pager_file_store(const char *path)
{
	struct file_store *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		free(f);
		return NULL;
	}
	f->s = (struct pager_store){ .name = strdup(path), .kind = "file",
		.put = file_put,
		.get = file_get, .del = file_del, .destroy = file_destroy };
	return &f->s;
}
