import ctypes
import os
import stat
import sys

import numpy as np
import pytest

from memcanal.agent import driver
from memcanal.agent.drivers import memtrace
from memcanal.agent.drivers import qemu
from memcanal.agent import paging
from memcanal import exception
from memcanal.tests.unit.agent import fake_memtrace

PAGES = 256
PAGE = paging.PAGE

# A memcanal-pager that speaks the protocol and pages nothing.
FAKE_PAGER = '''#!%s
import json, sys
print(json.dumps({"event": "listening", "socket": sys.argv[2]}), flush=True)
print(json.dumps({"event": "attached", "pid": 1, "len": %d}), flush=True)
for line in sys.stdin:
    words = line.split()
    if words[0] == "swapout":
        print(json.dumps({"event": "swapout", "dropped": int(words[2])}))
    elif words[0] == "stats":
        print(json.dumps({"event": "stats", "args": sys.argv[1:]}))
    elif words[0] == "die":
        sys.exit("memcanal-pager: store gone")
    else:
        print(json.dumps({"event": "error", "line": "bad command"}))
    sys.stdout.flush()
''' % (sys.executable, PAGES * PAGE)


@pytest.fixture
def client(tmp_path):
    binary = tmp_path / 'memcanal-pager'
    binary.write_text(FAKE_PAGER)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    client = paging.PagerClient(str(binary), str(tmp_path / 'p.sock'),
                                ['tcp:10.0.0.2:7000', 'file:/x'],
                                pool_mb=8, timeout=10, owner=42,
                                pool_path='/dev/shm/pool')
    yield client
    client.stop()


def test_client_starts_the_pager_with_its_stores_and_pipelines(client):
    assert client.wait_event('attached')['len'] == PAGES * PAGE
    assert client.command('stats')['args'][2:] == [
        '--owner', '42', '--store', 'tcp:10.0.0.2:7000', '--store',
        'file:/x', '--pool-mb', '8', '--pool', '/dev/shm/pool']
    answers = client.commands(['swapout 0 3', 'swapout 9 1'])
    assert [a['dropped'] for a in answers] == [3, 1]


def test_client_tells_a_missing_command_from_a_dead_pager(client):
    with pytest.raises(paging.UnsupportedCommand, match='swapin'):
        client.commands(['swapin 0 1', 'swapin 5 1', 'swapin 9 1'])
    # Every error was read: the next answer is the next command's.
    assert client.command('swapout 7 2')['dropped'] == 2
    with pytest.raises(paging.PagerError, match='exit 1.*store gone'):
        client.command('die')
    # Dead for good: later commands fail at once, not after a timeout.
    with pytest.raises(paging.PagerError, match='died'):
        client.command('stats')


def test_each_vm_has_its_own_owner_in_shared_servers_and_pools():
    first = paging.owner_of('10000000-0000-4000-8000-000000000001')
    assert first == paging.owner_of('10000000000040008000000000000001')
    assert first != paging.owner_of('20000000-0000-4000-8000-000000000001')
    assert 0 < first < 2 ** 63


def test_runs():
    assert paging.runs([8, 1, 2, 3, 7, 5, 2]) == [(1, 3), (5, 1), (7, 2)]
    assert paging.runs([]) == []


def punch(fd, first, count):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                               ctypes.c_long]
    # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, as the pager drops pages.
    assert libc.fallocate(fd, 3, first * PAGE, count * PAGE) == 0


@pytest.fixture
def memfd():
    fd = os.memfd_create('guest-ram')
    os.ftruncate(fd, PAGES * PAGE)
    yield fd


def test_resident_mask(memfd):
    for page in (0, 1, 5, PAGES - 1):
        os.pwrite(memfd, b'x', page * PAGE)
    assert np.flatnonzero(paging.resident_mask(memfd, PAGES)).tolist() == [
        0, 1, 5, PAGES - 1]


class FakeClient:
    """The pager's side, on a real memfd: swapout punches the pages,
    swapin writes them back, faults hands over what the test queued."""

    name = 'fake'
    stores = ['file:/x']

    def __init__(self, memfd):
        self.memfd = memfd
        self.lines = []
        self.batches = []
        self.pending_faults = []
        self.verbs = {'swapout', 'swapin', 'faults', 'stats'}

    def commands(self, lines):
        self.batches.append(lines)
        return [self.command(line) for line in lines]

    def stop(self):
        self.lines.append('<end of input>')

    def command(self, line):
        self.lines.append(line)
        verb, *numbers = line.split()
        if verb not in self.verbs:
            raise paging.UnsupportedCommand(name=self.name, reason=line)
        if verb == 'faults':
            faults, self.pending_faults = self.pending_faults, []
            for page in faults:
                os.pwrite(self.memfd, b'f', page * PAGE)
            return {'faults': faults, 'cancelled': [], 'overflow': 0}
        if verb == 'stats':
            return {'pages_out': 7}
        if verb == 'swapout':
            first, count = map(int, numbers)
            dropped = np.count_nonzero(paging.resident_mask(
                self.memfd, PAGES)[first:first + count])
            punch(self.memfd, first, count)
            return {'dropped': int(dropped)}
        if verb == 'swapin':
            first, count = map(int, numbers)
            os.pwrite(self.memfd, b'i' * count * PAGE, first * PAGE)
            return {'fetched': count}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def guest(memfd):
    """A guest whose first 128 pages are resident; pages 0-31 hot."""
    os.pwrite(memfd, b'd' * 128 * PAGE, 0)
    clock = Clock()
    pager = paging.GuestPager(FakeClient(memfd), memfd, PAGES,
                              scan_period=1.0, cold_after=3.0, clock=clock)
    for _ in range(5):
        clock.now += 1
        assert pager.interval(np.arange(32), accesses=32) is None
    return pager, clock


def swapped_out(client):
    return [tuple(map(int, line.split()[1:])) for line in client.lines
            if line.startswith('swapout')]


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
    trace = pager.interval(np.arange(32), accesses=100)
    assert trace.blocks.tolist() == list(range(32, 96))
    assert not trace.reads.any()
    assert (trace.direct_pages, trace.accesses) == (64, 100)


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
    trace = pager.interval(np.arange(32), accesses=50)
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
    assert 40 not in pager.detector.cold()


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
    assert paging.resident_mask(pager.memfd, PAGES)[112:128].all()
    assert pager.faults == 2


def test_set_resident_above_resident_swaps_recent_pages_in(guest):
    pager, _ = guest
    pager.set_resident(32 * PAGE)
    assert pager.set_resident(48 * PAGE) == 32 * PAGE
    assert pager.resident_bytes() == 48 * PAGE


def test_a_pager_without_faults_or_swapin_still_pages(guest):
    pager, clock = guest
    pager.client.verbs = {'swapout'}
    pager.set_resident(0)
    clock.now += 1
    trace = pager.interval(np.arange(40), accesses=40)
    assert not trace.reads.any()
    # Pages seen accessed again in PRL are no longer cold.
    assert not set(range(32, 40)) & set(pager.detector.cold().tolist())
    assert pager.set_resident(200 * PAGE) == 32 * PAGE   # no swapin: no-op


UUID = '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b'


@pytest.fixture
def hypervisor(conf, short_tmp_path):
    conf.set_override('state_path', short_tmp_path)
    hypervisor = driver.load('qemu', conf, 'compute-1')
    plugin = fake_memtrace.FakePlugin(hypervisor.socket_path(UUID), UUID,
                                      PAGES * PAGE // 2 ** 20)
    hypervisor.list_instances()
    yield hypervisor, plugin
    hypervisor.stop()


def test_the_qemu_driver_only_pages_pageable_guests(hypervisor):
    hypervisor, _ = hypervisor
    with pytest.raises(exception.ResizeFailed, match='libvirt'):
        hypervisor.apply_memory_target(UUID, 0, mechanism='balloon')
    with pytest.raises(exception.ResizeFailed, match=r'\[qemu\] paging'):
        hypervisor.apply_memory_target(UUID, 0, mechanism='paging')
    assert hypervisor.list_instances()[0].resident_bytes is None


def test_the_qemu_driver_pages_through_the_guest_pager(hypervisor, guest):
    hypervisor, plugin = hypervisor
    pager, clock = guest
    hypervisor.guests[UUID].pager = pager
    resize = hypervisor.apply_memory_target(UUID, 0, mechanism='paging',
                                            stores=['file:/x'])
    assert (resize.mechanism, resize.previous_bytes, resize.target_bytes) \
        == ('paging', 128 * PAGE, 0)
    info, = hypervisor.list_instances()
    assert (info.resident_bytes, info.paged_bytes) == (32 * PAGE, 7 * PAGE)
    # The interval's PRL pages are the detector's accesses; the sample
    # carries the paging trace.
    plugin.send(fake_memtrace.record(memtrace.PRL, [100, 100, 101]))
    plugin.counters.update(references=500)
    clock.now += 1
    trace = hypervisor.collect(UUID).paging_trace
    assert trace.blocks.tolist() == list(range(32, 128))
    assert (trace.direct_pages, trace.accesses) == (32, 500)
    assert pager.detector.queue_of([100, 101, 102]).tolist() == [0, 0, -1]


def test_guest_command_puts_pageable_ram_in_a_shared_memfd():
    command = qemu.guest_command('qemu', 'k', 'i', '', 256, 1, UUID, 'c',
                                 memfd=True)
    assert 'memory-backend-memfd,id=mem,size=256M,share=on' in command
    assert command[command.index('memory-backend=mem') - 1] == '-machine'
