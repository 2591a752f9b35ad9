"""What every driver that pages its VMs does the same way (issue #17).

The qemu and libvirt drivers get a guest's RAM into memcanal-pager
differently (the qemu driver starts QEMU itself; a libvirt domain's QEMU
hands its RAM to a socket the agent listens on), but from there on the
paging is the same: one pager per VM with the stores it was lent and the
agent's local file store, driven through memcanal.agent.paging.GuestPager.
"""

import dataclasses
import os
import time

from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.agent import paging
from memcanal import exception

LOG = logging.getLogger(__name__)


def local_store(conf, instance_uuid):
    """The store spec of the VM's pages in [pager] local_store_dir."""
    os.makedirs(conf.pager.local_store_dir, exist_ok=True)
    return 'file:%s' % os.path.join(conf.pager.local_store_dir,
                                    instance_uuid + '.pages')


def start_pager(conf, socket, instance_uuid, stores, log_path):
    """A memcanal-pager listening on ``socket`` for the VM's handoff,
    keeping each page in ``stores`` (memory servers lent to this host)
    and in the local file store, keyed by the VM (paging.owner_of) there
    and in the host's pool."""
    options = conf.pager
    return paging.PagerClient(
        options.binary, socket,
        list(stores) + [local_store(conf, instance_uuid)],
        pool_mb=options.pool_mb, log_path=log_path, timeout=options.timeout,
        owner=paging.owner_of(instance_uuid),
        pool_path=options.pool_path or None)


def instance_info(info, pager):
    """``info`` with the VM's resident and paged bytes once it is paged
    (as it is if the pager does not answer)."""
    if pager is None or not pager.paging:
        return info
    try:
        return dataclasses.replace(
            info, resident_bytes=pager.resident_bytes(),
            paged_bytes=pager.paged_bytes())
    except paging.PagerError as error:
        LOG.error('Paging of %s: %s', info.uuid, error)
        return info


def paging_sample(instance_uuid, pager, sample, accessed, accesses):
    """``sample`` with the interval's paging trace, after feeding the
    interval's ``accessed`` pages (None: none seen) to the VM's cold-page
    detector; ``sample`` as it is if the pager fails."""
    try:
        trace = pager.interval(accessed, accesses)
    except paging.PagerError as error:
        LOG.error('Paging of %s: %s', instance_uuid, error)
        return sample
    return dataclasses.replace(sample, paging_trace=trace)


def set_resident(instance_uuid, pager, target_bytes, stores):
    """Page the VM out (or in) to ``target_bytes`` resident: the
    driver's Resize. ``stores`` the pager was not started with are not
    used (the daemon takes its stores at start), and said so."""
    missing = set(stores) - set(pager.client.stores)
    if missing:
        LOG.warning('Paging %s without %s: its pager started with %s',
                    instance_uuid, ', '.join(sorted(missing)),
                    ', '.join(pager.client.stores))
    started = time.monotonic()
    try:
        previous = pager.set_resident(target_bytes)
    except paging.PagerError as error:
        raise exception.ResizeFailed(uuid=instance_uuid, reason=str(error))
    return driver.Resize('paging', previous, int(target_bytes),
                         time.monotonic() - started)
