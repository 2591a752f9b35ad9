"""A paged VM's live migration, from its source host's side (issue #35).

QEMU's live migration reads every page of the guest. A page the VM's
pager holds out reaches that read through the fault path: one fault and
one round trip to its store (16 pages when the faults run in order)
while the migration waits. benchmarks/migration_cost.py measures it and
the bulk swap-in chosen against it (doc/pooling.md, "A paged VM's live
migration").
"""

import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def before_migration(pager):
    """Bring back every page the VM's pager holds out, at once: a live
    migration reads every page of the guest, and a page out would reach
    QEMU's read through the fault path, one fault (and one round trip to
    its store, 16 pages when faults run in order) at a time, while the
    migration waits (benchmarks/migration_cost.py measures both). One
    ``swapin`` of the whole VM instead (16 pages a GET from a memory
    server). {'fetched': pages, 'seconds': s}."""
    started = time.monotonic()
    guest = pager.attach()
    fetched = guest.swap_in_all() if guest is not None else 0
    return {'fetched': fetched, 'seconds': time.monotonic() - started}


def running(pager, migrating):
    """Whether a live migration of the paged VM runs (``migrating()``,
    asked only of a VM paged since its pager started). The first
    collection that sees one brings every page back (before_migration),
    and the resident target waits until it ends: pages paged out then
    would only be faulted back by the migration's reads. A migration
    that fails leaves the VM on this host: the target is kept again from
    the next collection (the pages go out again as they turn cold)."""
    now = bool(migrating is not None and pager.guest.paging and migrating())
    if now and not pager.migrating:
        back = before_migration(pager)
        LOG.info('%s is being live-migrated: %d pages its pager held out '
                 'brought back in %.2fs; its resident target waits until '
                 'the migration ends', pager.record.uuid, back['fetched'],
                 back['seconds'])
    elif pager.migrating and not now:
        LOG.info('The migration of %s ended with it here: its resident '
                 'target of %s bytes is kept again', pager.record.uuid,
                 pager.record.resident_target)
    pager.migrating = now
    return now
