"""What a resized VM reached: its memory read back after a resize.

A hypervisor accepts a balloon or virtio-mem target at once and the
guest completes it afterwards, page by page, or never (a balloon driver
that cannot free the pages, one not loaded, a guest starved of CPU):
"applied" says the target was set, not that the guest is at it. After
each applied resize the agent reads the VM's memory back
(``HypervisorDriver.memory_now``) every POLL_SECONDS until it is at the
target or ``[agent] target_settle_timeout`` seconds have passed, and
reports what the guest reached and whether it lagged; the service then
counts the VM at the size it reached, not at a size it did not get.
"""

import dataclasses
import time

from oslo_log import log as logging

from memcanal import exception

LOG = logging.getLogger(__name__)

# How far from its target a VM still counts as at it: a Xen domain's
# pages and its target differ by libxl's slack (64 KiB) and Xen's own
# pages; a QEMU balloon lands on the page. A VM past its target (a
# virtio-mem device plugs whole blocks, so it overshoots a growth by up
# to one) did not lag.
TOLERANCE_BYTES = 2 ** 20
POLL_SECONDS = 0.5


def short_of(previous_bytes, target_bytes, reached_bytes):
    """Whether ``reached_bytes`` is still short of a change from
    ``previous_bytes`` to ``target_bytes``: above a shrink's target, or
    below a growth's, by more than TOLERANCE_BYTES."""
    if target_bytes < previous_bytes:
        return reached_bytes > target_bytes + TOLERANCE_BYTES
    return reached_bytes < target_bytes - TOLERANCE_BYTES


def settle(hypervisor, instance_uuid, resize, timeout, sleep=time.sleep,
           clock=time.monotonic):
    """``resize`` (a driver.Resize just applied to ``instance_uuid``)
    with what the VM reached within ``timeout`` seconds: its
    reached_bytes, lagged and settle_seconds."""
    started = clock()
    while True:
        try:
            reached = hypervisor.memory_now(instance_uuid, resize.mechanism)
        except exception.InstanceNotFound:
            LOG.warning('%s is gone: cannot read back what its resize to '
                        '%d bytes reached', instance_uuid,
                        resize.target_bytes)
            return dataclasses.replace(
                resize, settle_seconds=clock() - started)
        lagged = short_of(resize.previous_bytes, resize.target_bytes,
                          reached)
        waited = clock() - started
        if not lagged or waited >= timeout:
            return dataclasses.replace(resize, reached_bytes=int(reached),
                                       lagged=lagged, settle_seconds=waited)
        sleep(min(POLL_SECONDS, timeout - waited))
