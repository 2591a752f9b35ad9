import ctypes
import mmap
import os
import subprocess

import numpy as np
import pytest

from memcanal.agent import pager_client
from memcanal.agent import paging
from memcanal.estimation import mrc
from memcanal.tests.unit.agent import fake_pager

PAGES = 256
PAGE = paging.PAGE


# -- the pager's process and control socket ----------------------------------

@pytest.fixture
def fakes(short_tmp_path):
    """The fake pager and QEMU executables."""
    return fake_pager.write(short_tmp_path)


@pytest.fixture
def launched(fakes, short_tmp_path):
    """A fake pager launched as the agent launches pagers, and a fake
    QEMU that handed it a 1 MiB guest (4 pages written)."""
    pager_binary, qemu_binary = fakes
    path = os.path.join(short_tmp_path, 'p')
    process = pager_client.launch(pager_binary, [
        '--socket', path + '.sock', '--control', path + '.ctl',
        '--store', 'file:/x', '--sample-rate', '0.5'], path + '.log')
    client = pager_client.PagerClient(path + '.ctl', process, path + '.log',
                                      timeout=10)
    assert client.command('hello') == {'event': 'hello', 'attached': False}
    qemu = subprocess.Popen([qemu_binary, '-m', '1', '--resident', '4'],
                            env=dict(os.environ,
                                     MEMCANAL_PAGER_SOCKET=path + '.sock'),
                            stdout=subprocess.PIPE, text=True)
    yield process, client, qemu
    client.close()
    qemu.kill()
    qemu.wait()
    process.kill()


def test_a_pager_runs_detached_from_the_agent(launched):
    process, _, _ = launched
    # Its own session: the agent's end (a signal to its group, its
    # terminal closing) is not the pager's.
    assert os.getsid(process.pid) == process.pid
    assert os.readlink('/proc/%d/fd/0' % process.pid) == '/dev/null'
    assert process.alive()
    # The same process, found by pid and start time (an agent restarted).
    assert pager_client.Process.running(process.pid, process.started)
    # A reused pid is another process.
    assert not pager_client.Process.running(process.pid,
                                            process.started + 1)


def test_the_client_speaks_the_control_protocol(launched):
    _, client, qemu = launched
    assert qemu.stdout.readline() == 'handed\n'
    hello = client.command('hello')
    assert hello['attached'] and hello['pid'] == qemu.pid
    assert hello['pages'] == 256 and len(hello['regions']) == 1
    # Commands sent at once are answered in order.
    answers = client.commands(['swapout 0 3', 'swapout 8 1', 'stats'])
    assert [a['event'] for a in answers] == ['swapout', 'swapout', 'stats']
    assert answers[0]['dropped'] == 3 and answers[1]['dropped'] == 0
    # One client at a time, and any number over the pager's life: an
    # agent that restarts connects again.
    client.close()
    again = pager_client.PagerClient(client.control, client.process,
                                     client.log_path, timeout=10)
    assert again.command('stats')['out_pages'] == 3
    again.close()


def test_the_client_tells_a_refused_command_from_a_dead_pager(launched):
    process, client, _ = launched
    with pytest.raises(pager_client.UnsupportedCommand, match='frobnicate'):
        client.commands(['frobnicate', 'frobnicate 2', 'frobnicate 3'])
    # Every error was read: the next answer is the next command's.
    assert client.command('stats')['event'] == 'stats'
    process.kill()
    with pytest.raises(pager_client.PagerError,
                       match=r'(?s)exited.*fake pager'):
        client.command('stats')
    # Dead for good: later commands fail at once, not after a timeout.
    with pytest.raises(pager_client.PagerError, match='exited'):
        client.command('stats')


def test_a_store_command_is_shown_without_its_lease_token(launched):
    """Whoever holds a lease token may store on its memory server: a
    refusal, or a pager that died, says which store, not the token."""
    process, client, _ = launched
    command = 'store tls:10.0.0.5:7400 c2VjcmV0LWxlYXNl'
    with pytest.raises(pager_client.UnsupportedCommand) as refused:
        client.command(command)
    process.kill()
    with pytest.raises(pager_client.PagerError) as dead:
        client.command(command)
    for error in (refused.value, dead.value):
        assert 'tls:10.0.0.5:7400' in str(error)
        assert 'c2VjcmV0LWxlYXNl' not in str(error)


def test_each_vm_has_its_own_owner_in_shared_servers_and_pools():
    first = paging.owner_of('10000000-0000-4000-8000-000000000001')
    assert first == paging.owner_of('10000000000040008000000000000001')
    assert first != paging.owner_of('20000000-0000-4000-8000-000000000001')
    assert 0 < first < 2 ** 63


def test_runs_and_their_pages():
    assert paging.runs([8, 1, 2, 3, 7, 5, 2]) == [(1, 3), (5, 1), (7, 2)]
    assert paging.runs([]) == []
    assert paging.expand([1, 3, 5, 1, 7, 2]).tolist() == [1, 2, 3, 5, 7, 8]
    assert paging.expand([]).tolist() == []


GIB = 2 ** 30


def test_guest_frames_of_page_indexes_on_q35():
    # Up to 2.75 GiB, all of RAM is below 4 GiB: frames are indexes.
    small = 2 * GIB
    indexes = np.array([0, 1, small // PAGE - 1])
    assert paging.guest_frames(indexes, small).tolist() == indexes.tolist()
    # From 2.75 GiB on, 2 GiB is below the PCI hole and the rest above
    # 4 GiB.
    big = 3 * GIB
    low = 2 * GIB // PAGE
    indexes = np.array([0, low - 1, low, big // PAGE - 1])
    frames = paging.guest_frames(indexes, big)
    assert frames.tolist() == [0, low - 1, 4 * GIB // PAGE,
                               (5 * GIB - PAGE) // PAGE]
    # And back; frames that are not RAM are left out.
    hole = 3 * GIB // PAGE
    beyond = 5 * GIB // PAGE
    assert paging.frame_indexes(np.r_[frames, hole, beyond], big).tolist() \
        == indexes.tolist()
    assert paging.frame_indexes([5, small // PAGE], small).tolist() == [5]


def punch(fd, first, count):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                               ctypes.c_long]
    # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, as the pager drops pages.
    assert libc.fallocate(fd, 3, first * PAGE, count * PAGE) == 0


def new_memfd(pages):
    fd = os.memfd_create('guest-ram')
    os.ftruncate(fd, pages * PAGE)
    return fd


@pytest.fixture
def memfd():
    fd = new_memfd(PAGES)
    yield fd
    os.close(fd)


def test_resident_mask(memfd):
    for page in (0, 1, 5, 70, PAGES - 1):
        os.pwrite(memfd, b'x', page * PAGE)
    assert np.flatnonzero(paging.resident_mask(memfd, PAGES)).tolist() == [
        0, 1, 5, 70, PAGES - 1]
    # A region from page 64 of its memfd.
    assert np.flatnonzero(paging.resident_mask(memfd, 16, 64)).tolist() \
        == [6]


def test_the_memfds_of_regions_are_found_in_qemu(memfd):
    """By the inode of QEMU's mapping at each region's base, among its
    descriptors (here: this process's)."""
    other = new_memfd(16)
    os.pwrite(other, b'x', 3 * PAGE)
    mappings = [mmap.mmap(fd, pages * PAGE, mmap.MAP_SHARED)
                for fd, pages in ((memfd, PAGES), (other, 16))]
    bases = [ctypes.addressof(ctypes.c_char.from_buffer(m))
             for m in mappings]
    fds = paging.region_memfds(os.getpid(), [(bases[1], 16 * PAGE, 0),
                                             (bases[0], PAGES * PAGE, 0)])
    try:
        assert [os.fstat(fd).st_ino for fd in fds] == [
            os.fstat(other).st_ino, os.fstat(memfd).st_ino]
        assert paging.resident_mask(fds[0], 16).nonzero()[0].tolist() == [3]
        with pytest.raises(pager_client.PagerError, match='no memfd'):
            paging.region_memfds(os.getpid(), [(4096, PAGE, 0)])
    finally:
        for fd in fds + [other]:
            os.close(fd)


# -- GuestPager --------------------------------------------------------------

class FakeClient:
    """The pager's side, on real memfds (regions of pages): swapout
    punches the pages, swapin writes them back, faults and samples hand
    over what the test queued."""

    name = 'fake'

    def __init__(self, memfds, pages):
        self.regions = list(zip(memfds, pages))
        self.lines = []
        self.batches = []
        self.pending_faults = []
        self.pending_intervals = []
        self.rate = 0.0
        self.stats = {'pages_out': 7}
        self.verbs = {'swapout', 'swapoutv', 'swapin', 'faults', 'stats',
                      'samples'}

    def where(self, page):
        for fd, pages in self.regions:
            if page < pages:
                return fd, page
            page -= pages
        raise IndexError(page)

    def commands(self, lines):
        self.batches.append(lines)
        return [self.command(line) for line in lines]

    def close(self):
        self.lines.append('<closed>')

    def command(self, line):
        self.lines.append(line)
        verb, *numbers = line.split()
        if verb not in self.verbs:
            raise pager_client.UnsupportedCommand(name=self.name,
                                                  reason=line)
        if verb == 'samples':
            intervals, self.pending_intervals = self.pending_intervals, []
            return {'sampling': self.rate > 0, 'rate': self.rate,
                    'salt': mrc.DEFAULT_SALT, 'interval_ms': 1000,
                    'full_pass_every': 4, 'overflow': 0,
                    'intervals': intervals}
        if verb == 'faults':
            faults, self.pending_faults = self.pending_faults, []
            for page in faults:
                fd, at = self.where(page)
                os.pwrite(fd, b'f', at * PAGE)
            return {'faults': faults, 'cancelled': [], 'overflow': 0}
        if verb == 'stats':
            return dict(self.stats)
        if verb == 'resample':
            return {'event': 'resample'}
        numbers = list(map(int, numbers))
        dropped = count = 0
        for first, count in zip(numbers[::2], numbers[1::2]):
            for page in range(first, first + count):
                fd, at = self.where(page)
                if verb.startswith('swapout'):
                    dropped += bool(paging.resident_mask(fd, 1, at)[0])
                    punch(fd, at, 1)
                else:
                    os.pwrite(fd, b'i' * PAGE, at * PAGE)
        return {'dropped': dropped, 'fetched': count}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def guest_pager(memfds, pages, **kwargs):
    clock = Clock()
    regions = [(0x7f0000000000 + i * 2 ** 32, count * PAGE, 0)
               for i, count in enumerate(pages)]
    pager = paging.GuestPager(FakeClient(memfds, pages), memfds, regions,
                              scan_period=1.0, cold_after=3.0, clock=clock,
                              **kwargs)
    return pager, clock


@pytest.fixture
def guest(memfd):
    """A guest whose first 128 pages are resident; pages 0-31 hot."""
    os.pwrite(memfd, b'd' * 128 * PAGE, 0)
    pager, clock = guest_pager([memfd], [PAGES])
    for _ in range(5):
        clock.now += 1
        sampled, trace = pager.interval(np.arange(32), accesses=32)
        assert (sampled, trace) == (None, None)
    return pager, clock


def swapped_out(client):
    """The runs the pager was asked to swap out, in order."""
    numbers = [list(map(int, line.split()[1:])) for line in client.lines
               if line.startswith('swapout')]
    return [(first, count) for line in numbers
            for first, count in zip(line[::2], line[1::2])]


def test_fault_latency_is_the_pagers_last_stats_in_seconds(guest):
    pager, _clock = guest
    assert pager.fault_latency() == {}
    pager.client.stats = {'pages_out': 7, 'fault_samples': 0,
                          'fault_p50_us': 0.0, 'fault_p99_us': 0.0}
    assert pager.paged_bytes() == 7 * PAGE
    assert pager.fault_latency() == {}           # no fault timed yet
    pager.client.stats = {'pages_out': 9, 'fault_samples': 40,
                          'fault_p50_us': 85.5, 'fault_p99_us': 1200.0}
    pager.paged_bytes()
    assert pager.fault_latency() == pytest.approx({
        'paging_fault_p50_seconds': 85.5e-6,
        'paging_fault_p99_seconds': 1.2e-3})


def test_tampered_pages_the_pager_refused_reach_the_guest_stats(guest):
    """Issue 36: a page whose every copy failed authentication is not
    served; the pager's count of them, and the page, go in the VM's
    guest_stats for the operator."""
    pager, _clock = guest
    pager.client.stats = {'pages_out': 7, 'unauthentic': 0,
                          'unauthentic_page': -1}
    pager.paged_bytes()
    assert pager.unauthentic() == {}
    pager.client.stats = {'pages_out': 7, 'unauthentic': 3,
                          'unauthentic_page': 100}
    pager.paged_bytes()
    assert pager.unauthentic() == {'paging_unauthentic_pages': 3.0,
                                   'paging_unauthentic_page': 100.0}


def test_set_resident_swaps_out_cold_resident_pages_in_runs(guest):
    pager, clock = guest
    previous = pager.set_resident(64 * PAGE)
    assert previous == 128 * PAGE
    # Only cold pages that are resident go, coldest (then lowest) first:
    # 32..95, in one run; the hot 32 and 96..127 stay.
    assert swapped_out(pager.client) == [(32, 64)]
    assert pager.resident_bytes() == 64 * PAGE
    assert pager.swapped_out == 64
    clock.now += 1
    _, trace = pager.interval(np.arange(32), accesses=100)
    assert trace.blocks.tolist() == list(range(32, 96))
    assert not trace.reads.any()
    assert (trace.direct_pages, trace.accesses) == (64, 100)


def test_scattered_cold_pages_go_out_in_one_swapoutv(guest):
    """Every other cold page (64 runs of one) in one command, one
    answer: the pager batches across runs."""
    pager, clock = guest
    pager.detector.observe(np.arange(33, 128, 2), clock())
    pager.set_resident(0)
    assert [line.split()[0] for line in pager.client.lines
            if line.startswith('swap')] == ['swapoutv']
    assert swapped_out(pager.client) == [(page, 1)
                                         for page in range(32, 128, 2)]
    assert pager.swapped_out == 48


def test_swapoutv_lines_stay_within_the_pagers_line_buffer():
    runs = [(page, 1) for page in range(100000, 110000, 2)]
    lines = paging.swapoutv_lines(runs, limit=200)
    assert all(len(line) < 200 and line.startswith('swapoutv ')
               for line in lines)
    numbers = [int(word) for line in lines for word in line.split()[1:]]
    assert list(zip(numbers[::2], numbers[1::2])) == runs
    assert paging.swapoutv_lines([]) == []


def test_a_pager_without_swapoutv_gets_one_swapout_a_run(guest):
    pager, clock = guest
    pager.client.verbs.discard('swapoutv')
    pager.detector.observe(np.arange(33, 128, 2), clock())
    pager.set_resident(0)
    assert [line for line in pager.client.lines
            if line.startswith('swapout ')] == [
        'swapout %d 1' % page for page in range(32, 128, 2)]
    assert pager.swapped_out == 48
    asked = len(pager.client.lines)
    pager.set_resident(0)    # not asked again
    assert not [line for line in pager.client.lines[asked:]
                if line.startswith('swapoutv')]


def test_set_resident_stops_at_the_hot_set(guest):
    pager, _ = guest
    pager.set_resident(0)
    assert swapped_out(pager.client) == [(32, 96)]
    assert pager.resident_bytes() == 32 * PAGE


def test_a_fault_is_a_read_and_prefetches_its_zone(guest):
    pager, clock = guest
    pager.set_resident(0)
    pager.client.pending_faults = [40]
    clock.now += 1
    _, trace = pager.interval(np.arange(32), accesses=50)
    # Swap-outs as evictions, then the fault as a read, in order.
    assert trace.blocks.tolist() == list(range(32, 128)) + [40]
    assert trace.reads.tolist() == [False] * 96 + [True]
    assert pager.faults == 1
    # LRU-Zone: the faulting zone (32-47) first, then its neighbours,
    # up to 32 pages; the faulting page itself came in by its fault.
    swapins = [line for line in pager.client.lines
               if line.startswith('swapin')]
    assert swapins == ['swapin 32 8', 'swapin 41 24']
    assert pager.resident_bytes() == (32 + 33) * PAGE
    assert 40 not in pager.cold()


def test_the_faults_of_an_interval_prefetch_in_one_batch(guest):
    pager, clock = guest
    pager.set_resident(0)
    pager.client.pending_faults = [40, 120]
    clock.now += 1
    pager.interval(np.arange(32))
    swapins = [batch for batch in pager.client.batches
               if batch[0].startswith('swapin')]
    assert swapins == [['swapin 32 8', 'swapin 41 41', 'swapin 112 8',
                        'swapin 121 7']]
    # The second fault's zone is the most recent: all of it came in.
    assert paging.resident_mask(pager.memfds[0], PAGES)[112:128].all()
    assert pager.faults == 2


def test_set_resident_above_resident_swaps_recent_pages_in(guest):
    pager, _ = guest
    pager.set_resident(32 * PAGE)
    assert pager.set_resident(48 * PAGE) == 32 * PAGE
    assert pager.resident_bytes() == 48 * PAGE


def test_the_whole_vm_as_the_target_brings_every_page_back(guest):
    """Whatever the detector took for remote: an access seen in an
    interval that ended after the page went out makes it resident to
    the detector, not to the pager."""
    pager, clock = guest
    pager.set_resident(64 * PAGE)
    pager.detector.observe([40], clock())
    assert 40 not in pager.detector.prefetch(PAGES)
    pager.set_resident(PAGES * PAGE)
    assert pager.client.lines[-1] == 'swapin 0 %d' % PAGES
    assert paging.resident_mask(pager.memfds[0], PAGES)[32:96].all()
    assert not pager.detector.prefetch(PAGES).size


def test_a_pager_without_faults_swapin_or_samples_still_pages(guest):
    pager, clock = guest
    pager.client.verbs = {'swapout'}
    pager.set_resident(0)
    clock.now += 1
    sampled, trace = pager.interval(np.arange(40), accesses=40)
    assert sampled is None and not trace.reads.any()
    # Pages seen accessed again by memtrace are no longer cold.
    assert not set(range(32, 40)) & set(pager.cold().tolist())
    assert pager.set_resident(200 * PAGE) == 32 * PAGE   # no swapin: no-op


def interval(index, touched, written=(), full=False):
    return {'index': index, 'start_ns': index * 10 ** 9,
            'end_ns': (index + 1) * 10 ** 9, 'full': full,
            'touched': [value for page in touched for value in (page, 1)],
            'written': [value for page in written for value in (page, 1)]}


def test_regions_are_one_page_index_space():
    """Two regions (NUMA cells) of 64 and 32 pages: page 64 is the
    second memfd's first; paging and residency work across both."""
    memfds = [new_memfd(64), new_memfd(32)]
    try:
        for fd, pages in zip(memfds, (64, 32)):
            os.pwrite(fd, b'd' * pages * PAGE, 0)
        pager, clock = guest_pager(memfds, [64, 32])
        assert pager.pages == 96
        assert pager.resident_bytes() == 96 * PAGE
        clock.now += 10
        pager.interval(np.r_[0:16, 64:72])
        pager.set_resident(24 * PAGE)
        assert swapped_out(pager.client) == [(16, 48), (72, 24)]
        assert paging.resident_mask(memfds[1], 32).nonzero()[0].tolist() \
            == list(range(8))
        assert pager.resident().nonzero()[0].tolist() == list(range(16)) + \
            list(range(64, 72))
    finally:
        for fd in memfds:
            os.close(fd)


def test_sampled_intervals_make_pages_cold_or_keep_them_hot(memfd):
    """Pages the pager saw touched are not cold; after a full pass,
    every page not touched since can be; those outside the sample seen
    since the last full pass are in doubt, never cold."""
    os.pwrite(memfd, b'd' * PAGES * PAGE, 0)
    pager, clock = guest_pager([memfd], [PAGES])
    pager.client.rate = 0.25
    sample = mrc.sample_mask(PAGES, 0.25).view(bool)
    outside = np.flatnonzero(~sample)
    hot = np.arange(64)
    pager.client.pending_intervals = [interval(0, hot, written=[3])]
    clock.now = 1.5
    sampled, trace = pager.interval()
    assert trace is None                # not paged
    [first] = sampled.intervals
    assert (sampled.rate, sampled.salt) == (0.25, mrc.DEFAULT_SALT)
    assert first.touched.tolist() == hot.tolist()
    assert (first.written.tolist(), first.full, first.seconds) == (
        [3], False, 1.0)
    clock.now = 10
    pager.interval()
    # No full pass yet: nothing outside the sample is known idle.
    assert not set(pager.cold().tolist()) & set(outside.tolist())
    # A full pass sees the hot pages (and one page outside the sample
    # after it: in doubt until the next).
    doubt = outside[outside >= 64][0]
    pager.client.pending_intervals = [interval(9, np.r_[hot, doubt],
                                               full=True)]
    clock.now = 11
    pager.interval()
    pager.client.pending_intervals = [interval(10, hot)]
    clock.now = 20
    pager.interval()
    cold = set(pager.cold().tolist())
    assert not cold & set(hot.tolist()) and doubt not in cold
    assert cold == set(range(64, PAGES)) - {doubt}
    pager.set_resident(0)
    assert pager.resident().nonzero()[0].tolist() == hot.tolist() + [doubt]


def test_a_guest_paged_before_has_its_pages_out_remote(memfd):
    """An agent that restarts takes every page not resident for the
    pager's: a larger target brings them back."""
    os.pwrite(memfd, b'd' * 64 * PAGE, 0)
    pager, _ = guest_pager([memfd], [PAGES], paged=True)
    assert pager.paging
    assert pager.set_resident(80 * PAGE) == 64 * PAGE
    assert pager.resident_bytes() == 80 * PAGE


def test_a_new_sample_reaches_the_pager_and_the_feed_follows_it(memfd):
    """resample sends the pager its next sample; each interval's own
    sample (rate, salt) reaches the AccessIntervals, and the cold-page
    feed takes it: a page that left the sample is in doubt until the
    next full pass."""
    pager, clock = guest_pager([memfd], [PAGES])
    pager.client.rate = 0.25
    pager.client.verbs.add('resample')
    assert pager.resample(0.5, 9)
    assert pager.client.lines[-1] == 'resample 0.5 9'
    old = mrc.sample_mask(PAGES, 0.25).view(bool)
    new = mrc.sample_mask(PAGES, 0.5, 9).view(bool)
    pager.client.pending_intervals = [
        dict(interval(0, [1]), rate=0.25, salt=mrc.DEFAULT_SALT),
        dict(interval(1, [2]), rate=0.5, salt=9)]
    clock.now = 3
    sampled, _ = pager.interval()
    assert [(i.rate, i.salt) for i in sampled.intervals] == [
        (0.25, mrc.DEFAULT_SALT), (0.5, 9)]
    left = np.flatnonzero(old & ~new)
    assert left.size and pager.feed.in_doubt()[left].all()


def test_a_pager_without_resample_keeps_its_rate(memfd):
    pager, _ = guest_pager([memfd], [PAGES])
    assert not pager.resample(0.5, 9)
    assert not pager.resample(0.5, 9)
    assert pager.client.lines == ['resample 0.5 9']
