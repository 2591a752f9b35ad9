"""A real Xen host: Xen 4.17 and a Linux dom0 nested in QEMU TCG
(xen_host.py, tools/build-xen.sh), a PVH guest writing a known set of
frames, Xen's log-dirty bitmap read every second by memcanal-logdirty in
dom0, and the guest ballooned with xl; then libvirt's Xen driver: the host's
libvirtd run in dom0 over the host's root (shared with virtfs), a PVH
guest created and ballooned through ``virsh -c xen:///system``.

The guest's memcanal-writer locks 16 MiB (4096 frames) in place and
writes each of its pages once a pass, passes back to back, for 20 s, then
writes none for 10 s. Each second's dirty log must hold every one of
those frames while it writes (the writing seconds' logs together, if a
pass took over half a second), none of them after, and few others (the
guest kernel's and the writer's own stack: 55-117 frames a second on the
runs in doc/xen.md).
"""

import re

import pytest

from memcanal.tests.functional import services
from memcanal.tests.functional import xen_host

pytestmark = pytest.mark.functional

SIZE_MB = 16
WRITE_S = 20
IDLE_S = 10
INTERVAL_S = 1
GUEST_MB = 256
# Frames a guest writes besides the writer's set in one second: its
# kernel's timers and console, the writer's stack. Measured 55-117.
OTHER_FRAMES = 512
BALLOON_MB = 128
# virsh dommemstat's "actual" is the balloon target plus what libxl
# adds to every domain (64 KiB measured here).
SLACK_KIB = 1024


@pytest.fixture(scope='module')
def xen(tmp_path_factory):
    """One Xen boot for the module (7-15 s to dom0's toolstack)."""
    absent = xen_host.absent_artefacts()
    if absent:
        services.missing('Xen is not built (tools/build-xen.sh %s): '
                         'missing %s' % (xen_host.XEN_DIR, ', '.join(absent)))
    host = xen_host.XenHost(work_dir=str(tmp_path_factory.mktemp('xen')))
    try:
        host.start()
        yield host
    finally:
        host.stop()


def test_logdirty_and_balloon_on_a_pvh_guest(xen):
    """The dirty log of a PVH guest is its written set per interval;
    xl mem-set balloons it and xl list reads the new size back."""
    written, intervals = xen_host.measure(xen, GUEST_MB, SIZE_MB, WRITE_S,
                                          IDLE_S, INTERVAL_S)
    assert len(written) == SIZE_MB * 2 ** 20 // xen_host.PAGE
    kinds = xen_host.classify(intervals, written)
    summary = [(kind, extra, interval['cost_ns'] // 1000)
               for (kind, extra), interval in zip(kinds, intervals)]
    # Writing, then idle: intervals of all the set ('a'), then of none
    # of it ('n'). The writer stopping mid-interval, or exiting (its
    # pages freed and reused), may leave an interval of some ('s').
    # A pass longer than half an interval (the guest starved on a loaded
    # machine: 4096 first writes trapping into Xen each interval) may
    # leave intervals of some of the set while it writes: then every
    # frame of it must still be in the writing intervals taken together.
    sequence = ''.join(kind[0] for kind, _extra in kinds)
    assert re.fullmatch('[as]+n+(sn*)?', sequence), summary
    writing = set().union(*(interval['frames'] for interval in
                            intervals[:sequence.index('n')]))
    assert written <= writing, summary
    passes = xen_host.parse_writer(xen.console('writer%d' % GUEST_MB))[
        'passes']
    if passes >= 2 * WRITE_S // INTERVAL_S:
        # A whole pass in every interval: the log starts up to 2 s
        # after the writer (the console is polled).
        assert sequence.count('a') >= WRITE_S // INTERVAL_S - 3, (
            passes, summary)
    assert sequence.count('n') >= IDLE_S // INTERVAL_S - 3, summary
    for kind, extra in kinds:
        if kind != 'some':
            assert extra <= OTHER_FRAMES, summary

    xen.check('xl mem-set writer%d %dm' % (GUEST_MB, BALLOON_MB))
    services.wait_for(
        lambda: xen.memory_mb_of('writer%d' % GUEST_MB) == BALLOON_MB,
        timeout=60, what='xl list to show %d MiB' % BALLOON_MB)
    xen.check('xl destroy writer%d' % GUEST_MB)


def test_virsh_setmem_from_dom0(xen):
    """libvirtd's Xen driver in dom0 balloons a PVH guest it created:
    virsh setmem --live, read back from xl list and virsh dommemstat."""
    if not xen.has_libvirt():
        services.missing('libvirt-daemon is not installed on this machine: '
                         'tools/build-xen.sh took no libvirt Xen driver')
    xen.start_libvirtd()
    name = 'lv%d' % GUEST_MB
    xen.create_pvh_libvirt(name, GUEST_MB)
    assert re.search(r'\b%s\s+running\b' % name, xen.virsh('list'))
    assert 'Max memory:     %d KiB' % (GUEST_MB * 1024) in xen.virsh(
        'dominfo %s' % name)
    # The guest's balloon driver is up once its /init runs.
    xen.wait_console(name, lambda c: 'memcanal-domu: ready' in c,
                     what='its /init')
    xen.virsh('setmem %s %d --live' % (name, BALLOON_MB * 1024))
    services.wait_for(
        lambda: xen.memory_mb_of(name) == BALLOON_MB,
        timeout=120, what='xl list to show %d MiB' % BALLOON_MB)
    actual = xen_host.parse_dommemstat(
        xen.virsh('dommemstat %s' % name))['actual']
    assert BALLOON_MB * 1024 <= actual < BALLOON_MB * 1024 + SLACK_KIB
    xen.virsh('destroy %s' % name)
