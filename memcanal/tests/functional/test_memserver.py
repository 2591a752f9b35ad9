"""memcanal-memserver, the daemon that lends a host's idle memory.

The real server, built from hypervisor-patches/memserver with make and
started on a free loopback port with TLS, a test CA and a test service
key (memservers.Memserver), spoken to with the protocol of its README
(memcanal.agent.memserver's client): pagers over TLS after a HELLO with
their lease token, the operator on the admin socket. TMemCanal assumes
remote memory can be taken back at any moment: these tests check the
server drops pages past a lease's quota, on RECLAIM and on SIGUSR1, says
so in STAT, and keeps serving everyone else when one client sends
garbage. What it refuses to whom: test_memserver_attacks.py.
"""

import os
import signal
import struct
import subprocess

import pytest

from memcanal.agent import memserver
from memcanal import conf
from memcanal.agent.memserver import ALL
from memcanal.agent.memserver import BAD_REQUEST
from memcanal.agent.memserver import FULL
from memcanal.agent.memserver import GET
from memcanal.agent.memserver import MAGIC
from memcanal.agent.memserver import MISSING
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import PUT
from memcanal.agent.memserver import REPLY
from memcanal.agent.memserver import REQUEST
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services

pytestmark = pytest.mark.functional

MAX_PAGES = 256


def pages(owner, first, count):
    """``count`` distinct pages whose bytes name owner and page."""
    return b''.join(struct.pack('<QQ', owner, page) * (PAGE // 16)
                    for page in range(first, first + count))


def require_root():
    if os.geteuid() != 0:
        services.missing('the admin socket answers root only')


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    require_root()
    server = memservers.Memserver(str(tmp_path_factory.mktemp('memserver')),
                                  MAX_PAGES)
    yield server
    server.stop()


@pytest.fixture
def admin(server):
    """The operator's connection to an emptied server (tests share
    one server)."""
    connection = server.admin()
    connection.reclaim(ALL)
    yield connection
    connection.close()


def test_put_get_round_trip_across_two_owners(server, admin):
    clients = {owner: server.client(owner) for owner in (1, 2)}
    for owner, client in clients.items():
        for first in range(0, 100, 20):
            assert client.put(owner, first, pages(owner, first, 20)) == (
                OK, 20)
    assert admin.stat()[0] == 200
    for owner, client in clients.items():
        status, data = client.get(owner, 0, 100)
        assert status == OK
        assert data == pages(owner, 0, 100)
        assert client.get(owner, 37) == (OK, pages(owner, 37, 1))
        client.close()


def test_put_overwrites_a_page(server, admin):
    client = server.client(7)
    client.put(7, 5, pages(7, 0, 1))
    client.put(7, 5, pages(7, 5, 1))
    assert client.get(7, 5) == (OK, pages(7, 5, 1))
    assert admin.stat()[0] == 1


def test_missing_pages(server, admin):
    client = server.client(3)
    client.put(3, 10, pages(3, 10, 2))
    assert client.get(3, 12) == (MISSING, None)
    # All or nothing: one missing page fails the whole range.
    assert client.get(3, 10, 3) == (MISSING, None)
    assert client.delete(3, 10, 5) == (OK, 2)
    assert client.get(3, 10) == (MISSING, None)
    assert admin.stat()[0] == 0


def test_a_lease_past_its_quota_drops_its_oldest_pages(server, admin):
    quota = 32
    client = server.client(5, quota_pages=quota)
    dropped_before = admin.stat()[2]
    for first in range(0, quota + 16, 16):
        assert client.put(5, first, pages(5, first, 16)) == (OK, 16)
    held, _, dropped = admin.stat()
    assert (held, dropped - dropped_before) == (quota, 16)
    assert client.get(5, 15) == (MISSING, None)
    assert client.get(5, 16, quota) == (OK, pages(5, 16, quota))
    # More than the lease may ever hold is refused, and the payload is
    # read: the connection goes on.
    assert client.put(5, 100, bytes((quota + 1) * PAGE)) == (FULL, 0)
    assert client.get(5, 100) == (MISSING, None)
    assert client.get(5, 47) == (OK, pages(5, 47, 1))


def test_the_owner_keeps_its_pages_under_a_new_lease(server, admin):
    """A VM paged further gets a new lease on the same server: its
    pages stay its own, charged to the lease that wrote them last."""
    first = server.client(6, quota_pages=8)
    first.put(6, 0, pages(6, 0, 8))
    second = server.client(6, quota_pages=4)
    assert second.get(6, 0, 8) == (OK, pages(6, 0, 8))
    # Rewritten under the second lease: its quota of 4 holds the newest;
    # pages 6 and 7 stay the first lease's.
    assert second.put(6, 0, pages(6, 0, 3)) == (OK, 3)
    assert second.put(6, 3, pages(6, 3, 3)) == (OK, 3)
    assert second.get(6, 2, 6) == (OK, pages(6, 2, 6))
    assert second.get(6, 1) == (MISSING, None)
    assert admin.stat()[0] == 6


def test_a_full_server_drops_only_the_writers_pages(server, admin):
    """The arena full of others' pages: a lease makes room among its own
    pages only, and one with none there is refused."""
    big = server.client(8, quota_pages=MAX_PAGES)
    big.put(8, 0, pages(8, 0, 200))
    writer = server.client(9, quota_pages=MAX_PAGES)
    assert writer.put(9, 0, pages(9, 0, 100)) == (OK, 100)
    assert admin.stat()[0] == MAX_PAGES
    assert big.get(8, 0, 200) == (OK, pages(8, 0, 200))
    assert writer.get(9, 44, 56) == (OK, pages(9, 44, 56))
    assert writer.get(9, 43) == (MISSING, None)
    latecomer = server.client(10, quota_pages=MAX_PAGES)
    assert latecomer.put(10, 0, pages(10, 0, 1)) == (FULL, 0)


def test_reclaim_drops_the_oldest(server, admin):
    client = server.client(8)
    dropped_before = admin.stat()[2]
    client.put(8, 0, pages(8, 0, 30))
    client.put(8, 0, pages(8, 0, 5))     # rewritten: now the newest
    assert admin.reclaim(10) == (OK, 10)
    held, _, dropped = admin.stat()
    assert (held, dropped - dropped_before) == (20, 10)
    assert client.get(8, 0, 5) == (OK, pages(8, 0, 5))
    assert client.get(8, 5) == (MISSING, None)
    assert client.get(8, 15, 15) == (OK, pages(8, 15, 15))
    assert admin.reclaim(ALL) == (OK, 20)
    assert admin.reclaim(1) == (OK, 0)


def anonymous_kib(pid):
    """Resident anonymous memory of process ``pid``, in KiB."""
    for line in open('/proc/%d/status' % pid):
        if line.startswith('RssAnon:'):
            return int(line.split()[1])
    raise AssertionError('no RssAnon for %d' % pid)


def test_sigusr1_drops_every_page(server, admin):
    """Every page goes and the host gets the arena's memory back."""
    client = server.client(9, quota_pages=MAX_PAGES)
    dropped_before = admin.stat()[2]
    client.put(9, 0, pages(9, 0, MAX_PAGES))
    full = anonymous_kib(server.process.pid)
    server.process.send_signal(signal.SIGUSR1)
    services.wait_for(lambda: admin.stat()[0] == 0, timeout=10,
                      what='SIGUSR1 to drop the pages')
    assert admin.stat()[2] - dropped_before == MAX_PAGES
    assert full - anonymous_kib(server.process.pid) >= MAX_PAGES * 4 * 0.9
    assert client.get(9, 0) == (MISSING, None)
    assert client.put(9, 0, pages(9, 0, 1)) == (OK, 1)


@pytest.mark.parametrize('header', [
    REQUEST.pack(0xDEADBEEF, GET, 11, 0, 1),   # bad magic
    REQUEST.pack(MAGIC, 9, 11, 0, 1),          # unknown op
    REQUEST.pack(MAGIC, GET, 11, 0, 0),        # no pages
    REQUEST.pack(MAGIC, PUT, 11, 0, 1025),     # over the 1024-page batch
    REQUEST.pack(MAGIC, GET, 11, 2 ** 64 - 1, 2),  # page range wraps
])
def test_bad_request_closes_only_that_client(server, admin, header):
    client = server.client(11)
    client.put(11, 0, pages(11, 0, 1))
    bad = server.client(11)
    bad.sock.sendall(header)
    assert REPLY.unpack(bad.recv_exactly(REPLY.size)) == (
        MAGIC, BAD_REQUEST, 0)
    assert bad.sock.recv(1) == b'', 'the bad client stays connected'
    bad.close()
    assert client.get(11, 0) == (OK, pages(11, 0, 1))


def test_clients_that_vanish_mid_request(server, admin):
    """A PUT cut short keeps the pages that arrived whole, and nothing
    of the others."""
    for partial in (REQUEST.pack(MAGIC, PUT, 12, 0, 4)[:20],
                    REQUEST.pack(MAGIC, PUT, 12, 0, 4)
                    + pages(12, 0, 1) + bytes(PAGE // 2)):
        gone = server.client(12)
        gone.sock.sendall(partial)
        gone.close()
    client = server.client(12)
    assert client.get(12, 0) == (OK, pages(12, 0, 1))
    assert client.get(12, 1) == (MISSING, None)


def test_two_concurrent_clients(server, admin):
    def churn(owner):
        connection = server.client(owner)
        try:
            for round_ in range(200):
                first = (round_ % 10) * 8
                data = pages(owner, first + round_, 8)
                assert connection.put(owner, first, data) == (OK, 8)
                assert connection.get(owner, first, 8) == (OK, data)
            return connection.delete(owner, 0, 80)
        finally:
            connection.close()

    assert services.race(lambda: churn(21), lambda: churn(22)) == [
        (OK, 80), (OK, 80)]
    assert admin.stat()[0] == 0


@pytest.fixture
def admin_socket_option(server):
    """[pooling] memserver_admin_socket naming the server's, as on the
    agent's host."""
    conf.CONF.set_override('memserver_admin_socket', server.admin_path,
                           group='pooling')
    yield
    conf.CONF.clear_override('memserver_admin_socket', group='pooling')


def test_registration_reports_capacity_and_what_is_held(
        server, admin, admin_socket_option):
    """What an agent registers its host's memory server with, from the
    admin socket its configuration names."""
    server.client(13).put(13, 0, pages(13, 0, 3))
    assert memserver.registration(server.name) == {
        'address': server.name, 'capacity_bytes': MAX_PAGES * PAGE,
        'used_bytes': 3 * PAGE}


def test_plaintext_takes_insecure():
    """Without a certificate, key and lease key, the server does not
    start; --insecure serves the pre-#25 protocol (the tcp: stores of
    older tests), STAT and RECLAIM included."""
    binary = os.path.join(services.MEMSERVER_SOURCE, 'memcanal-memserver')
    subprocess.run(['make', '-s', '-C', services.MEMSERVER_SOURCE],
                   check=True)
    refused = subprocess.run([binary, '--listen', '127.0.0.1:0'],
                             capture_output=True, text=True, timeout=10)
    assert refused.returncode == 2
    assert '--insecure for plaintext' in refused.stderr
    process, address = services.start_memserver(MAX_PAGES, '--insecure')
    try:
        with memserver.connect(address) as client:
            assert client.put(14, 0, pages(14, 0, 2)) == (OK, 2)
            assert client.get(14, 1) == (OK, pages(14, 1, 1))
            assert client.stat()[0] == 2
            assert client.reclaim(ALL) == (OK, 2)
    finally:
        process.terminate()
        process.wait(10)
