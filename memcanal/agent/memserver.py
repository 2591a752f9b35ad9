"""A client of memcanal-memserver (hypervisor-patches/memserver), and the
registration of this host's memory server with the service.

A host lending idle memory runs a memory server ([pooling]
memserver_address); its agent asks the server what it holds (STAT) and
registers it with every report, so the service knows what it can lend.
The pager speaks the same protocol from C; this client is the agent's
and the tests'.
"""

import socket
import struct

PAGE = 4096
MAGIC = 0x534D434D
REQUEST = struct.Struct('<IB3xQQI4x')
REPLY = struct.Struct('<IB3xI4x')
STAT_BODY = struct.Struct('<QQ')
PUT, GET, DELETE, STAT, RECLAIM = 1, 2, 3, 4, 5
OK, MISSING, FULL, BAD_REQUEST = 0, 1, 2, 3
ALL = 2 ** 32 - 1


class MemserverError(Exception):
    """The memory server answered what its protocol does not allow."""


def parse_address(address):
    """(host, port) of ``HOST:PORT`` (IPv6 as ``[::1]:PORT``)."""
    host, _, port = address.rpartition(':')
    return host.strip('[]'), int(port)


class Client:
    """One connection to a memory server."""

    def __init__(self, address, timeout=10):
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def recv_exactly(self, size):
        chunks = []
        while size:
            chunk = self.sock.recv(size)
            if not chunk:
                raise ConnectionError('server closed the connection')
            chunks.append(chunk)
            size -= len(chunk)
        return b''.join(chunks)

    def call(self, op, owner=0, page=0, count=0, payload=b'', magic=MAGIC):
        """(status, count) of one request; its body is read by the caller."""
        self.sock.sendall(REQUEST.pack(magic, op, owner, page, count)
                          + payload)
        reply_magic, status, reply_count = REPLY.unpack(
            self.recv_exactly(REPLY.size))
        if reply_magic != MAGIC:
            raise MemserverError('bad magic %#x in a reply' % reply_magic)
        return status, reply_count

    def put(self, owner, page, data):
        return self.call(PUT, owner, page, len(data) // PAGE, data)

    def get(self, owner, page, count=1):
        """(status, data); data is None unless OK."""
        status, reply_count = self.call(GET, owner, page, count)
        if status != OK:
            return status, None
        if reply_count != count:
            raise MemserverError('asked %d pages, given %d' % (
                count, reply_count))
        return status, self.recv_exactly(count * PAGE)

    def delete(self, owner, page, count=1):
        return self.call(DELETE, owner, page, count)

    def reclaim(self, count):
        return self.call(RECLAIM, count=count)

    def stat(self):
        """(pages held, max pages, pages dropped so far)."""
        status, held = self.call(STAT)
        if status != OK:
            raise MemserverError('STAT answered status %d' % status)
        max_pages, dropped = STAT_BODY.unpack(self.recv_exactly(16))
        return held, max_pages, dropped


def registration(address, timeout=5):
    """The report's ``memserver`` field for the server at ``address``:
    its capacity and what it holds, as it says."""
    with Client(parse_address(address), timeout=timeout) as client:
        held, max_pages, _dropped = client.stat()
    return {'address': address, 'capacity_bytes': max_pages * PAGE,
            'used_bytes': held * PAGE}
