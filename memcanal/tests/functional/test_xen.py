"""A real Xen host: Xen 4.17 and a Linux dom0 nested in QEMU TCG
(xen_host.py, tools/build-xen.sh), a PVH guest writing a known set of
frames, Xen's log-dirty bitmap read every second by memcanal-logdirty in
dom0, and the guest ballooned with xl.

The guest's memcanal-writer locks 16 MiB (4096 frames) in place and
writes each of its pages once a pass, passes back to back, for 20 s, then
writes none for 10 s. Each second's dirty log must hold every one of
those frames while it writes, none of them after, and few others (the
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
    sequence = ''.join(kind[0] for kind, _extra in kinds)
    assert re.fullmatch('s?a+s?n+(sn*)?', sequence), summary
    # The log starts up to 2 s after the writer (the console is polled).
    assert sequence.count('a') >= WRITE_S // INTERVAL_S - 3, summary
    assert sequence.count('n') >= IDLE_S // INTERVAL_S - 3, summary
    for kind, extra in kinds:
        if kind != 'some':
            assert extra <= OTHER_FRAMES, summary

    xen.check('xl mem-set writer%d %dm' % (GUEST_MB, BALLOON_MB))
    services.wait_for(
        lambda: xen.memory_mb_of('writer%d' % GUEST_MB) == BALLOON_MB,
        timeout=60, what='xl list to show %d MiB' % BALLOON_MB)
    xen.check('xl destroy writer%d' % GUEST_MB)
