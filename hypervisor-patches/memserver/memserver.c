/*
 * memcanal-memserver: lend this host's idle memory to remote pagers.
 *
 * Serves 4 KiB pages keyed by (owner, page) over TCP, in one arena
 * preallocated for --max-pages pages. TMemCanal treats remote memory as
 * non-reliable storage the lending host may take back at any moment, so
 * this server drops pages freely: the oldest written first when full, and
 * on SIGUSR1 or a RECLAIM request. A client must never hold its only copy
 * here. Protocol: README.md.
 *
 * One thread per connection; one mutex guards the table and the arena.
 * Payloads are read before and written after the lock is held, so a slow
 * client never stalls the others.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAGE_SIZE 4096u
#define MAGIC 0x534D434Du /* 'MCMS' */
#define REQUEST_SIZE 32
#define REPLY_SIZE 16
#define MAX_BATCH 1024u /* pages per PUT/GET/DELETE: 4 MiB */
#define NIL UINT32_MAX

enum op { OP_PUT = 1, OP_GET = 2, OP_DELETE = 3, OP_STAT = 4, OP_RECLAIM = 5 };
enum status { ST_OK = 0, ST_MISSING = 1, ST_FULL = 2, ST_BAD_REQUEST = 3 };

struct request {
	uint8_t op;
	uint64_t owner;
	uint64_t page;
	uint32_t count;
};

/* One stored page. Slots are chained in a hash bucket and, while used,
 * in the age list (oldest written at the head), else in the free list. */
struct slot {
	uint64_t owner;
	uint64_t page;
	uint32_t hash_next;
	uint32_t older, newer;
	uint8_t used;
};

static struct {
	pthread_mutex_t lock;
	uint8_t *arena;
	struct slot *slots;
	uint32_t *buckets;
	uint32_t bucket_mask;
	uint32_t max_pages;
	uint32_t held;
	uint32_t oldest, newest; /* age list */
	uint32_t free_head;      /* chained through hash_next */
	uint64_t dropped;        /* evicted or reclaimed, never deleted */
} store = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint32_t bucket_of(uint64_t owner, uint64_t page)
{
	uint64_t h = owner * 0x9E3779B97F4A7C15ull ^ page;
	h ^= h >> 33;
	h *= 0xFF51AFD7ED558CCDull;
	h ^= h >> 33;
	return (uint32_t)h & store.bucket_mask;
}

static uint8_t *slot_data(uint32_t s)
{
	return store.arena + (size_t)s * PAGE_SIZE;
}

static uint32_t lookup(uint64_t owner, uint64_t page)
{
	uint32_t s = store.buckets[bucket_of(owner, page)];
	while (s != NIL && (store.slots[s].owner != owner ||
			    store.slots[s].page != page))
		s = store.slots[s].hash_next;
	return s;
}

static void age_unlink(uint32_t s)
{
	struct slot *x = &store.slots[s];
	if (x->older != NIL)
		store.slots[x->older].newer = x->newer;
	else
		store.oldest = x->newer;
	if (x->newer != NIL)
		store.slots[x->newer].older = x->older;
	else
		store.newest = x->older;
}

static void age_append(uint32_t s)
{
	struct slot *x = &store.slots[s];
	x->older = store.newest;
	x->newer = NIL;
	if (store.newest != NIL)
		store.slots[store.newest].newer = s;
	else
		store.oldest = s;
	store.newest = s;
}

/* Unlink a used slot from its bucket and the age list; free it. With
 * give_back, its memory returns to the host (the point of a reclaim). */
static void release(uint32_t s, int give_back)
{
	struct slot *x = &store.slots[s];
	uint32_t *link = &store.buckets[bucket_of(x->owner, x->page)];
	while (*link != s)
		link = &store.slots[*link].hash_next;
	*link = x->hash_next;
	age_unlink(s);
	x->used = 0;
	x->hash_next = store.free_head;
	store.free_head = s;
	store.held--;
	if (give_back)
		madvise(slot_data(s), PAGE_SIZE, MADV_DONTNEED);
}

/* Drop up to n pages, oldest written first; how many were dropped. */
static uint32_t drop_oldest(uint32_t n, int give_back)
{
	uint32_t done = 0;
	while (done < n && store.oldest != NIL) {
		release(store.oldest, give_back);
		done++;
	}
	store.dropped += done;
	return done;
}

/* Store one page, overwriting an older copy; evicts the oldest if full. */
static void put_page(uint64_t owner, uint64_t page, const uint8_t *data)
{
	uint32_t s = lookup(owner, page);
	if (s != NIL) {
		age_unlink(s);
	} else {
		if (store.free_head == NIL)
			drop_oldest(1, 0);
		s = store.free_head;
		store.free_head = store.slots[s].hash_next;
		uint32_t b = bucket_of(owner, page);
		store.slots[s] = (struct slot){ .owner = owner, .page = page,
						.hash_next = store.buckets[b],
						.used = 1 };
		store.buckets[b] = s;
		store.held++;
	}
	age_append(s);
	memcpy(slot_data(s), data, PAGE_SIZE);
}

static int store_init(uint32_t max_pages)
{
	uint32_t buckets = 1;
	while (buckets < max_pages && buckets < (1u << 31))
		buckets <<= 1;
	store.max_pages = max_pages;
	store.bucket_mask = buckets - 1;
	/* Untouched arena pages cost nothing until a PUT writes them. */
	store.arena = mmap(NULL, (size_t)max_pages * PAGE_SIZE,
			   PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	store.slots = calloc(max_pages, sizeof(*store.slots));
	store.buckets = malloc((size_t)buckets * sizeof(*store.buckets));
	if (store.arena == MAP_FAILED || !store.slots || !store.buckets)
		return -1;
	memset(store.buckets, 0xff, (size_t)buckets * sizeof(*store.buckets));
	for (uint32_t s = 0; s < max_pages; s++)
		store.slots[s].hash_next = s + 1 < max_pages ? s + 1 : NIL;
	store.free_head = 0;
	store.oldest = store.newest = NIL;
	return 0;
}

/* ---- wire ---- */

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n == 0)
			return -1;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static int reply(int fd, uint8_t status, uint32_t count,
		 const void *body, size_t body_len)
{
	uint8_t head[REPLY_SIZE] = { 0 };
	put_u32(head, MAGIC);
	head[4] = status;
	put_u32(head + 8, count);
	if (write_full(fd, head, sizeof(head)))
		return -1;
	return body_len ? write_full(fd, body, body_len) : 0;
}

/* Decode and check a header; 0 if it is a request this server serves. */
static int parse(const uint8_t *raw, struct request *req)
{
	if (get_u32(raw) != MAGIC)
		return -1;
	req->op = raw[4];
	req->owner = get_u64(raw + 8);
	req->page = get_u64(raw + 16);
	req->count = get_u32(raw + 24);
	switch (req->op) {
	case OP_PUT:
	case OP_GET:
	case OP_DELETE:
		if (req->count == 0 || req->count > MAX_BATCH ||
		    req->page > UINT64_MAX - (req->count - 1))
			return -1;
		return 0;
	case OP_STAT:
	case OP_RECLAIM:
		return 0;
	default:
		return -1;
	}
}

/* ---- requests ---- */

static int serve_put(int fd, const struct request *req, uint8_t *buf)
{
	size_t len = (size_t)req->count * PAGE_SIZE;
	if (read_full(fd, buf, len))
		return -1;
	if (req->count > store.max_pages) /* could never all be held */
		return reply(fd, ST_FULL, 0, NULL, 0);
	pthread_mutex_lock(&store.lock);
	for (uint32_t i = 0; i < req->count; i++)
		put_page(req->owner, req->page + i, buf + (size_t)i * PAGE_SIZE);
	pthread_mutex_unlock(&store.lock);
	return reply(fd, ST_OK, req->count, NULL, 0);
}

static int serve_get(int fd, const struct request *req, uint8_t *buf)
{
	int missing = 0;
	pthread_mutex_lock(&store.lock);
	for (uint32_t i = 0; i < req->count && !missing; i++) {
		uint32_t s = lookup(req->owner, req->page + i);
		if (s == NIL)
			missing = 1;
		else
			memcpy(buf + (size_t)i * PAGE_SIZE, slot_data(s),
			       PAGE_SIZE);
	}
	pthread_mutex_unlock(&store.lock);
	if (missing)
		return reply(fd, ST_MISSING, 0, NULL, 0);
	return reply(fd, ST_OK, req->count, buf,
		     (size_t)req->count * PAGE_SIZE);
}

static int serve_delete(int fd, const struct request *req)
{
	uint32_t deleted = 0;
	pthread_mutex_lock(&store.lock);
	for (uint32_t i = 0; i < req->count; i++) {
		uint32_t s = lookup(req->owner, req->page + i);
		if (s != NIL) {
			release(s, 0);
			deleted++;
		}
	}
	pthread_mutex_unlock(&store.lock);
	return reply(fd, ST_OK, deleted, NULL, 0);
}

static int serve_stat(int fd)
{
	uint8_t body[16];
	uint32_t held;
	pthread_mutex_lock(&store.lock);
	held = store.held;
	put_u64(body, store.max_pages);
	put_u64(body + 8, store.dropped);
	pthread_mutex_unlock(&store.lock);
	return reply(fd, ST_OK, held, body, sizeof(body));
}

static int serve_reclaim(int fd, const struct request *req)
{
	uint32_t dropped;
	pthread_mutex_lock(&store.lock);
	dropped = drop_oldest(req->count, 1);
	pthread_mutex_unlock(&store.lock);
	return reply(fd, ST_OK, dropped, NULL, 0);
}

static void *serve_client(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc((size_t)MAX_BATCH * PAGE_SIZE);
	uint8_t raw[REQUEST_SIZE];
	struct request req;
	int failed = !buf;

	while (!failed && !read_full(fd, raw, sizeof(raw))) {
		if (parse(raw, &req)) {
			reply(fd, ST_BAD_REQUEST, 0, NULL, 0);
			break;
		}
		switch (req.op) {
		case OP_PUT:
			failed = serve_put(fd, &req, buf);
			break;
		case OP_GET:
			failed = serve_get(fd, &req, buf);
			break;
		case OP_DELETE:
			failed = serve_delete(fd, &req);
			break;
		case OP_STAT:
			failed = serve_stat(fd);
			break;
		case OP_RECLAIM:
			failed = serve_reclaim(fd, &req);
			break;
		}
	}
	free(buf);
	close(fd);
	return NULL;
}

/* SIGUSR1 is blocked everywhere and taken here: the host wants its
 * memory back, so every page goes and the arena is returned. */
static void *reclaim_on_signal(void *arg)
{
	sigset_t *set = arg;
	int sig;
	for (;;) {
		if (sigwait(set, &sig))
			continue;
		pthread_mutex_lock(&store.lock);
		uint32_t dropped = drop_oldest(UINT32_MAX, 1);
		pthread_mutex_unlock(&store.lock);
		fprintf(stderr, "SIGUSR1: dropped %" PRIu32 " pages\n",
			dropped);
	}
	return NULL;
}

/* ---- startup ---- */

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--listen HOST:PORT] [--max-pages N]\n"
		"  --listen     address to serve on (default 127.0.0.1:0;\n"
		"               port 0 picks one)\n"
		"  --max-pages  4 KiB pages held at most (default 65536)\n",
		prog);
	exit(2);
}

static int open_listener(const char *spec)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	size_t host_len;
	if (!colon || (host_len = (size_t)(colon - spec)) >= sizeof(host))
		return -1;
	memcpy(host, spec, host_len);
	host[host_len] = '\0';
	if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
		memmove(host, host + 1, host_len - 2);
		host[host_len - 2] = '\0';
	}

	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	int err = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (err) {
		fprintf(stderr, "%s: %s\n", spec, gai_strerror(err));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 128)) {
		perror(spec);
		freeaddrinfo(res);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(res);

	struct sockaddr_storage addr;
	socklen_t addr_len = sizeof(addr);
	char name[NI_MAXHOST], port[NI_MAXSERV];
	getsockname(fd, (struct sockaddr *)&addr, &addr_len);
	getnameinfo((struct sockaddr *)&addr, addr_len, name, sizeof(name),
		    port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	if (addr.ss_family == AF_INET6)
		printf("listening on [%s]:%s\n", name, port);
	else
		printf("listening on %s:%s\n", name, port);
	fflush(stdout);
	return fd;
}

int main(int argc, char **argv)
{
	const char *listen_spec = "127.0.0.1:0";
	unsigned long long max_pages = 65536;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			listen_spec = argv[++i];
		} else if (!strcmp(argv[i], "--max-pages") && i + 1 < argc) {
			char *end;
			errno = 0;
			max_pages = strtoull(argv[++i], &end, 10);
			if (errno || *end || max_pages == 0 ||
			    max_pages >= UINT32_MAX)
				usage(argv[0]);
		} else {
			usage(argv[0]);
		}
	}

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (store_init((uint32_t)max_pages)) {
		fprintf(stderr, "cannot reserve %llu pages\n", max_pages);
		return 1;
	}
	int listener = open_listener(listen_spec);
	if (listener < 0)
		return 1;

	pthread_t tid;
	pthread_attr_t detached;
	pthread_attr_init(&detached);
	pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&tid, &detached, reclaim_on_signal, &set)) {
		fprintf(stderr, "cannot start the signal thread\n");
		return 1;
	}

	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				perror("accept");
			if (errno == EMFILE || errno == ENFILE)
				sleep(1);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&tid, &detached, serve_client,
				   (void *)(intptr_t)fd))
			close(fd);
	}
}
