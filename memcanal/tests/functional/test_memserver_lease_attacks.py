"""Attacks on memcanal-memserver with lease tokens that should have
ended (issue #36, "Leases that end"), against the real server on
loopback.

Before #36 a token issued at time 0 was accepted, a lease whose pages
came back kept its token working, and 100 leases that disconnected kept
the arena full: the next lease's PUT got FULL until an operator's
RECLAIM. Now a token is good from its issued_at for its lifetime (capped
by the server's --max-token-lifetime), the operator (the lender's agent)
revokes a lease on the admin socket, and the pages of leases nobody is
connected to go back once their token expired --orphan-grace ago.
"""

import struct
import time
import uuid

import pytest

from memcanal.agent import memserver
from memcanal.agent import paging
from memcanal.agent.memserver import ALL
from memcanal.agent.memserver import FULL
from memcanal.agent.memserver import GET
from memcanal.agent.memserver import MAGIC
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import REQUEST
from memcanal.tests.functional import test_memserver_attacks as attacks

pytestmark = pytest.mark.functional

OWNER = paging.owner_of(str(uuid.uuid4()))
PAGES = b''.join(bytes([page]) * PAGE for page in range(4))
# Generous: CI machines are slow; nothing below asserts a duration.
PATIENCE = 120


directory = attacks.directory


@pytest.fixture(scope='module')
def server(directory):
    # --max-token-lifetime as by default: 86400.
    server = attacks.start(directory, 'leases', 64)
    yield server
    server.stop()


def hello_refused(server, token):
    with server.tls() as attacker:
        return attacks.refused(attacker.sock, REQUEST.pack(
            MAGIC, memserver.HELLO, 0, 0, len(token)) + token)


def until(condition, what):
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_a_token_issued_at_time_0_is_refused_as_expired(server):
    assert hello_refused(server, server.token(OWNER, issued_at=0))


def release_1_token(server, owner, issued_at):
    """A token as the service of the release before #36 signed it
    ("mclease1": no lifetime, a 64-byte borrower)."""
    body = struct.pack('<8s16sQQQ64s64s', b'mclease1', uuid.uuid4().bytes,
                       owner, 16, issued_at, b'borrower-host',
                       server.name.encode())
    return body + server.lease_key.sign(body)


def test_a_release_1_token_issued_at_time_0_is_refused_as_expired(server):
    """The audit's token: the server's maximum lifetime applies."""
    assert hello_refused(server, release_1_token(server, OWNER, 0))


def test_a_fresh_release_1_token_is_still_served(server):
    token = release_1_token(server, OWNER, int(time.time()))
    with memserver.connect_tls(server.address, server.ca, token) as client:
        assert client.put(OWNER, 0, PAGES[:PAGE]) == (OK, 1)


def test_a_token_past_its_own_lifetime_is_refused_as_expired(server):
    assert hello_refused(server, server.token(
        OWNER, issued_at=int(time.time()) - 7200, lifetime=3600))


def test_a_lifetime_beyond_the_servers_maximum_is_capped_expired(server):
    """A token stating ten years, issued two days ago, is past the
    server's maximum of one day."""
    assert hello_refused(server, server.token(
        OWNER, issued_at=int(time.time()) - 2 * 86400,
        lifetime=10 * 365 * 86400))


def test_a_token_not_valid_yet_is_refused_like_an_expired_one(server):
    assert hello_refused(server, server.token(
        OWNER, issued_at=int(time.time()) + 3600))


def test_a_connection_is_refused_once_its_token_expired(server):
    """A HELLO'd connection does not outlive its token."""
    issued_at = int(time.time())
    with server.client(OWNER, issued_at=issued_at, lifetime=3) as client:
        assert client.put(OWNER, 0, PAGES[:PAGE]) == (OK, 1)
        while time.time() < issued_at + 4:
            time.sleep(0.5)
        assert attacks.refused(client.sock, REQUEST.pack(
            MAGIC, GET, OWNER, 0, 1))


@pytest.fixture
def lease(server):
    """A lease of a VM of its own holding PAGES: (owner, token, client)."""
    owner = paging.owner_of(str(uuid.uuid4()))
    token = server.token(owner, 16, issued_at=int(time.time()) - 5)
    client = memserver.connect_tls(server.address, server.ca, token)
    assert client.put(owner, 0, PAGES) == (OK, 4)
    yield owner, token, client
    client.close()


def test_a_revoked_lease_token_is_refused(server, lease):
    owner, token, client = lease
    with server.admin() as admin:
        held = admin.stat()[0]
        assert admin.revoke(owner, int(time.time())) == (OK, 4)
        assert admin.stat()[0] == held - 4
    # The connection it had, and any new one with its token.
    assert attacks.refused(client.sock, REQUEST.pack(MAGIC, GET, owner, 0, 1))
    assert hello_refused(server, token)


def test_a_revoked_lease_stays_revoked_for_a_token_issued_before(server,
                                                                 lease):
    """A renewal issued before the revocation (on its way when the lease
    ended) is refused too; a new lease of the VM, issued after, is not."""
    owner, _token, _client = lease
    now = int(time.time())
    with server.admin() as admin:
        assert admin.revoke(owner, now)[0] == OK
    assert hello_refused(server, server.token(owner, 16, issued_at=now))
    with server.client(owner, 16, issued_at=now + 1) as again:
        assert again.get(owner, 0) == (memserver.MISSING, None)


def test_revoking_is_the_operators(server, lease):
    owner, _token, client = lease
    revoke = REQUEST.pack(MAGIC, memserver.REVOKE, owner, int(time.time()),
                          0)
    assert attacks.refused(client.sock, revoke)
    with server.tls() as other:
        assert attacks.refused(other.sock, revoke)
    with server.admin() as admin:
        assert admin.stat()[0] >= 4


def test_orphan_leases_expire_and_are_reclaimed(directory):
    """100 leases fill the arena and disconnect; once their tokens
    expired and the grace period passed, the next lease's PUT
    succeeds, without an operator's RECLAIM."""
    server = attacks.start(directory, 'orphans', 100,
                           '--orphan-grace', '1')
    try:
        for n in range(100):
            owner = paging.owner_of(str(uuid.uuid4()))
            with server.client(owner, 1, lifetime=2) as orphan:
                assert orphan.put(owner, 0, PAGES[:PAGE]) == (OK, 1)
        with server.admin() as admin:
            assert admin.stat()[0] == 100
        with server.client(OWNER, 4) as client:
            assert client.put(OWNER, 0, PAGES[:PAGE])[0] == FULL

            def stored():
                return client.put(OWNER, 0, PAGES[:PAGE]) == (OK, 1)
            until(stored, 'the orphans\' pages never went')
            assert client.get(OWNER, 0) == (OK, PAGES[:PAGE])
    finally:
        server.stop()


def test_an_expired_lease_with_a_connection_is_no_orphan(directory):
    """A lease some client is still connected to keeps its pages
    (its requests are refused until it says HELLO with a renewal)."""
    server = attacks.start(directory, 'connected', 16, '--orphan-grace',
                           '1', '--idle-timeout', '3600')
    try:
        lease = str(uuid.uuid4())
        with server.client(OWNER, 4, lease, lifetime=2) as client:
            assert client.put(OWNER, 0, PAGES) == (OK, 4)
            time.sleep(5)
            with server.admin() as admin:
                assert admin.stat()[0] == 4
            with server.client(OWNER, 4, lease) as renewed:
                assert renewed.get(OWNER, 0, 4) == (OK, PAGES)
        with server.admin() as admin:
            admin.reclaim(ALL)
    finally:
        server.stop()
