/*
 * What memcanal-memserver sets up before its loop (setup.h).
 */
#define _GNU_SOURCE
#include "setup.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>

/* Listen on spec; *name gets HOST:PORT with the port the kernel picked. */
int open_listener(const char *spec, char *name, size_t name_len)
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
	int fd = socket(res->ai_family,
			SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, SOMAXCONN)) {
		perror(spec);
		freeaddrinfo(res);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(res);

	struct sockaddr_storage addr;
	socklen_t addr_len = sizeof(addr);
	char numeric[NI_MAXHOST], port[NI_MAXSERV];
	getsockname(fd, (struct sockaddr *)&addr, &addr_len);
	getnameinfo((struct sockaddr *)&addr, addr_len, numeric,
		    sizeof(numeric), port, sizeof(port),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(name, name_len, addr.ss_family == AF_INET6 ? "[%s]:%s" :
		 "%s:%s", numeric, port);
	return fd;
}

/* The admin socket at path, 0600 from its creation: a stale socket of
 * an earlier run is replaced, anything else at path is left alone. */
int open_admin(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat st;
	if (strlen(path) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "%s: too long for a socket path\n", path);
		return -1;
	}
	strcpy(addr.sun_path, path);
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			fprintf(stderr, "%s: exists and is not a socket\n",
				path);
			return -1;
		}
		unlink(path);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);
	mode_t mask = umask(0177);
	int failed = fd < 0 || bind(fd, (struct sockaddr *)&addr,
				    sizeof(addr)) || listen(fd, 16);
	umask(mask);
	if (failed) {
		perror(path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

SSL_CTX *tls_context(const char *cert, const char *key)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		fprintf(stderr, "TLS with %s and %s: ", cert, key);
		ERR_print_errors_fp(stderr);
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* Idle connections give their record buffers back; no session
	 * cache or tickets to grow: pagers connect rarely. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS |
			 SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	return ctx;
}

/* Enough descriptors for every connection, or say why not. */
int reserve_descriptors(uint32_t connections, uint32_t need)
{
	struct rlimit lim;
	if (getrlimit(RLIMIT_NOFILE, &lim))
		return -1;
	if (lim.rlim_cur >= (rlim_t)need)
		return 0;
	if (lim.rlim_max < (rlim_t)need) {
		fprintf(stderr, "--max-connections %u needs %llu descriptors; "
			"the limit is %llu\n", connections,
			(unsigned long long)need,
			(unsigned long long)lim.rlim_max);
		return -1;
	}
	lim.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &lim);
}
