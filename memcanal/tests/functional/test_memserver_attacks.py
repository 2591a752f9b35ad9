"""Attacks on memcanal-memserver from the same host or network (issue
#25, findings 1 and 4), against the real server on loopback.

Before #25 a connection with no credentials read and overwrote any
VM's pages (its owner key comes from the VM's uuid, which tenants
know), RECLAIM from anyone dropped every VM's pages, and 150 idle
connections took a 16 MiB server to 634 MB and 152 threads. Now a
client gets nothing without TLS and a lease token the service signed
for this server; a token's holder reaches only its owner's pages and
evicts only its own; STAT and RECLAIM are root's, on the admin socket;
and the server's memory and threads stay bounded however many clients
come.
"""

import os
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import uuid

from cryptography.hazmat.primitives.asymmetric import ed25519
import pytest

from memcanal.agent import memserver
from memcanal.agent import paging
from memcanal.agent.memserver import ALL
from memcanal.agent.memserver import BAD_REQUEST
from memcanal.agent.memserver import DELETE
from memcanal.agent.memserver import GET
from memcanal.agent.memserver import MAGIC
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import PUT
from memcanal.agent.memserver import RECLAIM
from memcanal.agent.memserver import REFUSED
from memcanal.agent.memserver import REPLY
from memcanal.agent.memserver import REQUEST
from memcanal.agent.memserver import STAT
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services

pytestmark = pytest.mark.functional

MAX_PAGES = 256
VICTIM = paging.owner_of(str(uuid.uuid4()))
ATTACKER = paging.owner_of(str(uuid.uuid4()))
SECRET = b'ROOT_PASSWORD=hunter2\n'
VICTIM_PAGES = b''.join(SECRET.ljust(PAGE, bytes([page]))
                        for page in range(4))
NOBODY = 65534


@pytest.fixture(scope='module')
def directory():
    """A scratch directory others may traverse (to reach the admin
    socket and be refused by the server itself)."""
    if os.geteuid() != 0:
        services.missing('the admin socket answers root only')
    path = tempfile.mkdtemp(prefix='memserver-attacks-')
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def start(directory, name, max_pages=MAX_PAGES, *options):
    path = os.path.join(directory, name)
    os.mkdir(path)
    return memservers.Memserver(path, max_pages, *options)


@pytest.fixture(scope='module')
def server(directory):
    server = start(directory, 'shared')
    yield server
    server.stop()


@pytest.fixture
def victim(server):
    """A VM's pages, held under its lease, on an otherwise empty server;
    afterwards they must all be there still."""
    with server.admin() as admin:
        admin.reclaim(ALL)
    client = server.client(VICTIM, quota_pages=16)
    assert client.put(VICTIM, 0, VICTIM_PAGES) == (OK, 4)
    yield client
    assert client.get(VICTIM, 0, 4) == (OK, VICTIM_PAGES)
    client.close()


def drain(sock, timeout=30):
    """(what the server sent, whether it then closed the connection)."""
    sock.settimeout(timeout)
    chunks = []
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b''.join(chunks), True
            chunks.append(chunk)
    except (ConnectionError, ssl.SSLError):
        return b''.join(chunks), True
    except TimeoutError:
        return b''.join(chunks), False


def refused(sock, request, status=REFUSED):
    """Send request; 1 if the server answered only `status` and closed."""
    sock.sendall(request)
    data, closed = drain(sock)
    return closed and data == REPLY.pack(MAGIC, status, 0)


FORGED_PAGE = SECRET.replace(b'hunter2', b'letmein').ljust(PAGE, b'\0')
ATTACKS = {
    'read': REQUEST.pack(MAGIC, GET, VICTIM, 0, 1),
    'overwrite': REQUEST.pack(MAGIC, PUT, VICTIM, 0, 1) + FORGED_PAGE,
    'delete': REQUEST.pack(MAGIC, DELETE, VICTIM, 0, 4),
    'stat': REQUEST.pack(MAGIC, STAT, 0, 0, 0),
    'reclaim': REQUEST.pack(MAGIC, RECLAIM, 0, 0, ALL),
}


@pytest.mark.parametrize('attack', sorted(ATTACKS))
def test_a_plaintext_client_gets_nothing(server, victim, attack):
    with socket.create_connection(server.address) as sock:
        sock.sendall(ATTACKS[attack])
        data, closed = drain(sock)
    assert closed
    assert SECRET not in data
    assert not data.startswith(struct.pack('<I', MAGIC)), data


@pytest.mark.parametrize('attack', sorted(ATTACKS))
def test_tls_without_a_token_gets_nothing(server, victim, attack):
    with server.tls() as attacker:
        assert refused(attacker.sock, ATTACKS[attack])


def resign(server, token, offset, value):
    """The token with value at offset, signed again by the service's key
    (what a service bug or a replayed signature of another kind would
    give)."""
    body = token[:offset] + value + token[offset + len(value):176]
    return body + server.lease_key.sign(body)


BAD_TOKENS = {
    'signed by another key': lambda s: s.token(
        VICTIM, key=ed25519.Ed25519PrivateKey.generate()),
    'owner changed after signing': lambda s: (
        lambda token: token[:24] + struct.pack('<Q', VICTIM) + token[32:])(
        s.token(ATTACKER)),
    'quota raised after signing': lambda s: (
        lambda token: token[:32] + struct.pack('<Q', 2 ** 40) + token[40:])(
        s.token(VICTIM, quota_pages=1)),
    'no signature': lambda s: s.token(VICTIM)[:176] + bytes(64),
    'another format': lambda s: resign(s, s.token(VICTIM), 0, b'mclease9'),
    'for another server': lambda s: s.token(VICTIM, server='127.0.0.1:1'),
    'a server name without a NUL': lambda s: resign(
        s, s.token(VICTIM), 112, b'x' * 64),
}


@pytest.mark.parametrize('bad', sorted(BAD_TOKENS))
def test_a_bad_token_gets_nothing(server, victim, bad):
    token = BAD_TOKENS[bad](server)
    with server.tls() as attacker:
        assert refused(attacker.sock, REQUEST.pack(
            MAGIC, memserver.HELLO, 0, 0, len(token)) + token)


def test_a_truncated_token_gets_nothing(server, victim):
    token = server.token(VICTIM)[:200]
    with server.tls() as attacker:
        assert refused(attacker.sock, REQUEST.pack(
            MAGIC, memserver.HELLO, 0, 0, len(token)) + token, BAD_REQUEST)


@pytest.mark.parametrize('attack', ['read', 'overwrite', 'delete'])
def test_a_lease_reaches_only_its_owners_pages(server, victim, attack):
    with server.client(ATTACKER) as attacker:
        assert refused(attacker.sock, ATTACKS[attack])


@pytest.mark.parametrize('attack', ['stat', 'reclaim'])
def test_a_lease_cannot_stat_or_reclaim(server, victim, attack):
    with server.client(ATTACKER) as attacker:
        assert refused(attacker.sock, ATTACKS[attack])
    with server.admin() as admin:
        assert admin.stat()[0] == 4


def test_a_lease_evicts_only_its_own_pages(server, victim):
    """Writing many times the server's capacity under a lease as large
    as the server pushes out the writer's pages, never the victim's."""
    with server.client(ATTACKER, quota_pages=MAX_PAGES) as attacker:
        for first in range(0, 4 * MAX_PAGES, 64):
            assert attacker.put(ATTACKER, first, bytes(64 * PAGE)) == (
                OK, 64)
        with server.admin() as admin:
            assert admin.stat()[0] == MAX_PAGES
        assert attacker.get(ATTACKER, 3 * MAX_PAGES + 4,
                            MAX_PAGES - 4)[0] == OK


def test_a_lease_holds_a_bounded_number_of_connections(server, victim):
    token = server.token(ATTACKER)
    held = [memserver.connect_tls(server.address, server.ca, token)
            for _ in range(8)]
    with server.tls() as ninth:
        assert refused(ninth.sock, REQUEST.pack(
            MAGIC, memserver.HELLO, 0, 0, len(token)) + token)
    for client in held:
        client.close()


NOBODY_RECLAIM = '''
import socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(10)
try:
    sock.connect(sys.argv[1])
except PermissionError:
    print('permission denied')
    sys.exit()

def answer():
    data = b''
    try:
        while chunk := sock.recv(64):
            data += chunk
    except OSError:
        pass
    return data.hex() or 'nothing'

print(answer())  # the server tells one it refuses at once
try:
    sock.sendall(bytes.fromhex(sys.argv[2]))
except OSError:
    pass
print(answer())
'''


def reclaim_as_nobody(server):
    result = subprocess.run(
        ['/usr/bin/python3', '-c', NOBODY_RECLAIM, server.admin_path,
         ATTACKS['reclaim'].hex()], user=NOBODY, group=NOBODY,
        capture_output=True, text=True, timeout=30, check=True)
    return result.stdout.split()


def test_the_admin_socket_is_roots(server, victim):
    """0600 and root's; and should its mode ever open, the server asks
    the kernel who connects (SO_PEERCRED) and refuses anyone but root."""
    mode = os.stat(server.admin_path)
    assert (mode.st_mode & 0o777, mode.st_uid) == (0o600, 0)
    assert reclaim_as_nobody(server) == ['permission', 'denied']
    os.chmod(server.admin_path, 0o666)
    try:
        assert reclaim_as_nobody(server) == [
            REPLY.pack(MAGIC, REFUSED, 0).hex(), 'nothing']
    finally:
        os.chmod(server.admin_path, 0o600)
    with server.admin() as admin:
        assert admin.stat()[0] == 4


CAPACITY = 4096
MAX_CONNECTIONS = 256            # the default
# A connection's fixed part: its state (a page in, a page out) and an
# OpenSSL session with its two record buffers, rounded up.
CONNECTION_KIB = 64


def busy(client, owner, rounds=20, batch=16):
    for round_ in range(rounds):
        first = (round_ % 2) * batch
        data = os.urandom(batch * PAGE)
        assert client.put(owner, first, data) == (OK, batch)
        assert client.get(owner, first, batch) == (OK, data)


def test_idle_and_busy_connections_leave_memory_bounded(directory):
    """1,000 idle connections and 100 busy ones: one thread, at most
    --max-connections clients, and resident memory within the arena
    plus a fixed part per connection. The handshake caps are lifted (all
    come from 127.0.0.1): every slot may hold a client before HELLO."""
    server = start(directory, 'bounded', CAPACITY,
                   '--max-handshakes', str(MAX_CONNECTIONS),
                   '--max-handshakes-per-source', str(MAX_CONNECTIONS))
    try:
        baseline_kib, _, _ = memservers.process_status(server.process.pid)
        idle = [socket.create_connection(server.address)
                for _ in range(1000)]
        owners = [paging.owner_of(str(uuid.uuid4())) for _ in range(100)]
        clients = [server.client(owner, quota_pages=32)
                   for owner in owners]
        peak = [memservers.process_status(server.process.pid)]
        done = threading.Event()

        def watch():
            while not done.wait(0.05):
                peak.append(memservers.process_status(server.process.pid))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            services.race(*[
                lambda i=i: [busy(clients[j], owners[j])
                             for j in range(i, 100, 10)]
                for i in range(10)])
        finally:
            done.set()
            watcher.join()
        # Idle clients that did say HELLO fill what is left.
        idle_leases = []
        for _ in range(1000):
            try:
                idle_leases.append(server.client(ATTACKER, quota_pages=1,
                                                 lease=str(uuid.uuid4())))
            except (OSError, memserver.MemserverError):
                pass
        peak.append(memservers.process_status(server.process.pid))
        assert len(idle_leases) == MAX_CONNECTIONS - len(clients)
        resident_kib = max(kib for kib, _, _ in peak)
        bound_kib = baseline_kib + CAPACITY * PAGE // 1024 + (
            MAX_CONNECTIONS * CONNECTION_KIB)
        assert resident_kib <= bound_kib, (resident_kib, bound_kib)
        assert max(threads for _, threads, _ in peak) == 1
        assert max(fds for _, _, fds in peak) <= MAX_CONNECTIONS + 16
        for client in clients + idle_leases:
            client.close()
        for sock in idle:
            sock.close()
    finally:
        server.stop()


def test_idle_clients_are_closed(directory):
    """--idle-timeout closes a client that says nothing, before or after
    its HELLO."""
    server = start(directory, 'idle', MAX_PAGES, '--idle-timeout', '1')
    try:
        silent = socket.create_connection(server.address)
        authenticated = server.client(ATTACKER)
        assert drain(silent) == (b'', True)
        assert drain(authenticated.sock)[1]
    finally:
        server.stop()


def test_a_full_server_closes_unauthenticated_clients_first(directory):
    """At --max-connections a new client takes the place of the oldest
    that has not said HELLO; when all have, it is refused."""
    server = start(directory, 'capped', MAX_PAGES,
                   '--max-connections', '4')
    try:
        silent = [socket.create_connection(server.address)
                  for _ in range(4)]
        clients = [server.client(owner) for owner in range(1, 5)]
        for sock in silent:
            assert drain(sock) == (b'', True)
        with pytest.raises((OSError, memserver.MemserverError)):
            server.client(5)
        for owner, client in enumerate(clients, 1):
            assert client.put(owner, 0, bytes(PAGE)) == (OK, 1)
    finally:
        server.stop()


class Flood:
    """One thread opening TCP connections to ``address`` from
    ``source`` as fast as it can and holding the newest ``hold`` of
    them, saying nothing (issue 36: about 5,700 a second from one
    thread evicted pagers before their TLS and HELLO)."""

    def __init__(self, address, source='127.0.0.2', hold=2000):
        self.address, self.source, self.hold = address, source, hold
        self.opened = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        held = []
        while not self.stopping.is_set():
            sock = socket.socket()
            try:
                sock.bind((self.source, 0))
                sock.connect(self.address)
            except OSError:
                sock.close()
                continue
            self.opened += 1
            held.append(sock)
            if len(held) > self.hold:
                held.pop(0).close()
        for sock in held:
            sock.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(60)


def test_a_flood_of_unauthenticated_connections_lets_tokens_through(
        directory):
    """A flood of silent connections from one address holds at most
    --max-handshakes-per-source handshakes, so that clients with tokens
    from elsewhere still finish TLS and HELLO; the flood's own excess is
    closed at once."""
    server = start(directory, 'flood', MAX_PAGES, '--max-connections', '64')
    failed = []
    try:
        with Flood(server.address) as flood:
            while flood.opened < 500 and flood.thread.is_alive():
                threading.Event().wait(0.05)
            for owner in range(1, 32):
                try:
                    with server.client(owner) as client:
                        assert client.put(owner, 0, bytes(PAGE)) == (OK, 1)
                except (OSError, memserver.MemserverError) as e:
                    failed.append((owner, repr(e)))
            opened = flood.opened
    finally:
        server.stop()
    assert opened > 500
    assert failed == []
