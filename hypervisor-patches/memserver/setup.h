/*
 * What memcanal-memserver sets up before its event loop: its sockets,
 * its TLS context and its descriptor limit. Each prints why it failed.
 */
#ifndef MEMSERVER_SETUP_H
#define MEMSERVER_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

/* A non-blocking listener on HOST:PORT (IPv6 as [::1]:PORT); *name
 * gets HOST:PORT with the port the kernel picked. -1 on failure. */
int open_listener(const char *spec, char *name, size_t name_len);
/* The admin Unix socket at path, 0600 from its creation; a stale socket
 * of an earlier run is replaced, anything else there is left alone. */
int open_admin(const char *path);
/* A TLS 1.3 server context with this certificate (chain) and key. */
SSL_CTX *tls_context(const char *cert, const char *key);
/* A descriptor limit of at least need, for that many connections. */
int reserve_descriptors(uint32_t connections, uint32_t need);

#endif
