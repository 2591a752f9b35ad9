"""A trace through a guest, with or without a hypervisor exclusive cache.

- ``vm_only``: the guest with all its memory, the baseline of Lu and
  Shen's section 3.4 and the validation runs of their Fig. 11: its miss
  ratio and device I/Os at one memory size.
- ``traced``: the same guest with ``direct_pages`` of memory above a
  hypervisor cache of ``cache_pages``: its own misses and device I/Os,
  and the miss-ratio curve the hypervisor predicts from what it saw.

Both skip the first ``warmup`` accesses when counting, so runs started
cold compare steady states; the hypervisor's list of evicted blocks is
warmed up by them all the same.
"""

import dataclasses

from memcanal.estimation import guest as guest_model
from memcanal.estimation import hcache
from memcanal.estimation import mrc


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Counts after the warm-up. ``curve`` is the hypervisor's prediction
    (None for a VM-only run)."""

    accesses: int
    misses: int
    device_reads: int
    device_writes: int
    corrupted: int
    curve: mrc.MissRatioCurve | None = None

    @property
    def miss_ratio(self):
        return self.misses / self.accesses if self.accesses else 0.0

    @property
    def device_ios(self):
        return self.device_reads + self.device_writes


def _run(trace, guest, storage, warmup, sync, ghost=None):
    pages, writes = trace.pages, trace.writes
    guest.run(pages[:warmup], writes[:warmup])
    start = (guest.accesses, guest.misses, storage.reads, storage.writes,
             guest.corrupted)
    start_event = len(ghost) if ghost is not None else 0
    guest.run(pages[warmup:], writes[warmup:])
    if sync:
        guest.sync()
    accesses, misses, reads, writes_done, corrupted = (
        now - then for now, then in zip(
            (guest.accesses, guest.misses, storage.reads, storage.writes,
             guest.corrupted), start))
    curve = None
    if ghost is not None:
        blocks, reads_seen = ghost.arrays()
        curve = mrc.ghost_curve(blocks, reads_seen, guest.capacity,
                                accesses, count_from=start_event)
    return RunResult(accesses, misses, reads, writes_done, corrupted, curve)


def vm_only(trace, memory_pages, warmup=0, sync=False, **guest_options):
    """A VM of ``memory_pages`` with no hypervisor cache."""
    storage = hcache.Storage()
    guest = guest_model.GuestPageCache(
        memory_pages, hcache.DirectIo(storage), **guest_options)
    return _run(trace, guest, storage, warmup, sync)


def traced(trace, direct_pages, cache_pages, write_policy='delayed',
           warmup=0, sync=False, check_s2p=True, **guest_options):
    """A VM of ``direct_pages`` over a hypervisor cache of
    ``cache_pages``, and the curve the hypervisor predicts."""
    storage = hcache.Storage()
    ghost = hcache.GhostEvents()
    hypervisor = hcache.HypervisorCache(storage, cache_pages, write_policy,
                                        check_s2p, ghost)
    guest = guest_model.GuestPageCache(direct_pages, hypervisor,
                                       **guest_options)
    return _run(trace, guest, storage, warmup, sync, ghost)
