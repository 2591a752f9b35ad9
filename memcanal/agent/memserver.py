"""A client of memcanal-memserver (hypervisor-patches/memserver), and the
registration of this host's memory server with the service.

A host lending idle memory runs a memory server ([pooling]
memserver_address). Pagers reach it over TLS 1.3 and present the lease
token the service signed (HELLO), which scopes their connection to one
owner and quota; what it holds overall (STAT) and taking memory back
(RECLAIM) are the operator's, on a local Unix socket only root may use
([pooling] memserver_admin_socket). The agent asks that socket and
registers the server with every report, so the service knows what it
can lend. The pager speaks the same protocol from C; this client is the
agent's and the tests'.
"""

import socket
import ssl
import struct

from memcanal import conf

PAGE = 4096
MAGIC = 0x534D434D
REQUEST = struct.Struct('<IB3xQQI4x')
REPLY = struct.Struct('<IB3xI4x')
STAT_BODY = struct.Struct('<QQ')
PUT, GET, DELETE, STAT, RECLAIM, HELLO, REVOKE = 1, 2, 3, 4, 5, 6, 7
OK, MISSING, FULL, BAD_REQUEST, REFUSED = 0, 1, 2, 3, 4
ALL = 2 ** 32 - 1


class MemserverError(Exception):
    """The memory server answered what its protocol does not allow, or
    refused what was asked."""


def parse_address(address):
    """(host, port) of ``HOST:PORT`` (IPv6 as ``[::1]:PORT``)."""
    host, _, port = address.rpartition(':')
    return host.strip('[]'), int(port)


class Client:
    """One connection to a memory server, over a connected stream
    socket (see connect, connect_tls, connect_admin)."""

    def __init__(self, sock):
        self.sock = sock

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

    def hello(self, token):
        """(status, quota pages) of presenting a lease token."""
        return self.call(HELLO, count=len(token), payload=token)

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

    def revoke(self, owner, revoked_at):
        """(status, pages dropped) of ending ``owner``'s leases at
        ``revoked_at`` (unix seconds, the service's clock; the
        operator's, on the admin socket): their pages go, and every
        token of ``owner`` issued at or before it is refused until it
        would have expired anyway; FULL if the server remembers too many
        revocations (the pages go all the same)."""
        return self.call(REVOKE, owner, revoked_at)

    def stat(self):
        """(pages held, max pages, pages dropped so far)."""
        status, held = self.call(STAT)
        if status != OK:
            raise MemserverError('STAT answered status %d' % status)
        max_pages, dropped = STAT_BODY.unpack(self.recv_exactly(16))
        return held, max_pages, dropped


def _tcp(address, timeout):
    sock = socket.create_connection(address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def connect(address, timeout=10):
    """A plaintext Client of the server at (host, port): only a server
    started with --insecure serves one."""
    return Client(_tcp(address, timeout))


def tls_context(ca_file):
    """The TLS a memory server's clients use: 1.3, the server's
    certificate checked against ca_file and the address's host."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_verify_locations(ca_file)
    return context


def connect_tls(address, ca_file, token=None, timeout=10):
    """A TLS Client of the server at (host, port), after a HELLO with
    ``token`` (the lease token's 240 bytes) if given; MemserverError if
    the server refuses it."""
    sock = tls_context(ca_file).wrap_socket(_tcp(address, timeout),
                                            server_hostname=address[0])
    client = Client(sock)
    if token is not None:
        status, _quota = client.hello(token)
        if status != OK:
            client.close()
            raise MemserverError('HELLO answered status %d' % status)
    return client


def connect_admin(path, timeout=10):
    """A Client of the server's admin socket (STAT, RECLAIM; root)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return Client(sock)


def registration(address, admin_socket=None, timeout=5):
    """The report's ``memserver`` field for the server at ``address``:
    its capacity and what it holds, as its admin socket (default
    [pooling] memserver_admin_socket) says."""
    if admin_socket is None:
        admin_socket = conf.CONF.pooling.memserver_admin_socket
    with connect_admin(admin_socket, timeout=timeout) as client:
        held, max_pages, _dropped = client.stat()
    return {'address': address, 'capacity_bytes': max_pages * PAGE,
            'used_bytes': held * PAGE}
