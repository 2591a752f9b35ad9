"""The pager's memory-server stores (hypervisor-patches/pager/store_tcp.c
and store_tls.c) against the real server, through memserver-client's
shell (hypervisor-patches/memserver/memserver_client.c): a store over
TLS checks the server's certificate and host and presents its lease
token, and its calls fail as the pager expects (ENOENT when that copy is
gone, ETIMEDOUT or ECONNRESET when the server is).
"""

import base64
import os
import signal
import subprocess

import pytest

from memcanal.tests.functional import memservers
from memcanal.tests.functional import services

pytestmark = pytest.mark.functional

CLIENT = os.path.join(services.MEMSERVER_SOURCE, 'memserver-client')
OWNER = 77


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    if os.geteuid() != 0:
        services.missing('the admin socket answers root only')
    server = memservers.Memserver(str(tmp_path_factory.mktemp('client')),
                                  4096)
    yield server
    server.stop()


def shell(server, commands, tmp_path, token=None, host=None, ca=None):
    """The answers of memserver-client's shell to ``commands`` (lines),
    on a tls: store of ``server`` with ``token`` (default: a lease of
    OWNER), reached at ``host`` (default 127.0.0.1)."""
    tokens = write_tokens(os.path.join(str(tmp_path), 'tokens'),
                          token or server.token(OWNER))
    store = 'tls:%s:%d' % (host or server.address[0], server.address[1])
    return subprocess.run(
        [CLIENT, '--store', store, '--ca', ca or server.ca, '--tokens',
         tokens, 'shell'], input=''.join(line + '\n' for line in commands),
        capture_output=True, text=True, timeout=60).stdout.split('\n')[:-1]


def test_pages_round_trip_and_missing_ones_are_enoent(server, tmp_path):
    assert shell(server, [
        'put 0 64 7', 'get 5 7', 'get 63 7', 'get 5 8', 'get 64 7',
        'del 0 64', 'get 5 7'], tmp_path=tmp_path) == [
        'open ok', 'ok', 'ok', 'ok', 'mismatch', 'ENOENT', 'ok', 'ENOENT']


def test_a_batch_past_the_lease_quota_is_refused(server, tmp_path):
    assert shell(server, ['put 0 8 1', 'put 8 9 1', 'get 7 1'],
                 token=server.token(OWNER, quota_pages=8),
                 tmp_path=tmp_path) == ['open ok', 'ok', 'ENOENT', 'ok']


def test_a_server_the_ca_did_not_sign_is_refused(server, tmp_path):
    other_ca, _, _ = memservers.make_pki(str(tmp_path))
    assert shell(server, [], ca=other_ca, tmp_path=tmp_path) == [
        'open EPROTO']


def test_a_certificate_for_another_host_is_refused(server, tmp_path):
    # The certificate names 127.0.0.1, not localhost.
    assert shell(server, [], host='localhost', tmp_path=tmp_path) == [
        'open EPROTO']


def test_a_refused_token_fails_the_store(server, tmp_path):
    token = server.token(OWNER, server='127.0.0.1:1')
    assert shell(server, [], token=token, tmp_path=tmp_path) == [
        'open EACCES']


def write_tokens(path, *tokens):
    with open(path, 'w') as out:
        out.writelines(base64.b64encode(token).decode() + '\n'
                       for token in tokens)
    return path


@pytest.mark.parametrize('signum, error', [
    (signal.SIGKILL, 'ECONNRESET'),   # gone: the store is down
    (signal.SIGSTOP, 'ETIMEDOUT'),    # frozen: a fault waits 2 s, once
])
def test_a_server_gone_is_a_store_down(tmp_path, signum, error):
    server = memservers.Memserver(str(tmp_path), 256)
    tokens = write_tokens(str(tmp_path / 'tokens'), server.token(OWNER))
    client = subprocess.Popen(
        [CLIENT, '--store', 'tls:%s' % server.name, '--ca', server.ca,
         '--tokens', tokens, 'shell'], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)

    def ask(command):
        client.stdin.write(command + '\n')
        client.stdin.flush()
        return client.stdout.readline().strip()

    try:
        assert client.stdout.readline() == 'open ok\n'
        assert ask('put 0 4 1') == 'ok'
        assert ask('get 3 1') == 'ok'
        server.process.send_signal(signum)
        assert ask('get 2 1') == error
    finally:
        client.stdin.close()
        client.wait(30)
        server.process.send_signal(signal.SIGCONT)
        server.stop()


def test_the_plaintext_store_of_insecure_servers(tmp_path):
    """pager_tcp_store, for the tests of tcp: stores, as before."""
    process, address = services.start_memserver(256)
    try:
        answers = subprocess.run(
            [CLIENT, '--store', 'tcp:%s:%d' % address, 'shell'],
            input='put 0 4 1\nget 3 1\nget 4 1\n', capture_output=True,
            text=True, timeout=60).stdout.split()
        assert answers == ['open', 'ok', 'ok', 'ok', 'ENOENT']
    finally:
        process.terminate()
        process.wait(10)
