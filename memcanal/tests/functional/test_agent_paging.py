"""The qemu driver pages a real guest's detected cold pages (issue #17).

The driver starts the test guest pageable ([qemu] paging: RAM in a shared
memfd, libmemcanal-uffd.so preloaded, a detached memcanal-pager keeping
each page, sealed with the VM's key, on a memcanal-memserver (TLS, with a
lease token the service's key signed, as pooling lends them) and in the
local file store, and sampling the guest's accesses at [sampling]'s
defaults). The guest
writes DATA_MB of random data into a tmpfs and notes its md5sum, then
runs the PRL paper's wsswork over a HOT_MB array in two timed phases,
then checks its data. Nothing tells the agent which pages are cold: the
driver feeds each interval's PRL pages from memtrace, and the pager's
sampled intervals, to the guest's ColdPageDetector, and
apply_memory_target(mechanism='paging') swaps out what it found cold
during the first phase. The hot array stays in (few faults in the hot
loop), the data comes back by faults when the guest checks it, and the
check passes.
"""

import gzip
import os
import pathlib
import re
import time

import numpy as np
import pytest

from memcanal.agent import driver
from memcanal.agent import paging
from memcanal.agent import tracing
from memcanal.service import lease_tokens
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging

pytestmark = pytest.mark.functional

MiB = 2 ** 20
GUEST_MB = 256
DATA_MB = test_guest_paging.DATA_MB
HOT_MB = 16
# Long enough for the detection, the swap-out and the hot window to end
# in the first phase's or second's, on a machine loaded by the other
# functional tests (tools/run-tests.sh runs two at a time): 80 s of
# phases were not, once.
PHASE_SECONDS = 70
COLD_AFTER = 4.0
HOT_WINDOW = 10
INSTANCE = '00000000-0000-0000-0000-000000000417'

# The guest's /init for this test, rdinit=/pagecheck: test_guest_paging's,
# with the hot loop where it waits for its command, and staying up after
# its check: its pager exits with its QEMU.
PAGEHOT = test_guest_paging.PAGECHECK.replace(
    b'read command\n', b'/bin/wsswork %d RWRW %d\n' % (
        HOT_MB, PHASE_SECONDS)).replace(b'poweroff -f', b'sleep 3600')


def pageable_driver(conf, guest, build, initrd, state_path, cold_after):
    """The qemu driver set to start the test guest from ``initrd``
    pageable, with the pager and shim in ``build``, collected every
    second."""
    for name, value, group in (
            ('state_path', state_path, None),
            ('report_interval', 1.0, 'agent'),
            ('plugin', guest['memtrace.so'], 'qemu'),
            ('kernel', guest['vmlinux'], 'qemu'),
            ('initrd', initrd, 'qemu'),
            ('memory_mb', GUEST_MB, 'qemu'),
            ('paging', True, 'qemu'),
            ('binary', str(build / 'memcanal-pager'), 'pager'),
            ('shim', str(build / 'libmemcanal-uffd.so'), 'pager'),
            ('cold_after', cold_after, 'pager')):
        conf.set_override(name, value, group)
    return driver.load('qemu', conf, 'compute-1')


@pytest.fixture
def pageable(conf, short_tmp_path):
    """The qemu driver, the guest started pageable, its memserver."""
    guest = services.require_test_guest()
    build = services.build_pager(pathlib.Path(short_tmp_path) / 'build')
    initrd = pathlib.Path(short_tmp_path) / 'initramfs-pagehot.gz'
    initrd.write_bytes(
        pathlib.Path(guest['initramfs.gz']).read_bytes()
        + gzip.compress(test_guest_paging.newc({'pagecheck': PAGEHOT})))
    server = memservers.Memserver(os.path.join(short_tmp_path, 'memserver'),
                                  2 * GUEST_MB * 256)
    hypervisor = pageable_driver(conf, guest, build, str(initrd),
                                 short_tmp_path, COLD_AFTER)
    conf.set_override('tls_ca_file', server.ca, 'pooling')
    store = 'tls:' + server.name
    try:
        hypervisor.start_guest(
            INSTANCE, append='rdinit=/pagecheck', stores=[store],
            lease_tokens={store: lease_tokens.encode(server.token(
                paging.owner_of(INSTANCE), quota_pages=2 * GUEST_MB * 256))})
        yield hypervisor
    finally:
        hypervisor.stop()
        server.stop()


class Intervals:
    """Collects the guest every second, as the agent would, and keeps its
    paging traces and sampled intervals."""

    def __init__(self, hypervisor):
        self.hypervisor = hypervisor
        self.traces = []
        self.sampled = []

    def console(self):
        return pathlib.Path(
            self.hypervisor.console_path(INSTANCE)).read_text(
                errors='replace')

    def until(self, pattern, timeout):
        """Collect until the console matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.console(), re.MULTILINE):
            assert time.monotonic() < deadline, (
                'no %r within %ss: %s' % (pattern, timeout,
                                          self.console()[-2000:]))
            self.collect(1)

    def collect(self, seconds):
        for _ in range(seconds):
            time.sleep(1)
            sample = self.hypervisor.collect(INSTANCE)
            if sample.paging_trace is not None:
                self.traces.append(sample.paging_trace)
            if sample.accesses is not None:
                self.sampled.extend(sample.accesses.intervals)


def served(pager):
    return sum(pager.client.command('stats')['served'])


def test_detected_cold_pages_are_paged_out_and_fault_back(pageable):
    hypervisor = pageable
    pager = hypervisor.guests[INSTANCE].pager
    intervals = Intervals(hypervisor)
    intervals.until('^wsswork: phase=RW start', 300)
    # The data, written and read in a few intervals, sits in Q1 at most:
    # cold expire-time-I (10 intervals) and expire-time-II later.
    intervals.collect(int(pager.detector.expire_i + COLD_AFTER) + 4)
    assert 'wsswork: done' not in intervals.console()
    cold = pager.cold()
    assert np.count_nonzero(pager.resident()[cold]) > DATA_MB * 256, (
        pager.detector.stats())

    resize = hypervisor.apply_memory_target(INSTANCE, 0, mechanism='paging')
    info, = hypervisor.list_instances()
    print('resize', resize, '\nafter it', info)
    assert resize.mechanism == 'paging'
    assert info.resident_bytes < resize.previous_bytes - DATA_MB * MiB
    assert info.paged_bytes > DATA_MB * MiB
    swapped, served_at_swap = pager.swapped_out, served(pager)
    faults_at_swap = pager.faults

    # The hot array stays in: the hot loop faults back few pages (each
    # fault also prefetches up to 32 of its neighbours); 50-60 in quiet
    # runs, 425 once on a machine loaded by other guests, whose slowed
    # guest let hot pages look cold: a quarter of the hot set says the
    # detector told them apart, which paging it all would not.
    intervals.collect(HOT_WINDOW)
    assert 'wsswork: done' not in intervals.console()
    hot_faults = pager.faults - faults_at_swap
    print('swapped out', swapped, 'faults in %d s of the hot loop' %
          HOT_WINDOW, hot_faults, 'pages fetched',
          served(pager) - served_at_swap)
    assert hot_faults < HOT_MB * 256 // 4

    intervals.until('^pagecheck: (ok|BAD)', 300)
    stats = pager.client.command('stats')
    print('stats after the check', stats)
    assert 'pagecheck: ok' in intervals.console()
    assert stats['lost'] == 0
    # The data came back by faults (and their prefetches), reported to
    # the agent by `faults` and recorded as the paging trace's reads.
    assert served(pager) - served_at_swap > DATA_MB * 256 // 2
    assert pager.faults - faults_at_swap > DATA_MB * 256 // 33
    reads = sum(int(trace.reads.sum()) for trace in intervals.traces)
    assert reads == pager.faults
    evictions = sum(int((~trace.reads).sum()) for trace in intervals.traces)
    assert evictions >= swapped
    # They make the agent's "paging" miss-ratio curve: the faults are
    # misses at the memory the guest kept, hits with all it had paged.
    curve = tracing.window_curve(intervals.traces)
    kept = intervals.traces[-1].direct_pages
    assert curve.at([kept])[0] > curve.at([kept + evictions])[0]
    # The pager sampled the guest all along, memtrace or not.
    assert intervals.sampled and any(i.full for i in intervals.sampled)
