"""The userfaultfd pager (hypervisor-patches/pager) in a plain process.

uffd_selftest maps a shared memfd, makes the userfaultfd in its own
process as QEMU would, and runs the pager's swap-out and fault service on
it while writer threads rewrite and check whole pages. Every page goes to
two stores before it is dropped; halfway through, one store loses
everything, and faults must fall back to the other copy. The stores are
two files, or a real memcanal-memserver (emptied by RECLAIM) and a file.

Access sampling (issue #24): sample_guest stands in for QEMU, under the
real shim (libmemcanal-uffd.so): two memfd regions, pages checksummed,
phases that read, write, or read then write known pages from several
threads. memcanal-pager samples it through its control socket, intervals
ended by hand (``tick``), so each phase is exactly one interval.

Pagers seal every copy with a VM key (issue #25), as the agent always
has them do; one run of each program stays plaintext, the old way.
test_pager_attacks.py attacks the copies.
"""

import hashlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

from memcanal.estimation import mrc
from memcanal.tests.functional import services
# The memserver test module owns building and starting the real server.

pytestmark = pytest.mark.functional


@pytest.fixture(scope='module')
def selftest(tmp_path_factory):
    return services.build_pager(
        tmp_path_factory.mktemp('pager-build')) / 'uffd_selftest'


def key_file(path):
    """A new VM key at ``path``, as the agent makes one: 32 random
    bytes, root's, mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, 'wb') as key:
        key.write(os.urandom(32))
    return str(path)


@pytest.fixture(scope='module')
def key(tmp_path_factory):
    return key_file(tmp_path_factory.mktemp('key') / 'vm.key')


def run(selftest, tmp_path, *args, key=None):
    """uffd_selftest, its copies sealed with ``key`` (None: plaintext)."""
    sealing = ['-K', key] if key else []
    return subprocess.run([str(selftest), '-m', '64', '-s', '3',
                           '-d', str(tmp_path), *sealing, *args],
                          capture_output=True, text=True, timeout=120)


def number(pattern, text):
    return int(re.search(pattern, text).group(1))


@pytest.fixture(scope='module')
def memserver():
    process, (host, port) = services.start_memserver(max_pages=65536)
    yield '%s:%d' % (host, port)
    process.terminate()
    process.wait(10)


def check_store_0_lost_midway(result, sealed=True):
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert ('sealed: AES-256-GCM' if sealed else 'sealed: no') in out, out
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


@pytest.mark.parametrize('regions,sealed', [('1', True), ('2', True),
                                            ('1', False)])
def test_a_file_store_lost_midway_loses_nothing(selftest, key, tmp_path,
                                                regions, sealed):
    """-R 2: the memfd's halves mapped in swapped order, two regions whose
    page indexes are not their memfd offsets. Unsealed: the old way,
    copies checksummed."""
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2', '-R', regions,
            key=key if sealed else None), sealed)
    assert 'in %s regions' % regions in out, out
    assert 'store 0 (file) emptied' in out, out
    assert not list(tmp_path.iterdir()), 'store files left behind'


def test_a_memserver_emptied_midway_loses_nothing(selftest, key, memserver,
                                                  tmp_path):
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2', '-t', memserver,
            key=key))
    assert 'store 0 (memserver) emptied' in out, out


def run_signalling_memserver(selftest, key, tmp_path, signum):
    """The selftest's output with store 0 a memserver that gets
    ``signum`` 1.5 s into the run; nothing lost, no wrong word."""
    server, (host, port) = services.start_memserver(max_pages=65536)
    try:
        run = subprocess.Popen(
            [str(selftest), '-m', '64', '-s', '3', '-k', '0', '-d',
             str(tmp_path), '-t', '%s:%d' % (host, port), '-K', key],
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


def test_a_memserver_killed_midway_loses_nothing(selftest, key, tmp_path):
    """The server process dies (SIGKILL): gets fail and fall back to the
    file; puts fail, so nothing more goes out with one copy only."""
    out = run_signalling_memserver(selftest, key, tmp_path, signal.SIGKILL)
    assert number(r'swapped out: (\d+) pages', out) > 0, out
    assert number(r'store 0: .*failed puts (\d+)', out) > 0, out
    assert number(r'store 0: served \d+, failed gets (\d+)', out) > 0, out
    assert number(r'batches kept in for want of copies: (\d+)', out) > 0


def test_a_memserver_frozen_midway_loses_nothing(selftest, key, tmp_path):
    """The server stops answering (SIGSTOP: the kernel still accepts its
    connections): requests time out, the store is tried last while it
    backs off, the file serves, and the run finishes."""
    out = run_signalling_memserver(selftest, key, tmp_path, signal.SIGSTOP)
    # A get or a put timed out, and the store was skipped after.
    assert (number(r'store 0: served \d+, failed gets (\d+)', out)
            + number(r'store 0: .*failed puts (\d+)', out)) > 0, out
    assert number(r'store 0: .*skipped while down (\d+)', out) > 0, out
    assert number(r'store 1: served (\d+)', out) > 0, out


def test_one_store_lost_is_caught(selftest, key, tmp_path):
    """Without redundancy the same loss is data lost, and the selftest
    says so: its checks can fail."""
    result = run(selftest, tmp_path, '-k', '1', '-n', '1', key=key)
    assert result.returncode == 1, result.stdout
    assert number(r'lost pages: (\d+)', result.stdout) > 0
    assert number(r'wrong words: (\d+)', result.stdout) > 0


@pytest.mark.parametrize('pool_file', [False, True])
def test_a_restarted_pager_adopts_and_the_pool_serves_first(
        selftest, key, tmp_path, tmp_path_factory, pool_file):
    """The pager stops at a quarter of the run, writers faulting on its
    pages meanwhile; the next one adopts the uffd from the state file
    (its versions and tags) and serves every page, the pool first. With
    the pool in a file the new pager also takes up the old one's pool
    pages (opened with the tags it kept)."""
    pool = ['-P', str(tmp_path_factory.mktemp('pool') / 'pool')]
    out = check_store_0_lost_midway(
        run(selftest, tmp_path, '-k', '1', '-n', '2', '-p', '8', '-r', '1',
            *(pool if pool_file else []), key=key))
    assert number(r'bad pool copies: (\d+)', out) == 0, out
    assert number(r'pager restarted at [\d.]+ s: adopted (\d+)', out) == 1
    assert number(r', (\d+) pages out before', out) > 0, out
    assert number(r'faults from pool: (\d+)', out) > 0, out
    assert number(r'faults from file: (\d+)', out) > 0, out
    assert not list(tmp_path.iterdir()), 'files left behind'


def test_two_pagers_share_one_pool_file(selftest, key, tmp_path):
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
             '-k', '1', '-n', '2', '-p', '8', '-P', str(pool), '-K', key],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for process in processes:
        out, err = process.communicate(timeout=120)
        check_store_0_lost_midway(
            subprocess.CompletedProcess(process.args, process.returncode,
                                        out, err))
        assert number(r'faults from pool: (\d+)', out) > 0, out
        assert number(r'pages held of (\d+)', out) == 2048, out
        assert number(r'bad pool copies: (\d+)', out) == 0, out
    assert pool.stat().st_size > 8 << 20
    assert pool.stat().st_mode & 0o777 == 0o600


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


def next_json(lines, timeout=60, what='a line'):
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail('no %s within %ss' % (what, timeout))
    assert line is not None, 'ended before %s' % what
    return json.loads(line)


def pages_of(runs):
    """[first, count, first, count...] as a sorted array of pages; runs
    must be sorted and apart, so no page is counted twice."""
    firsts, counts = np.asarray(runs[::2]), np.asarray(runs[1::2])
    assert (firsts[1:] > firsts[:-1] + counts[:-1]).all(), runs
    return np.concatenate([np.arange(f, f + n) for f, n in zip(
        firsts.tolist(), counts.tolist())] or [np.zeros(0, np.int64)])


# Lease tokens for pagers' --store-token-file, as the agent keeps them:
# each in a file of root's alone, in a directory of root's alone.
TOKENS = tempfile.TemporaryDirectory(prefix='memcanal-tokens-')


def token_file(token):
    """A file of root's alone (0600) that holds ``token`` (base64)."""
    path = os.path.join(TOKENS.name, hashlib.sha256(
        token.encode()).hexdigest()[:16] + '.token')
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fchmod(fd, 0o600)            # whatever the umask
        with os.fdopen(fd, 'w') as out:
            out.write(token)
    return path


def store_arguments(stores):
    """--store options of stores given as specs or (spec, token); a
    token goes in a file (--store-token-file), never on the command
    line."""
    arguments = []
    for store in stores:
        spec, token = (store, None) if isinstance(store, str) else store
        arguments += ['--store', spec] + (
            ['--store-token-file', token_file(token)] if token else [])
    return arguments


class SampledProcess:
    """sample_guest under the shim, paged and sampled by memcanal-pager
    (a file store, or ``stores``, a state file, copies sealed with a new
    key, or ``key``'s, or none if None; intervals ended by ``tick``),
    which is driven through its control socket."""

    GUEST = ('-m', '64', '-r', '2', '-t', '4')

    def __init__(self, build, directory, rate, full_every=0, salt=None,
                 shim_socket=None, key=True, stores=None, options=(),
                 guest=GUEST):
        self.build, self.directory = build, directory
        self.socket = os.path.join(directory, 'pager.sock')
        self.store = 'file:%s' % os.path.join(directory, 'pages')
        self.stores = [self.store] if stores is None else stores
        self.key = (key_file(os.path.join(directory, 'vm.key'))
                    if key is True else key)
        self.options = [
            '--state', os.path.join(directory, 'pager.state'),
            '--sample-rate', str(rate), '--sample-interval-ms', '0',
            '--full-pass-every', str(full_every), *options]
        if salt is not None:
            self.options += ['--sample-salt', str(salt)]
        self.pagers = 0
        self.start_pager()
        self.child = subprocess.Popen(
            [str(build / 'sample_guest'), *guest],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            bufsize=1, env=dict(
                os.environ, MEMCANAL_PAGER_SOCKET=shim_socket or self.socket,
                LD_PRELOAD=str(build / 'libmemcanal-uffd.so')))
        self.child_lines = services.lines_of(self.child.stdout)
        self.pages = next_json(self.child_lines, what='ready')['pages']
        self.attached = self.event('attached')
        assert self.attached['pid'] == self.child.pid, self.attached
        assert self.attached['sealed'] == bool(self.key), self.attached
        self.sample = mrc.sample_mask(
            self.pages, rate, mrc.DEFAULT_SALT if salt is None else salt
        ).astype(bool) if rate else np.zeros(self.pages, bool)

    def start_pager(self, socket=None, store=True, key=None):
        """A pager on ``socket`` (default: the shim's) with the same state
        file, key (unless ``key``) and stores (none if not ``store``):
        after a kill, it takes over."""
        control = os.path.join(self.directory, 'control.%d' % self.pagers)
        key = key or self.key
        self.pagers += 1
        self.pager = subprocess.Popen(
            [str(self.build / 'memcanal-pager'), '--socket',
             socket or self.socket, '--control', control, *self.options,
             *(['--key-file', key] if key else []),
             *(store_arguments(self.stores) if store else [])],
            stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pager_lines = services.lines_of(self.pager.stdout)
        self.event('listening')
        self.control = socket_file(control)

    def event(self, name, timeout=60):
        while True:
            event = next_json(self.pager_lines, timeout, name)
            if event['event'] == name:
                return event

    def command(self, line):
        self.control.write(line + '\n')
        self.control.flush()
        return json.loads(self.control.readline())

    def send(self, line):
        """A command to the guest; its answer comes with answer()."""
        self.child.stdin.write(line + '\n')
        self.child.stdin.flush()

    def answer(self, timeout=120):
        return next_json(self.child_lines, timeout, 'the guest\'s answer')

    def phase(self, k):
        """The pages phase k touched and wrote, as boolean masks."""
        self.send('touch %d' % k)
        done = self.answer()
        assert done['phase'] == k and done['bad'] == 0, done
        return self.mask(done['touched']), self.mask(done['written'])

    def mask(self, runs):
        mask = np.zeros(self.pages, bool)
        mask[pages_of(runs)] = True
        return mask

    def interval(self):
        """End the interval under way; it, as (touched, written, record)."""
        current = self.command('tick')['current']
        last = self.command('samples')['intervals'][-1]
        assert last['index'] == current - 1, last
        return self.mask(last['touched']), self.mask(last['written']), last

    def kill_pager(self):
        self.pager.kill()
        self.pager.wait(10)

    def stop(self):
        for process in (self.child, self.pager):
            if process.poll() is None:
                process.kill()
                process.wait(10)


def socket_file(path):
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    return connection.makefile('rw')


@pytest.fixture
def sampled(selftest, short_tmp_path):
    processes = []

    def start(rate, **kwargs):
        processes.append(SampledProcess(selftest.parent, short_tmp_path,
                                        rate, **kwargs))
        return processes[-1]
    yield start
    for process in processes:
        process.stop()


def test_the_control_socket_serves_one_client_after_another(
        selftest, short_tmp_path):
    """Mode 0600; before any handoff `hello` says so and `store` adds a
    store; a client that leaves is not fatal; `quit` ends the pager."""
    control = os.path.join(short_tmp_path, 'control')
    pager = subprocess.Popen(
        [str(selftest.parent / 'memcanal-pager'), '--socket',
         os.path.join(short_tmp_path, 'pager.sock'), '--control', control],
        stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(pager.stdout.readline())['event'] == 'listening'
        assert os.stat(control).st_mode & 0o777 == 0o600
        answers = []
        for lines in (['hello', 'store file:%s/pages' % short_tmp_path],
                      ['samples', 'swapout 0 1']):
            client = socket_file(control)
            for line in lines:
                client.write(line + '\n')
                client.flush()
                answers.append(json.loads(client.readline()))
            client.close()
        assert answers == [
            {'event': 'hello', 'attached': False},
            {'event': 'store', 'copies': 1,
             'stores': ['%s/pages' % short_tmp_path],
             'swap_to': ['%s/pages' % short_tmp_path]},
            {'event': 'samples', 'sampling': False, 'overflow': 0,
             'intervals': []},
            {'event': 'error', 'line': 'not attached'}]
        client = socket_file(control)
        client.write('quit\n')
        client.flush()
        assert pager.wait(10) == 0
        assert json.loads(pager.stdout.readline()) == {'event': 'exit'}
    finally:
        if pager.poll() is None:
            pager.kill()
            pager.wait(10)


def test_the_sample_is_mrc_sample_mask(sampled):
    """The pager's hashed sample is the estimators' (memcanal.estimation
    .mrc.sample_mask, SHARDS' hash), salt included, over both regions."""
    process = sampled(0.01, salt=12345)
    answer = process.command('sampleset')
    assert answer['pages'] == process.pages
    expected = np.flatnonzero(process.sample)
    assert expected.size > 0
    np.testing.assert_array_equal(pages_of(answer['runs']), expected)
    assert process.command('stats')['sampling']['sampled_pages'] == (
        expected.size)


@pytest.mark.parametrize('rate', [1.0, 0.1])
def test_every_sampled_access_is_seen_once_an_interval(sampled, rate):
    """Each phase is one interval: the pages it touched and wrote that
    are sampled are exactly those the interval records, read-then-write
    pages among the written. In a full pass (every third interval) every
    page touched is recorded; before the first, nothing else is; after
    it, unsampled pages it left unmapped are, on their first access, and
    never a page the phase did not touch. No page is corrupted."""
    process = sampled(rate, full_every=3)
    assert process.attached['regions'][0][0] < (
        process.attached['regions'][1][0]), process.attached
    # Interval 0's zap was of the whole sample; then only the sampled
    # pages the interval before touched are mapped, and zapped.
    before = process.interval()[0]
    for k in range(1, 6):
        touched, written = process.phase(k)
        seen, seen_written, record = process.interval()
        full = k % 3 == 2
        assert record['full'] == full, record
        assert not record['whole'] or full, record
        assert (record['rate'], record['salt']) == (rate, mrc.DEFAULT_SALT)
        assert record['zapped'] == (process.pages if full else (
            before & process.sample).sum()), record
        before = seen
        np.testing.assert_array_equal(seen & process.sample,
                                      touched & process.sample)
        np.testing.assert_array_equal(seen_written & process.sample,
                                      written & process.sample)
        assert not (seen & ~touched).any()
        assert not (seen_written & ~written).any()
        if full or k == 1:
            np.testing.assert_array_equal(
                seen, touched if full else touched & process.sample)
    process.send('check')
    assert process.answer() == {'check': 0}
    stats = process.command('stats')
    assert stats['sampling']['minor_faults'] > 0, stats
    assert stats['sampling']['minor_p50_us'] is not None, stats


def test_a_new_sample_is_taken_at_the_next_interval(sampled):
    """`resample` keeps the interval under way; the next two zap the
    whole new sample (another salt: twice, for a fault that raced the
    change) and see every access to it, the one after only the new
    sample's pages touched; a lower rate of the same salt zaps no more
    than its touched pages. No page is corrupted."""
    process = sampled(0.1)
    process.interval()
    answer = process.command('resample 0.5 777')
    assert answer == {'event': 'resample', 'rate': 0.5, 'salt': 777}
    touched, _ = process.phase(1)
    seen, _, record = process.interval()
    assert (record['rate'], record['salt']) == (0.1, mrc.DEFAULT_SALT)
    np.testing.assert_array_equal(seen & process.sample,
                                  touched & process.sample)
    new = mrc.sample_mask(process.pages, 0.5, 777).astype(bool)
    for k in (2, 3, 4):
        touched, _ = process.phase(k)
        seen, _, record = process.interval()
        assert (record['rate'], record['salt']) == (0.5, 777), record
        assert record['whole'] == (k < 4), record
        if k < 4:
            assert record['zapped'] == new.sum(), record
        np.testing.assert_array_equal(seen & new, touched & new)
    process.command('resample 0.25 777')
    lower = mrc.sample_mask(process.pages, 0.25, 777).astype(bool)
    process.phase(5)
    previous = process.interval()[0]
    touched, _ = process.phase(6)
    seen, _, record = process.interval()
    assert (record['rate'], record['whole']) == (0.25, False), record
    assert record['zapped'] == (previous & lower).sum(), record
    np.testing.assert_array_equal(seen & lower, touched & lower)
    assert process.command('resample 2 1')['event'] == 'error'
    process.send('check')
    assert process.answer() == {'check': 0}


def test_sampling_while_paging_loses_nothing(sampled):
    """Swap-outs (and a swap-in) run while the guest's phases do: every
    access to a sampled page is still seen in its interval, a page
    fetched from the store is seen too, sampled or not, and nothing
    another interval did or no one did is recorded."""
    process = sampled(0.1)
    third = process.pages // 3
    fetched_unsampled = 0
    process.command('tick')
    for k in range(1, 7):
        process.send('touch %d' % k)
        first = (k * third // 2) % (process.pages - third)
        paged = process.command('swapout %d %d' % (first, third))
        assert paged['event'] == 'swapout' and paged['lost'] == 0, paged
        if k == 4:
            assert process.command('swapin 0 %d' % third)['event'] == 'swapin'
        done = process.answer()
        assert done['bad'] == 0, done
        touched, written = (process.mask(done['touched']),
                            process.mask(done['written']))
        seen, seen_written, _ = process.interval()
        assert not (seen & ~touched).any()
        assert not (seen_written & ~written).any()
        np.testing.assert_array_equal(seen & process.sample,
                                      touched & process.sample)
        np.testing.assert_array_equal(seen_written & process.sample,
                                      written & process.sample)
        fetched_unsampled += (seen & ~process.sample).sum()
    assert fetched_unsampled > 0
    process.send('check')
    assert process.answer() == {'check': 0}
    stats = process.command('stats')
    assert stats['lost'] == 0 and stats['swapped_out'] > 0, stats
    assert stats['sources']['file']['faults'] > 0, stats


def blocked(process):
    """The guest's answer does not come: its threads wait on faults."""
    with pytest.raises(pytest.fail.Exception, match='no .* within'):
        process.answer(timeout=1)
    return True


def deferring(process):
    """Wait until the pager (without the store) holds faults unanswered."""
    return services.wait_for(
        lambda: process.command('stats')['deferred'] > 0, 30,
        'faults waiting for a store')


def test_a_pager_killed_mid_interval_is_taken_over(sampled):
    """The pager dies with every page zapped and some swapped out; the
    guest's threads block on MINOR and MISSING faults until a new pager
    with the state file takes over (the shim hands it the uffd again):
    the guest's data is intact and sampling goes on. Then a pager lacking
    the store reads the faults on swapped-out pages and leaves them
    unanswered; killed, the next one, on another socket, takes the uffd
    and both memfds out of the process (pidfd_getfd) and wakes the
    threads the dead one held: no sampling, but every fault answered."""
    process = sampled(1.0)
    process.command('tick')
    process.command('swapout %d %d' % (process.pages // 4,
                                       process.pages // 2))
    process.kill_pager()
    process.send('touch 1')
    assert blocked(process)
    process.start_pager()
    attached = process.event('attached')
    assert attached['adopted'] and attached['handed_over'], attached
    assert attached['out_pages'] > 0, attached
    assert process.answer()['bad'] == 0

    process.command('tick')
    touched, written = process.phase(2)
    seen, seen_written, _ = process.interval()
    np.testing.assert_array_equal(seen, touched)
    np.testing.assert_array_equal(seen_written, written)

    process.command('swapout 0 %d' % process.pages)
    process.kill_pager()
    process.start_pager(store=False)
    assert process.event('attached')['handed_over']
    process.send('touch 3')
    deferring(process)
    process.kill_pager()
    process.start_pager(socket=os.path.join(process.directory, 'other'))
    attached = process.event('attached')
    assert attached['adopted'] and not attached['handed_over'], attached
    assert len(attached['regions']) == 2, attached
    assert process.answer()['bad'] == 0
    assert not process.command('samples')['sampling']
    process.send('check')
    assert process.answer() == {'check': 0}
    stats = process.command('stats')
    assert stats['lost'] == 0 and stats['faults_missing'] > 0, stats


def test_faults_on_pages_out_wait_for_the_store_added_later(sampled):
    """A pager started without the store it swapped pages to (the agent
    adds stores when it first pages) holds the faults on them; `store`
    adds it and they are answered."""
    process = sampled(0.1)
    process.command('swapout 0 %d' % process.pages)
    process.kill_pager()
    process.start_pager(store=False)
    attached = process.event('attached')
    assert attached['stores'] == [] and attached['out_pages'] > 0, attached
    assert process.command('swapout 0 10')['event'] == 'error'
    process.send('touch 1')
    deferring(process)
    assert blocked(process)
    added = process.command('store %s' % process.store)
    assert added == {'event': 'store', 'copies': 1,
                     'stores': [process.store[len('file:'):]],
                     'swap_to': [process.store[len('file:'):]]}, added
    assert process.answer()['bad'] == 0
    process.send('check')
    assert process.answer() == {'check': 0}
    assert process.command('stats')['lost'] == 0


def test_a_relayed_handoff_is_sampled(sampled, short_tmp_path):
    """A relay (the agent's handoff listener) forwards the handoff with
    QEMU's connection appended: the pager answers both, and its zaps go
    to QEMU over that connection."""
    relay_path = os.path.join(short_tmp_path, 'relay.sock')
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(relay_path)
    listener.listen(1)
    relayed = {}

    def relay():
        connection, _ = listener.accept()
        header, fds, _, _ = socket.recv_fds(connection, 4096, 16)
        relayed['pid'] = connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as pager:
            pager.connect(os.path.join(short_tmp_path, 'pager.sock'))
            socket.send_fds(pager, [header], fds + [connection.fileno()])
            relayed['answer'] = pager.recv(1)
        for fd in fds:
            os.close(fd)
        connection.close()          # the pager holds QEMU's connection
    threading.Thread(target=relay, daemon=True).start()
    process = sampled(1.0, shim_socket=relay_path)
    assert relayed['answer'] == b'k'
    assert process.attached['handed_over'], process.attached
    # The first interval's zap is of the whole sample: every page.
    record = process.interval()[2]
    assert record['whole'] and record['zapped'] == process.pages, record
    touched, written = process.phase(1)
    seen, seen_written, record = process.interval()
    np.testing.assert_array_equal(seen, touched)
    np.testing.assert_array_equal(seen_written, written)


@pytest.mark.parametrize('other_key', [True, False])
def test_a_pager_taking_over_with_another_key_is_refused(
        sampled, short_tmp_path, other_key):
    """The state file names the key the pages are sealed with: a pager
    taking over with another key, or with none, exits rather than take
    every copy for a forgery (and the guest's pages for lost); the VM's
    own key then takes over and every page comes back."""
    process = sampled(0.1)
    process.command('swapout 0 %d' % process.pages)
    process.kill_pager()
    key = ['--key-file', key_file(os.path.join(short_tmp_path, 'other.key'))]
    refused = subprocess.run(
        [str(process.build / 'memcanal-pager'), '--socket', process.socket,
         *process.options, *(key if other_key else []),
         *store_arguments(process.stores)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60)
    assert refused.returncode == 1, refused
    assert ('sealed with another key' if other_key else
            'are sealed, and this pager has no key') in refused.stderr
    process.start_pager()
    attached = process.event('attached')
    assert attached['adopted'] and attached['sealed'], attached
    process.send('check')
    assert process.answer() == {'check': 0}
    stats = process.command('stats')
    assert stats['lost'] == 0 and stats['bad_sum'] == [0], stats
