"""The userfaultfd pager (hypervisor-patches/pager) in a plain process.

uffd_selftest maps a shared memfd, makes the userfaultfd in its own
process as QEMU would, and runs the pager's swap-out and fault service on
it while writer threads rewrite and check whole pages. Every page goes to
two stores before it is dropped; halfway through, one store loses
everything, and faults must fall back to the other copy. The stores are
two files, or a real memcanal-memserver (emptied by RECLAIM) and a file.
"""

import re
import signal
import subprocess
import time

import pytest

from memcanal.tests.functional import services
# The memserver test module owns building and starting the real server.

pytestmark = pytest.mark.functional


@pytest.fixture(scope='module')
def selftest(tmp_path_factory):
    return services.build_pager(
        tmp_path_factory.mktemp('pager-build')) / 'uffd_selftest'


def run(selftest, tmp_path, *args):
    return subprocess.run([str(selftest), '-m', '64', '-s', '3',
                           '-d', str(tmp_path), *args],
                          capture_output=True, text=True, timeout=120)


def number(pattern, text):
    return int(re.search(pattern, text).group(1))


@pytest.fixture(scope='module')
def memserver():
    process, (host, port) = services.start_memserver(max_pages=65536)
    yield '%s:%d' % (host, port)
    process.terminate()
    process.wait(10)


def check_store_0_lost_midway(result):
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert number(r'wrong words: (\d+)', out) == 0, out
    assert number(r'lost pages: (\d+)', out) == 0, out
    assert number(r'swapped out: (\d+) pages', out) > 0, out
    # The cold three quarters of 64 MiB, freed from the memfd.
    assert number(r'host memory freed: (\d+) MiB', out) >= 40, out
    # Store 0 lost its copies: they failed or came back wrong, and
    # store 1 served them.
    assert (number(r'store 0: served \d+, failed gets (\d+)', out)
            + number(r'store 0: .*bad checksums (\d+)', out)) > 0, out
    assert number(r'store 1: served (\d+)', out) > 0, out
    return out


def test_a_file_store_lost_midway_loses_nothing(selftest, tmp_path):
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2'))
    assert 'store 0 (file) emptied' in out, out
    assert not list(tmp_path.iterdir()), 'store files left behind'


def test_a_memserver_emptied_midway_loses_nothing(selftest, memserver,
                                                  tmp_path):
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2', '-t', memserver))
    assert 'store 0 (memserver) emptied' in out, out


def run_signalling_memserver(selftest, tmp_path, signum):
    """The selftest's output with store 0 a memserver that gets
    ``signum`` 1.5 s into the run; nothing lost, no wrong word."""
    server, (host, port) = services.start_memserver(max_pages=65536)
    try:
        run = subprocess.Popen(
            [str(selftest), '-m', '64', '-s', '3', '-k', '0', '-d',
             str(tmp_path), '-t', '%s:%d' % (host, port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        server.send_signal(signum)
        out, err = run.communicate(timeout=240)
    finally:
        server.send_signal(signal.SIGCONT)
        server.kill()
        server.wait(10)
    assert run.returncode == 0, out + err
    assert number(r'wrong words: (\d+)', out) == 0, out
    assert number(r'lost pages: (\d+)', out) == 0, out
    return out


def test_a_memserver_killed_midway_loses_nothing(selftest, tmp_path):
    """The server process dies (SIGKILL): gets fail and fall back to the
    file; puts fail, so nothing more goes out with one copy only."""
    out = run_signalling_memserver(selftest, tmp_path, signal.SIGKILL)
    assert number(r'swapped out: (\d+) pages', out) > 0, out
    assert number(r'store 0: .*failed puts (\d+)', out) > 0, out
    assert number(r'store 0: served \d+, failed gets (\d+)', out) > 0, out
    assert number(r'batches kept in for want of copies: (\d+)', out) > 0


def test_a_memserver_frozen_midway_loses_nothing(selftest, tmp_path):
    """The server stops answering (SIGSTOP: the kernel still accepts its
    connections): requests time out, the store is tried last while it
    backs off, the file serves, and the run finishes."""
    out = run_signalling_memserver(selftest, tmp_path, signal.SIGSTOP)
    # A get or a put timed out, and the store was skipped after.
    assert (number(r'store 0: served \d+, failed gets (\d+)', out)
            + number(r'store 0: .*failed puts (\d+)', out)) > 0, out
    assert number(r'store 0: .*skipped while down (\d+)', out) > 0, out
    assert number(r'store 1: served (\d+)', out) > 0, out


def test_one_store_lost_is_caught(selftest, tmp_path):
    """Without redundancy the same loss is data lost, and the selftest
    says so: its checks can fail."""
    result = run(selftest, tmp_path, '-k', '1', '-n', '1')
    assert result.returncode == 1, result.stdout
    assert number(r'lost pages: (\d+)', result.stdout) > 0
    assert number(r'wrong words: (\d+)', result.stdout) > 0


@pytest.mark.parametrize('pool_file', [False, True])
def test_a_restarted_pager_adopts_and_the_pool_serves_first(
        selftest, tmp_path, tmp_path_factory, pool_file):
    """The pager stops at a quarter of the run, writers faulting on its
    pages meanwhile; the next one adopts the uffd from the state file
    and serves every page, the pool first. With the pool in a file the
    new pager also takes up the old one's pool pages (checksummed)."""
    pool = ['-P', str(tmp_path_factory.mktemp('pool') / 'pool')]
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2', '-p', '8', '-r', '1',
            *(pool if pool_file else [])))
    assert number(r'pager restarted at [\d.]+ s: adopted (\d+)', out) == 1
    assert number(r', (\d+) pages out before', out) > 0, out
    assert number(r'faults from pool: (\d+)', out) > 0, out
    assert number(r'faults from file: (\d+)', out) > 0, out
    assert not list(tmp_path.iterdir()), 'files left behind'


def test_two_pagers_share_one_pool_file(selftest, tmp_path):
    """Two selftests, each with its own pager, memfd and stores, map one
    8 MiB pool file (-P): both lose nothing and both are served from
    it; their pages are keyed by pid, so the same page numbers of the
    two never mix (a mixed page would fail its checksum and come from a
    store: the pool-level test below checks the keys themselves)."""
    pool = tmp_path / 'pool'
    dirs = [tmp_path / name for name in ('a', 'b')]
    processes = []
    for directory in dirs:
        directory.mkdir()
        processes.append(subprocess.Popen(
            [str(selftest), '-m', '64', '-s', '3', '-d', str(directory),
             '-k', '1', '-n', '2', '-p', '8', '-P', str(pool)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for process in processes:
        out, err = process.communicate(timeout=120)
        check_store_0_lost_midway(
            subprocess.CompletedProcess(process.args, process.returncode,
                                        out, err))
        assert number(r'faults from pool: (\d+)', out) > 0, out
        assert number(r'pages held of (\d+)', out) == 2048, out
    assert pool.stat().st_size > 8 << 20


def test_the_pool_file_is_shared_by_owner_and_survives_a_killed_holder(
        selftest, tmp_path):
    """pool_selftest: a second process's puts evict the first's oldest
    pages (one capacity), the same page number of two owners is never
    served across, and processes SIGKILLed while holding the pool's
    mutex do not wedge it (EOWNERDEAD is recovered)."""
    result = subprocess.run(
        [str(selftest.parent / 'pool_selftest'), str(tmp_path / 'pool')],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'FAILED' not in result.stdout
    assert result.stdout.count('ok: ') == 10, result.stdout
    assert number(r'died holding the mutex: (\d+)', result.stdout) > 0
