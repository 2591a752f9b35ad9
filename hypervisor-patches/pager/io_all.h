/*
 * A whole buffer through a descriptor, for memcanal-pager (guest.c),
 * libpager (store_file.c) and QEMU's side of the handoff (handoff.c, in
 * the shim and the plugin, which link no libpager): inline, so that
 * each compiles its own.
 */
#ifndef IO_ALL_H
#define IO_ALL_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * One call of a transfer, as read(2), send(2) or pwrite(2) make it: len
 * bytes at buf, at bytes past the transfer's start (for pwrite; the
 * others ignore it).  A writing step only reads buf.
 */
typedef ssize_t (*io_step)(int fd, void *buf, size_t len, off_t at);

/*
 * The len bytes at buf moved by step, each call going on where the last
 * stopped, one a signal interrupted made again: 0, or -1 on an error or
 * an end of file.
 */
static inline int io_all(io_step step, int fd, void *buf, size_t len,
			 off_t at)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = step(fd, (char *)buf + done, len - done, at + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += n;
	}
	return 0;
}

#endif
