/*
 * memcanal-memserver: lend this host's idle memory to remote pagers.
 *
 * Serves 4 KiB pages keyed by (owner, page) in one arena preallocated for
 * --max-pages pages. TMemCanal treats remote memory as non-reliable
 * storage the lending host may take back at any moment, so this server
 * drops pages freely: a lease's oldest when it writes past its quota, and
 * on SIGUSR1 or an operator's RECLAIM. Protocol and threat model:
 * README.md.
 *
 * One thread, one epoll loop: the listener, the admin socket, a signalfd
 * and every connection. Memory is the arena plus a fixed overhead: at
 * most --max-connections clients (each a bounded buffer and an OpenSSL
 * session), none idle longer than --idle-timeout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "setup.h"
#include "store.h"

/* Operator connections (the agent's STAT), besides the clients'. */
#define ADMIN_CONNECTIONS 4
/* A client must finish TLS and HELLO within this (or the idle timeout,
 * if shorter): a connection that never authenticates holds a slot. */
#define HELLO_TIMEOUT_MS 10000
/* Unauthenticated clients (before HELLO) at once, from one source and in
 * all: a flood from one address holds at most the first, so that it
 * cannot push out the handshakes of clients with tokens from elsewhere;
 * the second bounds what a flood from many addresses takes (default: a
 * quarter of --max-connections). */
#define HANDSHAKES_PER_SOURCE 8
#define ACCEPTS_PER_WAKE 64

static struct {
	int epfd, listener, admin_listener, signals;
	const char *admin_path;
	uint32_t max_connections, clients, admins;
	uint64_t idle_ms, hello_ms, now_ms;
	uint64_t orphan_grace, swept; /* seconds; the last sweep's second */
	uint32_t max_handshakes, max_handshakes_per_source, handshakes;
	uint64_t replaced, replaced_noted_ms; /* over the per-source cap */
	struct conn *conns;       /* max_connections + ADMIN_CONNECTIONS */
	struct source *sources;   /* each connection's, by index in conns */
	struct conn **free_conns; /* a stack */
	uint32_t nfree;
	struct link pending; /* before HELLO (or a first plaintext request),
			      * oldest accepted first */
	struct link idle;    /* the rest, least recently active first */
	struct link runnable;/* with work left after their budget */
} loop;

/* Where a client connects from, as the per-source cap counts it: an
 * IPv4 address, or an IPv6 address's /64 (what one host can take). */
struct source {
	uint8_t bytes[8];
	uint32_t ipv4;
	uint8_t family;
	uint8_t handshaking; /* counted in loop.handshakes */
};

/* epoll tags of the non-connection descriptors. */
static char tag_listener, tag_admin, tag_signals;

/* ---- lists ---- */

static void link_init(struct link *x)
{
	x->prev = x->next = x;
}

static int linked(const struct link *x)
{
	return x->next != x;
}

static void link_remove(struct link *x)
{
	x->prev->next = x->next;
	x->next->prev = x->prev;
	link_init(x);
}

static void link_append(struct link *list, struct link *x)
{
	x->prev = list->prev;
	x->next = list;
	list->prev->next = x;
	list->prev = x;
}

#define conn_of(l, member) \
	((struct conn *)((char *)(l) - offsetof(struct conn, member)))

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- connections ---- */

static struct source *source_of(const struct conn *c)
{
	return &loop.sources[c - loop.conns];
}

static int same_source(const struct source *a, const struct source *b)
{
	return a->family == b->family && a->ipv4 == b->ipv4 &&
	       !memcmp(a->bytes, b->bytes, sizeof(a->bytes));
}

static void source_from(struct source *s, const struct sockaddr_storage *addr)
{
	const struct in6_addr *in6 =
		&((const struct sockaddr_in6 *)addr)->sin6_addr;
	memset(s, 0, sizeof(*s));
	s->family = (uint8_t)addr->ss_family;
	if (addr->ss_family == AF_INET) {
		s->ipv4 = ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
	} else if (addr->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(in6)) {
		/* An IPv4 client of a dual-stack listener: its address. */
		s->family = AF_INET;
		memcpy(&s->ipv4, in6->s6_addr + 12, sizeof(s->ipv4));
	} else if (addr->ss_family == AF_INET6) {
		memcpy(s->bytes, in6->s6_addr, sizeof(s->bytes));
	}
}

/* c said HELLO, or goes: it no longer counts as a handshake. */
static void handshake_over(struct conn *c)
{
	struct source *s = source_of(c);
	if (s->handshaking) {
		s->handshaking = 0;
		loop.handshakes--;
	}
}

static void drop(struct conn *c)
{
	handshake_over(c);
	link_remove(&c->age);
	if (linked(&c->run))
		link_remove(&c->run);
	if (c->admin)
		loop.admins--;
	else
		loop.clients--;
	conn_close(c);
	loop.free_conns[loop.nfree++] = c;
}

static void want(struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (events != c->events &&
	    !epoll_ctl(loop.epfd, EPOLL_CTL_MOD, c->fd, &ev))
		c->events = events;
}

static void serve(struct conn *c)
{
	int was_authed = c->authed;
	c->progressed = 0;
	int r = conn_run(c);
	if (c->authed)
		handshake_over(c);
	if (r == CONN_CLOSED) {
		drop(c);
		return;
	}
	if (c->progressed || c->authed != was_authed) {
		c->active_ms = loop.now_ms;
		link_remove(&c->age);
		link_append(c->authed ? &loop.idle : &loop.pending, &c->age);
	}
	if (r == CONN_MORE) {
		if (!linked(&c->run))
			link_append(&loop.runnable, &c->run);
	} else {
		want(c, (uint32_t)r);
	}
}

/* Make room for one more client by closing the oldest that has not
 * said HELLO yet (plaintext: asked for nothing): 0, or -1 if every
 * client has. */
static int evict_pending(void)
{
	if (!linked(&loop.pending))
		return -1;
	struct conn *c = conn_of(loop.pending.next, age);
	note("%s: closed before HELLO to admit a newer client", c->peer);
	drop(c);
	return 0;
}

/* Make room for a handshake from s: close the oldest of its source's
 * if it holds --max-handshakes-per-source (the pre-HELLO list is at
 * most --max-handshakes long: a scan of it costs little), else the
 * oldest of all if --max-handshakes are under way. A flood from one
 * address so only ever replaces its own. */
static void make_room_for(const struct source *s)
{
	uint32_t same = 0;
	struct conn *oldest = NULL;
	for (struct link *x = loop.pending.next; x != &loop.pending;
	     x = x->next) {
		struct conn *c = conn_of(x, age);
		if (c->admin || !same_source(source_of(c), s))
			continue;
		if (!oldest)
			oldest = c;
		if (++same >= loop.max_handshakes_per_source) {
			/* Counted, and said every 10 s: a flood would
			 * fill the log with nothing else. */
			loop.replaced++;
			drop(oldest);
			return;
		}
	}
	if (loop.handshakes >= loop.max_handshakes)
		evict_pending();
}

static void admit(int fd, int admin, const char *peer,
		  const struct source *from)
{
	struct conn *c = loop.free_conns[--loop.nfree];
	struct source *s = source_of(c);
	if (from)
		*s = *from;
	else
		memset(s, 0, sizeof(*s));
	s->handshaking = 0;
	if (conn_start(c, fd, admin, peer)) {
		close(fd);
		loop.free_conns[loop.nfree++] = c;
		return;
	}
	c->started_ms = c->active_ms = loop.now_ms;
	c->events = EPOLLIN;
	link_init(&c->run);
	link_init(&c->age);
	link_append(c->authed ? &loop.idle : &loop.pending, &c->age);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(loop.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		link_remove(&c->age);
		conn_close(c);
		loop.free_conns[loop.nfree++] = c;
		return;
	}
	if (admin)
		loop.admins++;
	else
		loop.clients++;
	if (!admin && !c->authed) {
		s->handshaking = 1;
		loop.handshakes++;
	}
}

static void accept_clients(void)
{
	for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof(addr);
		char host[INET6_ADDRSTRLEN + 8], port[8], peer[80];
		int fd = accept4(loop.listener, (struct sockaddr *)&addr, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				note("accept: %s", strerror(errno));
			return;
		}
		struct source from;
		source_from(&from, &addr);
		make_room_for(&from);
		if (loop.clients >= loop.max_connections && evict_pending()) {
			note("a client over --max-connections refused");
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (getnameinfo((struct sockaddr *)&addr, len, host,
				sizeof(host), port, sizeof(port),
				NI_NUMERICHOST | NI_NUMERICSERV))
			snprintf(host, sizeof(host), "?");
		snprintf(peer, sizeof(peer), "%s port %s", host, port);
		admit(fd, 0, peer, &from);
	}
}

/* The operator's socket: root only, by the kernel's word (SO_PEERCRED),
 * whatever the socket file's mode became. */
static void accept_admin(void)
{
	int fd = accept4(loop.admin_listener, NULL, NULL,
			 SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ucred cred = { .uid = (uid_t)-1 };
	socklen_t len = sizeof(cred);
	char peer[80];

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    cred.uid != 0 || loop.admins >= ADMIN_CONNECTIONS) {
		uint8_t refused[REPLY_SIZE] = { 0 };
		put_u32(refused, MAGIC);
		refused[4] = ST_REFUSED;
		send(fd, refused, sizeof(refused), MSG_NOSIGNAL);
		note("admin socket: uid %u refused", (unsigned)cred.uid);
		close(fd);
		return;
	}
	snprintf(peer, sizeof(peer), "admin pid %d", (int)cred.pid);
	admit(fd, 1, peer, NULL);
}

static void take_signal(void)
{
	struct signalfd_siginfo si;
	if (read(loop.signals, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGUSR1) {
		/* The host wants its memory back: every page goes. */
		fprintf(stderr, "SIGUSR1: dropped %" PRIu32 " pages\n",
			store_reclaim(UINT32_MAX));
		return;
	}
	if (loop.admin_path)
		unlink(loop.admin_path);
	exit(0);
}

/* Close clients past their deadline: the oldest of each list first. */
static void expire(void)
{
	if (loop.replaced && loop.now_ms - loop.replaced_noted_ms >= 10000) {
		note("%" PRIu64 " clients closed before HELLO: a newer one "
		     "came from their address, which held "
		     "--max-handshakes-per-source", loop.replaced);
		loop.replaced = 0;
		loop.replaced_noted_ms = loop.now_ms;
	}
	while (linked(&loop.pending)) {
		struct conn *c = conn_of(loop.pending.next, age);
		if (loop.now_ms - c->started_ms < loop.hello_ms)
			break;
		note("%s: no HELLO in time; closing", c->peer);
		drop(c);
	}
	while (linked(&loop.idle)) {
		struct conn *c = conn_of(loop.idle.next, age);
		if (loop.now_ms - c->active_ms < loop.idle_ms)
			break;
		note("%s: idle; closing", c->peer);
		drop(c);
	}
}

/* Once a second: give back the pages of leases whose borrower is gone
 * (no connection, token expired more than --orphan-grace ago), so that
 * they never fill the arena for the living. */
static void sweep_orphans(void)
{
	uint64_t now = (uint64_t)time(NULL);
	if (now == loop.swept)
		return;
	loop.swept = now;
	uint32_t n = store_reclaim_orphans(now, loop.orphan_grace);
	if (n)
		note("gave back %u pages of leases whose borrower is gone", n);
}

static void run_loop(void)
{
	struct epoll_event events[64];
	for (;;) {
		int n = epoll_wait(loop.epfd, events, 64,
				   linked(&loop.runnable) ? 0 : 1000);
		loop.now_ms = now_ms();
		for (int i = 0; i < n; i++) {
			void *p = events[i].data.ptr;
			if (p == &tag_listener)
				accept_clients();
			else if (p == &tag_admin)
				accept_admin();
			else if (p == &tag_signals)
				take_signal();
			else if (((struct conn *)p)->fd >= 0)
				serve(p);
		}
		/* Each connection with work left gets one more budget. */
		struct link again;
		link_init(&again);
		while (linked(&loop.runnable)) {
			struct link *x = loop.runnable.next;
			link_remove(x);
			link_append(&again, x);
		}
		while (linked(&again)) {
			struct conn *c = conn_of(again.next, run);
			link_remove(&c->run);
			serve(c);
		}
		expire();
		sweep_orphans();
	}
}

/* ---- startup ---- */

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s --listen HOST:PORT --max-pages N\n"
		"          --tls-cert FILE --tls-key FILE --lease-key FILE\n"
		"          [--admin PATH] [--name HOST:PORT]\n"
		"          [--max-connections N] [--idle-timeout SECONDS]\n"
		"          [--max-token-lifetime SECONDS]\n"
		"          [--orphan-grace SECONDS]\n"
		"          [--max-handshakes N] [--max-handshakes-per-source N]\n"
		"          [--handshake-timeout SECONDS]\n"
		"       %s --insecure [--listen ...] [--max-pages ...] ...\n"
		"  --listen           address to serve on (default 127.0.0.1:0;\n"
		"                     port 0 picks one)\n"
		"  --max-pages        4 KiB pages held at most (default 65536)\n"
		"  --tls-cert, --tls-key  this server's certificate (chain) and\n"
		"                     key, PEM, from the cloud's CA\n"
		"  --lease-key        the service's Ed25519 public key (PEM) that\n"
		"                     signs lease tokens\n"
		"  --admin            the operator's Unix socket (STAT, RECLAIM;\n"
		"                     mode 0600, root only)\n"
		"  --name             the address lease tokens must name (default:\n"
		"                     the address listened on)\n"
		"  --max-connections  clients at once (default 256)\n"
		"  --idle-timeout     seconds a client may stay idle (default 60)\n"
		"  --max-token-lifetime  seconds a lease token is good at most\n"
		"                     after its issued_at, whatever it states\n"
		"                     (default 86400)\n"
		"  --orphan-grace     seconds the pages of a lease nobody is\n"
		"                     connected to stay after its token expired\n"
		"                     (default 600)\n"
		"  --max-handshakes   clients before their HELLO at once; the\n"
		"                     oldest goes for a new one (default: a\n"
		"                     quarter of --max-connections)\n"
		"  --max-handshakes-per-source  of those, from one IPv4 address\n"
		"                     or IPv6 /64: a new one takes the place\n"
		"                     of its address's oldest (default 8)\n"
		"  --handshake-timeout  seconds to finish TLS and HELLO (default\n"
		"                     10, at most --idle-timeout)\n"
		"  --insecure         plaintext, no lease tokens, STAT and RECLAIM\n"
		"                     from anyone: the pre-#25 protocol, for tests\n",
		prog, prog);
	exit(2);
}

static unsigned long long number(const char *text, unsigned long long max,
				 const char *prog)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(text, &end, 10);
	if (errno || *end || n == 0 || n > max)
		usage(prog);
	return n;
}

static int watch(int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };
	return epoll_ctl(loop.epfd, EPOLL_CTL_ADD, fd, &ev);
}

int main(int argc, char **argv)
{
	const char *listen_spec = "127.0.0.1:0", *cert = NULL, *key = NULL;
	const char *lease_key = NULL, *name = NULL;
	unsigned long long max_pages = 65536, idle_s = 60;
	unsigned long long max_lifetime = 86400, orphan_grace = 600;
	unsigned long long hello_s = HELLO_TIMEOUT_MS / 1000;
	int insecure = 0;
	char listened[NI_MAXHOST + NI_MAXSERV + 4];

	loop.max_connections = 256;
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		if (!strcmp(opt, "--insecure")) {
			insecure = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage(argv[0]);
		const char *arg = argv[++i];
		if (!strcmp(opt, "--listen"))
			listen_spec = arg;
		else if (!strcmp(opt, "--max-pages"))
			max_pages = number(arg, UINT32_MAX - 1, argv[0]);
		else if (!strcmp(opt, "--tls-cert"))
			cert = arg;
		else if (!strcmp(opt, "--tls-key"))
			key = arg;
		else if (!strcmp(opt, "--lease-key"))
			lease_key = arg;
		else if (!strcmp(opt, "--admin"))
			loop.admin_path = arg;
		else if (!strcmp(opt, "--name"))
			name = arg;
		else if (!strcmp(opt, "--max-connections"))
			loop.max_connections = (uint32_t)number(arg, 1 << 20,
								argv[0]);
		else if (!strcmp(opt, "--idle-timeout"))
			idle_s = number(arg, 1 << 20, argv[0]);
		else if (!strcmp(opt, "--max-token-lifetime"))
			max_lifetime = number(arg, 1ull << 32, argv[0]);
		else if (!strcmp(opt, "--orphan-grace"))
			orphan_grace = number(arg, 1ull << 32, argv[0]);
		else if (!strcmp(opt, "--handshake-timeout"))
			hello_s = number(arg, 1 << 20, argv[0]);
		else if (!strcmp(opt, "--max-handshakes"))
			loop.max_handshakes = (uint32_t)number(arg, 1 << 20,
							       argv[0]);
		else if (!strcmp(opt, "--max-handshakes-per-source"))
			loop.max_handshakes_per_source = (uint32_t)number(
				arg, 1 << 20, argv[0]);
		else
			usage(argv[0]);
	}
	if (insecure == !!(cert || key || lease_key) ||
	    (!insecure && !(cert && key && lease_key))) {
		fprintf(stderr, "%s: give --tls-cert, --tls-key and "
			"--lease-key, or --insecure for plaintext\n", argv[0]);
		usage(argv[0]);
	}
	loop.idle_ms = idle_s * 1000;
	server.max_lifetime = max_lifetime;
	loop.orphan_grace = orphan_grace;
	loop.hello_ms = idle_s < hello_s ? loop.idle_ms : hello_s * 1000;
	if (!loop.max_handshakes)
		loop.max_handshakes = loop.max_connections / 4 ?
				      loop.max_connections / 4 : 1;
	if (!loop.max_handshakes_per_source)
		loop.max_handshakes_per_source = HANDSHAKES_PER_SOURCE;

	/* Signals come through the loop: no handler, no other thread. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	uint32_t slots = loop.max_connections + ADMIN_CONNECTIONS;
	loop.conns = calloc(slots, sizeof(*loop.conns));
	loop.free_conns = calloc(slots, sizeof(*loop.free_conns));
	loop.sources = calloc(slots, sizeof(*loop.sources));
	if (!loop.conns || !loop.free_conns || !loop.sources ||
	    reserve_descriptors(loop.max_connections,
				loop.max_connections + ADMIN_CONNECTIONS + 16))
		return 1;
	for (uint32_t i = 0; i < slots; i++) {
		loop.conns[i].fd = -1;
		loop.free_conns[loop.nfree++] = &loop.conns[slots - 1 - i];
	}
	link_init(&loop.pending);
	link_init(&loop.idle);
	link_init(&loop.runnable);

	if (store_init((uint32_t)max_pages)) {
		fprintf(stderr, "cannot reserve %llu pages\n", max_pages);
		return 1;
	}
	if (insecure) {
		server.shared_account = store_open_shared_account();
	} else {
		server.tls = tls_context(cert, key);
		server.lease_key = lease_key_load(lease_key);
		if (!server.lease_key)
			fprintf(stderr, "%s: not an Ed25519 public key (PEM)\n",
				lease_key);
		if (!server.tls || !server.lease_key)
			return 1;
	}
	loop.listener = open_listener(listen_spec, listened, sizeof(listened));
	if (loop.listener < 0)
		return 1;
	server.name = name ? name : listened;
	if (!insecure && !name && (!strncmp(listened, "0.0.0.0:", 8) ||
				   !strncmp(listened, "[::]:", 5))) {
		fprintf(stderr, "%s: listening on every address, give --name "
			"HOST:PORT (as registered: what lease tokens name)\n",
			argv[0]);
		return 2;
	}
	if (loop.admin_path) {
		loop.admin_listener = open_admin(loop.admin_path);
		if (loop.admin_listener < 0)
			return 1;
	}
	loop.signals = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	loop.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop.signals < 0 || loop.epfd < 0 ||
	    watch(loop.listener, &tag_listener) ||
	    watch(loop.signals, &tag_signals) ||
	    (loop.admin_path && watch(loop.admin_listener, &tag_admin))) {
		perror("epoll");
		return 1;
	}
	printf("listening on %s\n", listened);
	fflush(stdout);
	if (insecure)
		fprintf(stderr, "--insecure: plaintext, no lease tokens, "
			"STAT and RECLAIM from anyone\n");
	run_loop();
}
