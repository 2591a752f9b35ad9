"""memcanal-memserver, the daemon that lends a host's idle memory.

The real server, built from hypervisor-patches/memserver with make and
started on a free loopback port, spoken to over TCP with the protocol of
its README (memcanal.agent.memserver's client). TMemCanal assumes remote
memory can be taken back at any moment: these tests check the server
drops pages when full, on RECLAIM and on SIGUSR1, says so in STAT, and
keeps serving everyone else when one client sends garbage.

Run as a script it prints PUT and GET pages/s over loopback.
"""

import os
import signal
import struct
import time

import pytest

from memcanal.agent import memserver
from memcanal.agent.memserver import ALL
from memcanal.agent.memserver import BAD_REQUEST
from memcanal.agent.memserver import Client
from memcanal.agent.memserver import FULL
from memcanal.agent.memserver import GET
from memcanal.agent.memserver import MAGIC
from memcanal.agent.memserver import MISSING
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import PUT
from memcanal.agent.memserver import REPLY
from memcanal.agent.memserver import REQUEST
from memcanal.tests.functional import services

pytestmark = pytest.mark.functional

MAX_PAGES = 256


def pages(owner, first, count):
    """``count`` distinct pages whose bytes name owner and page."""
    return b''.join(struct.pack('<QQ', owner, page) * (PAGE // 16)
                    for page in range(first, first + count))


@pytest.fixture(scope='module')
def server():
    process, address = services.start_memserver(MAX_PAGES)
    yield process, address
    process.terminate()
    process.wait(10)


@pytest.fixture
def client(server):
    """A client of an emptied server (tests share one server)."""
    connection = Client(server[1])
    connection.reclaim(ALL)
    yield connection
    connection.close()


def test_put_get_round_trip_across_two_owners(client):
    for owner in (1, 2):
        for first in range(0, 100, 20):
            assert client.put(owner, first, pages(owner, first, 20)) == (
                OK, 20)
    assert client.stat()[0] == 200
    for owner in (1, 2):
        status, data = client.get(owner, 0, 100)
        assert status == OK
        assert data == pages(owner, 0, 100)
        assert client.get(owner, 37) == (OK, pages(owner, 37, 1))


def test_put_overwrites_a_page(client):
    client.put(7, 5, pages(7, 0, 1))
    client.put(7, 5, pages(7, 5, 1))
    assert client.get(7, 5) == (OK, pages(7, 5, 1))
    assert client.stat()[0] == 1


def test_missing_pages(client):
    client.put(3, 10, pages(3, 10, 2))
    assert client.get(3, 12) == (MISSING, None)
    assert client.get(4, 10) == (MISSING, None), 'another owner'
    # All or nothing: one missing page fails the whole range.
    assert client.get(3, 10, 3) == (MISSING, None)
    assert client.delete(3, 10, 5) == (OK, 2)
    assert client.get(3, 10) == (MISSING, None)
    assert client.stat()[0] == 0


def test_bound_drops_the_oldest_pages(client):
    _, max_pages, dropped_before = client.stat()
    assert max_pages == MAX_PAGES
    for first in range(0, MAX_PAGES + 16, 16):
        client.put(5, first, pages(5, first, 16))
    held, _, dropped = client.stat()
    assert held == MAX_PAGES
    assert dropped - dropped_before == 16
    assert client.get(5, 15) == (MISSING, None)
    assert client.get(5, 16, MAX_PAGES) == (OK, pages(5, 16, MAX_PAGES))
    # More than the server can ever hold is refused, and the payload is
    # consumed: the connection goes on.
    too_many = MAX_PAGES + 1
    assert client.put(6, 0, bytes(too_many * PAGE)) == (FULL, 0)
    assert client.get(6, 0) == (MISSING, None)
    assert client.stat()[0] == MAX_PAGES


def test_reclaim_drops_the_oldest(client):
    _, _, dropped_before = client.stat()
    client.put(8, 0, pages(8, 0, 30))
    client.put(8, 0, pages(8, 0, 5))     # rewritten: now the newest
    assert client.reclaim(10) == (OK, 10)
    held, _, dropped = client.stat()
    assert (held, dropped - dropped_before) == (20, 10)
    assert client.get(8, 0, 5) == (OK, pages(8, 0, 5))
    assert client.get(8, 5) == (MISSING, None)
    assert client.get(8, 15, 15) == (OK, pages(8, 15, 15))
    assert client.reclaim(ALL) == (OK, 20)
    assert client.reclaim(1) == (OK, 0)


def anonymous_kib(pid):
    """Resident anonymous memory of process ``pid``, in KiB."""
    for line in open('/proc/%d/status' % pid):
        if line.startswith('RssAnon:'):
            return int(line.split()[1])
    raise AssertionError('no RssAnon for %d' % pid)


def test_sigusr1_drops_every_page(server, client):
    """Every page goes and the host gets the arena's memory back."""
    process, _ = server
    _, _, dropped_before = client.stat()
    client.put(9, 0, pages(9, 0, MAX_PAGES))
    full = anonymous_kib(process.pid)
    process.send_signal(signal.SIGUSR1)
    services.wait_for(lambda: client.stat()[0] == 0, timeout=10,
                      what='SIGUSR1 to drop the pages')
    assert client.stat()[2] - dropped_before == MAX_PAGES
    assert full - anonymous_kib(process.pid) >= MAX_PAGES * 4 * 0.9
    assert client.get(9, 0) == (MISSING, None)
    assert client.put(9, 0, pages(9, 0, 1)) == (OK, 1)


@pytest.mark.parametrize('header', [
    REQUEST.pack(0xDEADBEEF, GET, 1, 0, 1),   # bad magic
    REQUEST.pack(MAGIC, 9, 1, 0, 1),          # unknown op
    REQUEST.pack(MAGIC, GET, 1, 0, 0),        # no pages
    REQUEST.pack(MAGIC, PUT, 1, 0, 1025),     # over the 1024-page batch
    REQUEST.pack(MAGIC, GET, 1, 2 ** 64 - 1, 2),  # page range wraps
])
def test_bad_request_closes_only_that_client(server, client, header):
    client.put(11, 0, pages(11, 0, 1))
    bad = Client(server[1])
    bad.sock.sendall(header)
    assert REPLY.unpack(bad.recv_exactly(REPLY.size)) == (
        MAGIC, BAD_REQUEST, 0)
    assert bad.sock.recv(1) == b'', 'the bad client stays connected'
    bad.close()
    assert client.get(11, 0) == (OK, pages(11, 0, 1))


def test_clients_that_vanish_mid_request(server, client):
    for partial in (REQUEST.pack(MAGIC, PUT, 12, 0, 4)[:20],
                    REQUEST.pack(MAGIC, PUT, 12, 0, 4) + bytes(PAGE)):
        gone = Client(server[1])
        gone.sock.sendall(partial)
        gone.close()
    client.put(12, 0, pages(12, 0, 1))
    assert client.get(12, 0) == (OK, pages(12, 0, 1))
    assert client.get(12, 1) == (MISSING, None)


def test_two_concurrent_clients(server, client):
    def churn(owner):
        connection = Client(server[1])
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
    assert client.stat()[0] == 0


def test_registration_reports_capacity_and_what_is_held(server, client):
    """What an agent registers its host's memory server with."""
    client.put(13, 0, pages(13, 0, 3))
    address = '%s:%d' % server[1]
    assert memserver.registration(address) == {
        'address': address, 'capacity_bytes': MAX_PAGES * PAGE,
        'used_bytes': 3 * PAGE}


def throughput(rounds=2000, batch=16):
    """Print PUT and GET pages/s of one client over loopback."""
    process, address = services.start_memserver(rounds * batch)
    try:
        client = Client(address)
        data = os.urandom(batch * PAGE)
        start = time.perf_counter()
        for round_ in range(rounds):
            client.put(1, round_ * batch, data)
        put_rate = rounds * batch / (time.perf_counter() - start)
        start = time.perf_counter()
        for round_ in range(rounds):
            client.get(1, round_ * batch, batch)
        get_rate = rounds * batch / (time.perf_counter() - start)
        single = time.perf_counter()
        for page in range(rounds):
            client.get(1, page)
        single_rate = rounds / (time.perf_counter() - single)
        print('loopback, %d-page requests: PUT %.0f pages/s, GET %.0f '
              'pages/s; 1-page GET %.0f pages/s (%.1f us round trip)'
              % (batch, put_rate, get_rate, single_rate,
                 1e6 / single_rate))
    finally:
        process.terminate()
        process.wait(10)


if __name__ == '__main__':
    throughput()
