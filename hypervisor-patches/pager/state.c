/*
 * The pager's page states, in memory or in a state file.
 *
 * The file (v3): a header (magic, then struct pager_registration:
 * QEMU's pid, the uffd's features, the regions with their memfds'
 * inodes; then struct state_seal: the salt the key is derived with, the
 * key's id, sealed or not), then state[npages], have[npages] (padded to
 * 8 bytes), version[npages] (u64), tag[npages] (16 bytes), mapped
 * shared: a killed pager's stores to it are in the page cache for the
 * next one.  It is flocked, so a second pager on a live one's file is
 * refused.
 */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC 0x3374617473706d63ULL   /* "mcpstat3" */

struct state_header {
	uint64_t magic;
	struct pager_registration reg;
	struct state_seal seal;
};

/* The arrays after the header. */
static size_t arrays_size(uint64_t npages)
{
	return (2 * npages + 7) / 8 * 8 +
	       npages * (sizeof(uint64_t) + PAGER_TAG_SIZE);
}

/* Point s's arrays into base, which holds arrays_size(npages) bytes. */
static void lay_out(struct page_states *s, char *base, uint64_t npages)
{
	s->state = (uint8_t *)base;
	s->have = s->state + npages;
	s->version = (uint64_t *)(base + (2 * npages + 7) / 8 * 8);
	s->tag = (uint8_t (*)[PAGER_TAG_SIZE])(s->version + npages);
}

static int in_memory(struct page_states *s, uint64_t npages)
{
	char *base = calloc(1, arrays_size(npages) + 1);

	s->seal = calloc(1, sizeof(*s->seal));
	if (!base || !s->seal) {
		free(base);
		return -1;
	}
	lay_out(s, base, npages);
	return 0;
}

/* Same registration, whatever the features. */
static int same(const struct pager_registration *a,
		const struct pager_registration *b)
{
	struct pager_registration x = *a;

	x.features = b->features;
	return !memcmp(&x, b, sizeof(x));
}

int states_open(struct page_states *s, const char *path,
		struct pager_registration *reg, int fresh)
{
	size_t len = sizeof(struct state_header) + arrays_size(reg->npages);
	struct state_header want = { .magic = STATE_MAGIC, .reg = *reg };
	struct state_header *h;
	struct stat st;
	char *map;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (!path)
		return in_memory(s, reg->npages);
	s->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->fd >= 0 && flock(s->fd, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "pager: %s: another pager runs on it\n", path);
		return -1;
	}
	/* Fresh: zeros, all IN. */
	if (s->fd < 0 || fstat(s->fd, &st) ||
	    (fresh && (ftruncate(s->fd, 0) || ftruncate(s->fd, len)))) {
		perror(path);
		return -1;
	}
	if (!fresh && (size_t)st.st_size != len)
		goto not_ours;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (map == MAP_FAILED) {
		perror("pager: mmap state");
		return -1;
	}
	s->map = map;
	s->len = len;
	h = s->map;
	if (!fresh && (h->magic != STATE_MAGIC || !same(&h->reg, reg)))
		goto not_ours;
	if (fresh)
		memcpy(h, &want, sizeof(want));
	reg->features = h->reg.features;
	s->seal = &h->seal;
	lay_out(s, map + sizeof(want), reg->npages);
	return 0;
not_ours:
	fprintf(stderr, "pager: %s is not the state of this registration\n",
		path);
	errno = ESTALE;
	return -1;
}

void states_close(struct page_states *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->map) {
		munmap(s->map, s->len);
	} else {
		free(s->state);
		free(s->seal);
	}
}

int pager_state_registration(const char *state_path,
			     struct pager_registration *reg)
{
	struct state_header h;
	int fd = open(state_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, &h, sizeof(h), 0);

	if (fd >= 0)
		close(fd);
	if (n != sizeof(h) || h.magic != STATE_MAGIC ||
	    !h.reg.nregions || h.reg.nregions > PAGER_MAX_REGIONS)
		return -1;
	*reg = h.reg;
	return 0;
}
