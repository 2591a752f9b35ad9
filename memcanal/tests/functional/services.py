"""Where the real services for functional tests are, and how to get them.

tools/run-tests.sh starts RabbitMQ, MariaDB and PostgreSQL and sets
MEMCANAL_REQUIRE_SERVICES=1, so in CI a missing service fails the test.
Run bare, without that variable, a missing service skips the test with
the reason, so unit work stays possible on a laptop.
"""

import contextlib
import functools
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest
import sqlalchemy as sa

from memcanal.agent import guest_runs

# Each pytest-xdist worker has a virtual host of its own on the local
# RabbitMQ (require_rabbit makes it afresh): oslo.messaging names an RPC
# server's queue after its topic alone, so services on one virtual host
# share one queue whatever their control_exchange, and the tests running
# side by side would take each other's messages.
XDIST_VHOST = ('memcanal-%s' % os.environ['PYTEST_XDIST_WORKER']
               if 'PYTEST_XDIST_WORKER' in os.environ
               and 'MEMCANAL_TEST_RABBIT_URL' not in os.environ else None)
RABBIT_URL = os.environ.get('MEMCANAL_TEST_RABBIT_URL',
                            'rabbit://guest:guest@127.0.0.1:5672/%s' % (
                                XDIST_VHOST or ''))
MYSQL_ADMIN_URL = os.environ.get('MEMCANAL_TEST_MYSQL_URL',
                                 'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRES_ADMIN_URL = os.environ.get(
    'MEMCANAL_TEST_POSTGRES_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres')

# The tooz backend of the tests of several service processes
# (tools/start-services.sh starts Redis).
REDIS_URL = os.environ.get('MEMCANAL_TEST_REDIS_URL',
                           'redis://127.0.0.1:6379')


def wait_for(predicate, timeout=60, what='condition', interval=0.2):
    """``predicate()`` once it is true, polled every ``interval``
    seconds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail('timed out waiting for %s' % what)


def race(*calls, timeout=120):
    """Run ``calls`` at once, each from a thread of its own; their
    results, or the exceptions they raised, in order."""
    barrier = threading.Barrier(len(calls))
    outcomes = [None] * len(calls)

    def run(index, call):
        barrier.wait()
        try:
            outcomes[index] = call()
        except Exception as exc:  # the caller asserts on it
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(index, call))
               for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return outcomes


def lines_of(stream):
    """A queue the lines of ``stream`` arrive on (None at its end), read
    by a thread: a process's output, waited on with a timeout."""
    lines = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return lines


def missing(message):
    """Skip the test, or fail it under MEMCANAL_REQUIRE_SERVICES."""
    if os.environ.get('MEMCANAL_REQUIRE_SERVICES'):
        pytest.fail(message)
    pytest.skip(message)


def require(host, port, what):
    """Skip (or fail) if nothing listens."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as err:
        missing('%s is not reachable on %s:%d: %s' % (what, host, port, err))


def require_redis():
    """The tooz backend's URL, once Redis answers on its port."""
    address = urllib.parse.urlsplit(REDIS_URL)
    require(address.hostname or '127.0.0.1', address.port or 6379, 'Redis')
    return REDIS_URL


def require_rabbit():
    require('127.0.0.1', 5672, 'RabbitMQ')
    if XDIST_VHOST:
        _make_vhost(XDIST_VHOST)
    return RABBIT_URL


@functools.cache
def _make_vhost(name):
    """Virtual host ``name``, empty (what an earlier run left in it is
    deleted), open to guest; once a process."""
    for command in (['delete_vhost', name], ['add_vhost', name],
                    ['set_permissions', '-p', name, 'guest', '.*', '.*',
                     '.*']):
        done = subprocess.run(['rabbitmqctl', '-q', *command],
                              capture_output=True, text=True)
        if done.returncode and command[0] != 'delete_vhost':
            missing('rabbitmqctl %s: %s' % (' '.join(command),
                                            done.stderr.strip()))


def _scratch_database(admin_url, port, what, quote):
    """Create a uniquely named empty database; yield its URL; drop it."""
    require('127.0.0.1', port, what)
    name = 'memcanal_test_%s' % uuid.uuid4().hex[:12]
    admin = sa.create_engine(admin_url, isolation_level='AUTOCOMMIT')
    with admin.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE %s' % quote(name)))
    url = sa.engine.make_url(admin_url).set(database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text('DROP DATABASE IF EXISTS %s' % quote(name)))
        admin.dispose()


def mysql_database():
    yield from _scratch_database(MYSQL_ADMIN_URL, 3306, 'MariaDB',
                                 lambda name: '`%s`' % name)


def postgres_database():
    yield from _scratch_database(POSTGRES_ADMIN_URL, 5432, 'PostgreSQL',
                                 lambda name: '"%s"' % name)


KEYSTONE_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                               'tools', 'keystone.sh')
KEYSTONE_VENV = os.environ.get('MEMCANAL_KEYSTONE_VENV', os.path.join(
    os.path.dirname(KEYSTONE_SCRIPT), '..', '.keystone-venv'))
KEYSTONE_ADMIN_PASSWORD = 'memcanal-test'


def free_port():
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def keystone(state_dir):
    """Serve a fresh keystone (tools/keystone.sh); yield its URL; stop it.

    Needs the virtualenv ``tools/keystone.sh install`` makes; without it
    the test skips (fails under MEMCANAL_REQUIRE_SERVICES).
    """
    if not os.path.exists(os.path.join(KEYSTONE_VENV, 'bin',
                                       'keystone-manage')):
        missing('keystone is not installed in %s; run tools/keystone.sh '
                'install' % KEYSTONE_VENV)
    port = free_port()
    with serving('keystone', ['bash', KEYSTONE_SCRIPT, 'serve',
                              str(state_dir), str(port)], port, state_dir,
                 seconds=120, env=dict(
                     os.environ, KEYSTONE_VENV=KEYSTONE_VENV,
                     KEYSTONE_ADMIN_PASSWORD=KEYSTONE_ADMIN_PASSWORD)):
        yield 'http://127.0.0.1:%d/v3' % port


@contextlib.contextmanager
def serving(name, command, port, state_dir, seconds=60, **popen):
    """Run a server ``command`` in its own process group until it listens
    on ``port`` (failing the test, with its output, if it does not within
    ``seconds``); stop it when the block ends. Its output goes to
    ``<state_dir>/<name>.out``."""
    log_path = os.path.join(state_dir, '%s.out' % name)
    log = open(log_path, 'wb')
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, **popen)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and process.poll() is None:
            try:
                socket.create_connection(('127.0.0.1', port), 1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            log.flush()
            with open(log_path) as output:
                pytest.fail('%s did not start:\n%s' % (name, output.read()))
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
        log.close()


TEST_GUEST_DIR = os.environ.get(
    'MEMCANAL_TEST_GUEST_DIR',
    os.path.join(os.path.dirname(__file__), '..', '..', '..', 'build',
                 'test-guest'))


def require_test_guest():
    """The test guest and the memtrace plugin that
    tools/build-test-guest.sh builds, by file name, and QEMU to run them;
    skip (or fail) if any is missing."""
    files, absent = guest_runs.guest_files(TEST_GUEST_DIR)
    if shutil.which('qemu-system-x86_64') is None:
        absent.append('qemu-system-x86_64')
    if absent:
        missing('the test guest is not built (tools/build-test-guest.sh): '
                'missing %s' % ', '.join(absent))
    return files


MEMSERVER_SOURCE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'hypervisor-patches', 'memserver')


def start_memserver(max_pages, *options):
    """(process, (host, port)) of a freshly built memcanal-memserver on a
    port it picks, with ``options`` (default --insecure: the plaintext
    protocol of tcp: stores); the caller stops it."""
    subprocess.run(['make', '-s', '-C', MEMSERVER_SOURCE], check=True)
    process = subprocess.Popen(
        [os.path.join(MEMSERVER_SOURCE, 'memcanal-memserver'), '--listen',
         '127.0.0.1:0', '--max-pages', str(max_pages)]
        + list(options or ['--insecure']),
        stdout=subprocess.PIPE, text=True)
    first_line = process.stdout.readline().split()
    assert first_line[:2] == ['listening', 'on'], first_line
    host, port = first_line[2].rsplit(':', 1)
    return process, (host, int(port))


PAGER_SOURCE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                            'hypervisor-patches', 'pager')


def build_pager(build_dir):
    """Build the pager, its selftest and the QEMU shim into ``build_dir``;
    userfaultfd on shared memory needs root (or CAP_SYS_PTRACE): without
    it the test skips (fails under MEMCANAL_REQUIRE_SERVICES)."""
    if os.geteuid() != 0:
        missing('userfaultfd on shmem needs root (CAP_SYS_PTRACE)')
    subprocess.run(['make', '-C', PAGER_SOURCE, 'BUILD=%s' % build_dir],
                   check=True, capture_output=True)
    return build_dir
