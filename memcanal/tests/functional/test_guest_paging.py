"""Remote paging of a real guest's RAM (issue #17), end to end.

The test guest boots under QEMU TCG with its RAM in a shared memfd and
libmemcanal-uffd.so preloaded: the shim makes the userfaultfd inside
QEMU and hands [uffd, memfd] to memcanal-pager, which keeps two copies
of every page it drops, on a memcanal-memserver and in a local file.
The guest fills a tmpfs file with random data and notes its md5sum; the
pager swaps out all of guest RAM; the memserver is killed; then the
guest checks its data with md5sum, every page of it coming back through
the pager's faults from the surviving copy.

Access sampling (issue #24) runs on the same guest while it is paged,
its pager killed mid-interval and taken over; and a 3 GiB guest, one
memory backend or two NUMA cells, is handed over with every region,
sampled and paged above 4 GiB guest-physical.

As the agent runs them (issue #25), pagers seal every page with the VM's
key and reach the memserver over TLS with a lease token; the pool test
stays the old way (plaintext, a --insecure memserver, tcp:).
"""

import base64
import gzip
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from memcanal.agent.drivers import qemu
from memcanal.estimation import mrc
from memcanal.tests.functional import guests
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

GUEST_MB = 256
DATA_MB = 96
PAGES = GUEST_MB * 2 ** 20 // 4096
OWNER = 17              # --owner: the VM's key in stores, pool and seals

# The guest's /init for this test: rdinit=/pagecheck on its command line.
PAGECHECK = guests.writes_data(DATA_MB) + b'''read command
if md5sum -c /pattern.md5; then
    echo "pagecheck: ok"
else
    echo "pagecheck: BAD"
fi
poweroff -f
'''


def newc(files):
    """A cpio archive (newc, what the kernel unpacks) of {name: bytes},
    every file executable."""
    out = b''
    for inode, (name, data) in enumerate(
            list(files.items()) + [('TRAILER!!!', b'')], 1):
        encoded = name.encode() + b'\0'
        mode = 0o100755 if data or name != 'TRAILER!!!' else 0
        header = '070701' + ''.join('%08X' % field for field in (
            inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0))
        out += header.encode() + encoded
        out += b'\0' * (-len(out) % 4) + data + b'\0' * (-len(data) % 4)
    return out


def tail(seen):
    """The last lines seen, each cut short (samples lines are long)."""
    return ''.join(line[:400] + ('...\n' if len(line) > 400 else '')
                   for line in seen[-20:])


def wait_line(lines, pattern, timeout, seen):
    """The first line matching ``pattern``; lines read go to ``seen``."""
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail('no %r within %ss: %s' % (pattern, timeout,
                                                  tail(seen)))
        if line is None:
            pytest.fail('ended before %r: %s' % (pattern, tail(seen)))
        seen.append(line)
        if re.search(pattern, line):
            return line


class Pager:
    """memcanal-pager driven by its stdin line protocol; ``stores`` are
    specs, or (spec, lease token) pairs."""

    def __init__(self, binary, socket, stores, options=()):
        command = [str(binary), '--socket', socket, *options,
                   *pager_tests.store_arguments(stores)]
        self.command_line = command
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1)
        self.lines = services.lines_of(self.process.stdout)
        self.seen = []

    def event(self, name, timeout=60):
        return json.loads(wait_line(self.lines, '"event": "%s"' % name,
                                    timeout, self.seen))

    def command(self, line, answer, timeout=120):
        self.process.stdin.write(line + '\n')
        self.process.stdin.flush()
        return self.event(answer, timeout)

    def batch(self, *lines):
        """The answers to ``lines``, sent at once: the pager runs them
        all even if its guest exits meanwhile (then so does the pager)."""
        self.process.stdin.write(''.join(line + '\n' for line in lines))
        self.process.stdin.flush()
        return [self.event(line.split()[0]) for line in lines]


def rss_shmem_kib(pid):
    status = pathlib.Path('/proc/%d/status' % pid).read_text()
    return int(re.search(r'RssShmem:\s+(\d+) kB', status).group(1))


@pytest.fixture(scope='module')
def build(tmp_path_factory):
    return services.build_pager(tmp_path_factory.mktemp('pager-build'))


def pagecheck_initrd(guest, path):
    """The test guest's initramfs with /pagecheck added, written to
    ``path``: the kernel unpacks concatenated archives in turn."""
    path.write_bytes(pathlib.Path(guest['initramfs.gz']).read_bytes()
                     + gzip.compress(newc({'pagecheck': PAGECHECK})))
    return str(path)


@pytest.fixture
def initrd(tmp_path):
    guest = services.require_test_guest()
    return guest, pagecheck_initrd(guest,
                                   tmp_path / 'initramfs-pagecheck.gz')


def guest_command(guest, initrd):
    command = qemu.guest_command(
        'qemu-system-x86_64', guest['vmlinux'], initrd,
        'console=ttyS0 panic=-1 rdinit=/pagecheck', GUEST_MB, 1,
        '00000000-0000-0000-0000-000000000017', '/dev/null')
    command[command.index('-serial') + 1] = 'stdio'
    return command + [
        '-object', 'memory-backend-memfd,id=mem,size=%dM,share=on' % GUEST_MB,
        '-machine', 'memory-backend=mem']


class PagedGuest:
    """The test guest under QEMU with the shim, a memcanal-pager serving
    it from a memserver (store 0) and a file (store 1), or the file
    alone without ``memserver``, and the guest's pattern written. The
    pager seals with a VM key and reaches the memserver over TLS with a
    lease token, as the agent's do; not ``sealed``: plaintext, and a
    --insecure memserver over tcp: (unless ``tls``)."""

    def __init__(self, build, guest, initrd, scratch, options=(),
                 command=None, memory_mb=GUEST_MB, memserver=True,
                 sealed=True, tls=None):
        self.vm = self.pager = self.server = None
        try:
            self._start(build, guest, initrd, scratch, options, command,
                        memory_mb, memserver, sealed,
                        sealed if tls is None else tls)
        except BaseException:
            self.stop()
            raise

    def _start(self, build, guest, initrd, scratch, options, command,
               memory_mb, memserver, sealed, tls):
        socket = os.path.join(scratch, 'pager.sock')
        stores = ['file:%s' % os.path.join(scratch, 'pages')]
        options = [*options, '--owner', str(OWNER)]
        if memserver and tls:
            os.mkdir(os.path.join(scratch, 'lender'))
            lender = memservers.Memserver(
                os.path.join(scratch, 'lender'), 2 * PAGES)
            self.server = lender.process
            stores.insert(0, ('tls:%s' % lender.name, base64.b64encode(
                lender.token(OWNER, 2 * PAGES)).decode()))
            options += ['--tls-ca', lender.ca]
        elif memserver:
            self.server, (host, port) = services.start_memserver(
                max_pages=2 * PAGES)
            stores.insert(0, 'tcp:%s:%d' % (host, port))
        if sealed:
            options += ['--key-file',
                        pager_tests.key_file(os.path.join(scratch, 'vm.key'))]
        self.pager_args = (build / 'memcanal-pager', socket, stores,
                           options)
        self.pager = Pager(*self.pager_args)
        self.pager.event('listening')
        self.vm = subprocess.Popen(
            command or guest_command(guest, initrd), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            bufsize=1, env=dict(os.environ, MEMCANAL_PAGER_SOCKET=socket,
                                LD_PRELOAD=str(build / 'libmemcanal-uffd.so')))
        self.attached = self.pager.event('attached')
        assert self.attached['len'] == memory_mb * 2 ** 20, self.attached
        assert self.attached['sealed'] == sealed, self.attached
        assert self.attached['pid'] == self.vm.pid
        self.console, self.seen = services.lines_of(self.vm.stdout), []
        wait_line(self.console, 'pagecheck: written', 240, self.seen)

    def kill_pager(self):
        """SIGKILL the pager; the lines it wrote but no one read yet."""
        self.pager.process.kill()
        self.pager.process.wait(10)
        unread = []
        while (line := self.pager.lines.get(timeout=10)) is not None:
            unread.append(line)
        return unread

    def restart_pager(self, socket=None):
        """A new pager, as the first was started (but on ``socket``, if
        given, where the shim cannot offer it the uffd again): it must
        take over."""
        binary, first_socket, stores, options = self.pager_args
        self.pager = Pager(binary, socket or first_socket, stores, options)
        attached = self.pager.event('attached')
        assert attached['adopted'] and attached['pid'] == self.vm.pid, (
            attached)
        return attached

    def check(self):
        """Ask the guest to check its pattern."""
        self.vm.stdin.write('check\n')
        self.vm.stdin.flush()

    def kill_pager_mid_check(self, swapped_out, faults=2000):
        """Ask the guest to check its pattern, all of it swapped out (the
        pager's answer ``swapped_out``), and SIGKILL the pager once its
        stores served ``faults`` pages: the guest's vCPU waits on its
        faults, some pages zapped, the rest still out."""
        self.check()
        stats = swapped_out
        while store_faults(stats) < faults:
            stats = self.pager.command('stats', 'stats')
            time.sleep(0.02)
        self.kill_pager()

    def stop(self):
        for process in (self.vm, self.pager and self.pager.process,
                        self.server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture
def paged_guest(build, initrd, short_tmp_path):
    guest, path = initrd
    paged = PagedGuest(build, guest, path, short_tmp_path)
    yield paged
    paged.stop()


POOL_MB = 16


def stateful(build, initrd, scratch, sealed=True):
    """The guest paged by a pager with a state file and a pool in a
    file, as the host-wide pool would be (a restarted pager maps it
    again)."""
    guest, path = initrd
    return PagedGuest(build, guest, path, scratch, sealed=sealed, options=[
        '--state', os.path.join(scratch, 'pager.state'),
        '--pool-mb', str(POOL_MB),
        '--pool', os.path.join(scratch, 'pager.pool')])


@pytest.fixture
def stateful_guest(build, initrd, short_tmp_path):
    paged = stateful(build, initrd, short_tmp_path)
    yield paged
    paged.stop()


@pytest.fixture
def plaintext_guest(build, initrd, short_tmp_path):
    """The stateful guest paged the old way: plaintext, tcp:."""
    paged = stateful(build, initrd, short_tmp_path, sealed=False)
    yield paged
    paged.stop()


def store_faults(stats):
    return sum(stats['sources'][name]['faults']
               for name in ('pool', 'file', 'tcp'))


def test_guest_data_survives_paging_and_a_lost_store(paged_guest):
    vm, pager = paged_guest.vm, paged_guest.pager
    before_kib = rss_shmem_kib(vm.pid)
    out = pager.command('swapout 0 %d' % PAGES, 'swapout')
    paged_kib = rss_shmem_kib(vm.pid)
    # The guest's 96 MiB of data and most of the rest of its RAM went
    # out, freed from the memfd and from QEMU's resident memory.
    assert out['dropped'] * 4 > DATA_MB * 1024, out
    assert out['memfd_kib'] < before_kib - DATA_MB * 1024, (out, before_kib)
    assert paged_kib < before_kib - DATA_MB * 1024, (before_kib, paged_kib)
    assert out['lost'] == 0, out

    paged_guest.server.send_signal(signal.SIGKILL)
    paged_guest.server.wait(10)
    paged_guest.check()
    verdict = wait_line(paged_guest.console, 'pagecheck: (ok|BAD)', 240,
                        paged_guest.seen)
    stats = pager.command('stats', 'stats')
    print('swapout', out, '\nafter check', stats,
          '\nRssShmem KiB before %d paged %d' % (before_kib, paged_kib))
    assert 'pagecheck: ok' in verdict, ''.join(paged_guest.seen)
    assert stats['lost'] == 0, stats
    # The data came back from the file after the memserver died, which
    # was then skipped while backing off rather than asked every time.
    assert stats['get_failed'][0] > 0, stats
    assert stats['skipped_down'][0] > stats['get_failed'][0], stats
    assert stats['served'][1] > DATA_MB * 256 // 2, stats
    assert vm.wait(120) == 0
    pager.process.stdin.close()
    assert pager.process.wait(30) == 0


def test_a_dead_pager_hangs_the_guest_rather_than_zero_its_pages(
        paged_guest):
    """The shim's own copy of the uffd keeps the registration alive: with
    the pager gone, the guest waits on its dropped pages instead of
    reading zeros (which would make its check fail)."""
    out = paged_guest.pager.command('swapout 0 %d' % PAGES, 'swapout')
    assert out['dropped'] * 4 > DATA_MB * 1024, out
    paged_guest.pager.process.kill()
    paged_guest.pager.process.wait(10)
    paged_guest.check()
    with pytest.raises(pytest.fail.Exception, match='no .* within'):
        wait_line(paged_guest.console, 'pagecheck: (ok|BAD)', 10,
                  paged_guest.seen)
    assert paged_guest.vm.poll() is None, 'QEMU exited'


def test_a_killed_pager_is_taken_over_and_loses_nothing(stateful_guest):
    """The pager is SIGKILLed mid-swap-out, and its successor mid-check
    while the guest reads its pages back; each time a new pager adopts
    the registration in the state file, given the uffd again by the shim
    (same socket) or, on another socket, taking it and the memfd out of
    QEMU (pidfd_getfd), and the guest's md5sum still matches."""
    vm, pager = stateful_guest.vm, stateful_guest.pager
    before_kib = rss_shmem_kib(vm.pid)
    pager.process.stdin.write('swapout 0 %d\n' % PAGES)
    pager.process.stdin.flush()
    while rss_shmem_kib(vm.pid) > before_kib - DATA_MB * 1024 // 3:
        time.sleep(0.02)
    unread = stateful_guest.kill_pager()
    # Killed before the swap-out finished: some pages were SWAPPING.
    assert not any('"swapout"' in line for line in unread), unread

    attached = stateful_guest.restart_pager()
    print('took over mid-swap-out', attached)
    assert attached['handed_over'], attached
    assert attached['out_pages'] > 0, attached
    # A second pager on a live one's state file refuses to start.
    intruder = Pager(*stateful_guest.pager_args)
    assert intruder.process.wait(30) == 1
    out = stateful_guest.pager.command('swapout 0 %d' % PAGES, 'swapout')
    assert out['memfd_kib'] < before_kib - DATA_MB * 1024, (out, before_kib)

    stateful_guest.kill_pager_mid_check(out)
    attached = stateful_guest.restart_pager(
        os.path.join(os.path.dirname(stateful_guest.pager_args[1]),
                     'other.sock'))
    assert not attached['handed_over'], attached
    assert attached['out_pages'] > DATA_MB * 256 // 2, attached

    verdict = wait_line(stateful_guest.console, 'pagecheck: (ok|BAD)', 240,
                        stateful_guest.seen)
    stats = stateful_guest.pager.command('stats', 'stats')
    print('taken over', attached, '\nafter check', stats)
    assert 'pagecheck: ok' in verdict, ''.join(stateful_guest.seen)
    assert stats['lost'] == 0, stats
    assert store_faults(stats) > 0, stats
    assert vm.wait(120) == 0


def test_pool_faults_log_and_swapin(plaintext_guest):
    """Pages swapped out last wait in the pool and are served from it
    first; `swapin` brings pages back without a fault; `faults` lists
    every page that faulted in, once. The old way: plaintext, tcp:."""
    stateful_guest = plaintext_guest
    pager = stateful_guest.pager
    out = pager.command('swapout 0 %d' % PAGES, 'swapout')
    assert 0 < out['pool_pages'] <= POOL_MB * 256, out
    fetched = pager.command('swapin 0 %d' % (PAGES // 4), 'swapin')
    back = pager.command('stats', 'stats')
    assert fetched['fetched'] > 0, fetched
    assert back['swapped_in'] == fetched['fetched'], back
    assert back['memfd_kib'] >= out['memfd_kib'] + fetched['fetched'] * 4

    stateful_guest.check()
    verdict = wait_line(stateful_guest.console, 'pagecheck: (ok|BAD)', 240,
                        stateful_guest.seen)
    stats = pager.command('stats', 'stats')
    faults = pager.command('faults', 'faults')
    later = pager.command('stats', 'stats')   # the guest still runs
    print('after check', stats)
    assert 'pagecheck: ok' in verdict, ''.join(stateful_guest.seen)
    sources = stats['sources']
    assert sources['pool']['faults'] > 0, stats
    assert sources['tcp']['faults'] > 0, stats
    for source in sources.values():
        assert (source['p50_us'] is None) == (source['faults'] == 0), stats
    assert faults['overflow'] == 0, faults
    assert (store_faults(stats) <= len(faults['faults'])
            <= store_faults(later)), (stats, later)
    assert len(set(faults['faults'])) == len(faults['faults'])
    # Each page faulted in once since: never logged twice.
    assert not set(faults['faults']) & set(
        pager.command('faults', 'faults')['faults'])


# Access sampling as the agent runs it, faster: 10 % of the pages zapped
# every half second, every page every fourth interval.
SAMPLING = ['--sample-rate', '0.1', '--sample-interval-ms', '500',
            '--full-pass-every', '4']


def pages_of(runs):
    return {page for first, count in zip(runs[::2], runs[1::2])
            for page in range(first, first + count)}


def intervals(pager, at_least):
    """The completed intervals, once there are ``at_least`` of them."""
    got = []
    deadline = time.monotonic() + 60
    while len(got) < at_least and time.monotonic() < deadline:
        samples = pager.command('samples', 'samples')
        assert samples['sampling'], samples
        got += samples['intervals']
        time.sleep(0.2)
    assert len(got) >= at_least, got
    return got


def check_zaps(stats, got):
    """Each interval was armed by its zap: a full pass, the whole sample
    (the first), or the sampled pages the interval before touched (the
    others stayed unmapped)."""
    sampling = stats['sampling']
    sample = np.flatnonzero(mrc.sample_mask(stats['pages'], 0.1))
    previous = None
    for interval in got:
        if interval['full']:
            expected = stats['pages']
        elif interval['whole']:
            expected = sampling['sampled_pages']
        elif previous is not None and previous['index'] + 1 == (
                interval['index']):
            expected = len(pages_of(previous['touched']) & set(sample))
        else:
            expected = interval['zapped']
        assert interval['zapped'] == expected, (interval, sampling)
        assert interval['full'] == (interval['index'] % 4 == 3), interval
        previous = interval
    assert sampling['zap_failed'] == 0, sampling


def touched_pages(got):
    return set().union(*(pages_of(i['touched']) for i in got))


@pytest.fixture
def sampled_guest(build, initrd, short_tmp_path):
    """The stateful guest, sampled too."""
    guest, path = initrd
    paged = PagedGuest(build, guest, path, short_tmp_path, options=[
        '--state', os.path.join(short_tmp_path, 'pager.state'),
        '--pool-mb', str(POOL_MB),
        '--pool', os.path.join(short_tmp_path, 'pager.pool'), *SAMPLING])
    yield paged
    paged.stop()


def test_sampling_paging_and_a_killed_pager_lose_nothing(sampled_guest):
    """Sampled while all its RAM is swapped out and read back, the pager
    SIGKILLed mid-interval (pages zapped, the guest's vCPU waiting on its
    faults) and taken over: the guest's md5sum matches, and the new pager
    samples the pages the check reads back."""
    vm = sampled_guest.vm
    check_zaps(sampled_guest.pager.command('stats', 'stats'),
               intervals(sampled_guest.pager, 5))
    out = sampled_guest.pager.command('swapout 0 %d' % PAGES, 'swapout')
    assert out['dropped'] * 4 > DATA_MB * 1024, out

    sampled_guest.kill_pager_mid_check(out)
    attached = sampled_guest.restart_pager()
    assert attached['handed_over'], attached
    assert attached['sampling']['enabled'], attached

    verdict = wait_line(sampled_guest.console, 'pagecheck: (ok|BAD)', 240,
                        sampled_guest.seen)
    samples, stats = sampled_guest.pager.batch('samples', 'stats')
    print('taken over', attached, '\nafter check', stats)
    assert 'pagecheck: ok' in verdict, ''.join(sampled_guest.seen)
    assert stats['lost'] == 0, stats
    check_zaps(stats, samples['intervals'])
    # The check read its data back through the new pager's faults.
    assert len(touched_pages(samples['intervals'])) > DATA_MB * 256 // 4
    assert vm.wait(120) == 0


BIG_MB = 3072
# q35 maps the first 2 GiB of a guest this big below 4 GiB (lowmem), the
# rest above it: memfd pages from here on are guest-physical >= 4 GiB.
HIGH_PAGE = 2 ** 31 // 4096


def big_guest_command(guest, initrd, cells):
    """The test guest with 3 GiB: one memory backend, or one per NUMA
    cell."""
    command = qemu.guest_command(
        'qemu-system-x86_64', guest['vmlinux'], initrd,
        'console=ttyS0 panic=-1 rdinit=/pagecheck', BIG_MB, 1,
        '00000000-0000-0000-0000-000000000024', '/dev/null')
    command[command.index('-serial') + 1] = 'stdio'
    if cells == 1:
        return command + [
            '-object', 'memory-backend-memfd,id=mem,size=%dM,share=on'
            % BIG_MB, '-machine', 'memory-backend=mem']
    for cell in range(cells):
        command += [
            '-object', 'memory-backend-memfd,id=m%d,size=%dM,share=on' % (
                cell, BIG_MB // cells),
            '-numa', 'node,nodeid=%d,memdev=m%d' % (cell, cell)]
    return command


@pytest.mark.parametrize('cells', [1, 2])
def test_a_3_gib_guest_is_sampled_and_paged(build, initrd, short_tmp_path,
                                            cells):
    """Every backend is handed over (one region each, 3 GiB in all) and
    sampled; the pages above 4 GiB guest-physical, where the guest's
    data lands, go out and come back. With two cells, a pager on another
    socket takes both memfds out of QEMU after the first is killed."""
    guest, path = initrd
    paged = PagedGuest(
        build, guest, path, short_tmp_path, memory_mb=BIG_MB,
        memserver=False, command=big_guest_command(guest, path, cells),
        options=['--state', os.path.join(short_tmp_path, 'pager.state'),
                 *SAMPLING])
    try:
        attached = paged.attached
        assert len(attached['regions']) == cells, attached
        assert attached['pages'] == BIG_MB * 256, attached
        assert sum(r[1] for r in attached['regions']) == BIG_MB * 2 ** 20
        check_zaps(paged.pager.command('stats', 'stats'),
                   intervals(paged.pager, 5))
        high = (HIGH_PAGE, BIG_MB * 256 - HIGH_PAGE) if cells == 1 else (
            0, BIG_MB * 256)
        out = paged.pager.command('swapout %d %d' % high, 'swapout')
        assert out['dropped'] * 4 > DATA_MB * 1024, out
        if cells == 2:
            paged.kill_pager()
            attached = paged.restart_pager(
                os.path.join(short_tmp_path, 'other.sock'))
            assert not attached['handed_over'], attached
            assert len(attached['regions']) == 2, attached
        paged.check()
        verdict = wait_line(paged.console, 'pagecheck: (ok|BAD)', 240,
                            paged.seen)
        samples, faults, stats = paged.pager.batch('samples', 'faults',
                                                   'stats')
        print('swapout', out, '\nafter check', stats)
        assert 'pagecheck: ok' in verdict, ''.join(paged.seen)
        assert stats['lost'] == 0, stats
        assert len(faults['faults']) > DATA_MB * 256 // 2, stats
        if cells == 1:
            assert min(faults['faults']) >= HIGH_PAGE, faults
            high = {page for page in touched_pages(samples['intervals'])
                    if page >= HIGH_PAGE}
            assert len(high) > DATA_MB * 256 // 4, len(high)
        assert paged.vm.wait(120) == 0
    finally:
        paged.stop()
