"""Isolated sharing (Lu and Shen, Hcache, section 4.2).

Divide a host's memory among its VMs to minimise the geometric mean of
their relative miss ratios (misses at the new size over misses at the
baseline, each from the VM's ``miss_floor`` up), under an isolation
constraint: a VM given less than its baseline may have at most
``1 + delta`` times its baseline misses (for a fault-rate curve: faults
per minute at most its bound, base.miss_floor).

Three searches over allocations in whole units (4 MB by default):

- ``exhaustive``: every allocation, as the paper does for three VMs.
- ``greedy``: the paper's idea for more VMs (memory to the VM that gains
  most, from the VM that loses least, bounds kept), on the lower convex
  hull of each VM's cost rather than a unit at a time: a one-unit move
  gains nothing on a step of a curve, so the paper's heuristic stops
  there. Marginal allocation on the hulls from every VM's least allowed
  size, then moves of two VMs (one up a step, the other down to its
  cheapest size that leaves room) while they gain. Optimal on convex
  curves; on steps within a few per cent of ``exact``.
- ``exact``: the geometric mean is the exponential of a sum of per-VM
  logarithms, so the optimum is a knapsack-like dynamic programme over
  memory units: the true optimum for any number of VMs. A VM's cost
  changes only at its curve's points, so the programme merges, per VM,
  only the sizes no smaller size beats.

Both run in C (``_allocate.c``) on each VM's curve as runs of units of
one step (``_runs``); ``_costs`` and ``_exact_dense`` are the same costs
and programme over every unit in numpy, for ``exhaustive`` and as the
reference of the tests and the benchmark (benchmarks/optimizer_scale.py).

A VM's sizes are its current memory plus or minus whole units, so
staying where all are is always among the allocations searched, however
the unit was rounded. VMs without a curve keep their baseline. The
memory below one unit left after dividing the rest in units goes to the
VM it helps most. Memory no VM may take (all at their ceilings) stays
unallocated, as does memory that lowers nobody's misses.
"""

import itertools

import numpy as np

from memcanal.policy import _allocate
from memcanal.policy import base

METHODS = ('exact', 'greedy', 'exhaustive')
MAX_UNITS = 4096
"""The dense searches cost units squared per VM (exact in C: units times
the curve's points); on hosts with more than this many units of memory
the unit grows."""
EXHAUSTIVE_MAX_VMS = 3
STAY_PREFERENCE = 1e-9
"""Cost of each unit a VM moves from its current memory: among
allocations of equal mean it picks the one that moves least, so VMs
whose curves are flat are not shuffled for nothing."""
# Relative miss ratios this far past 1 + delta still meet the bound
# (float error of curves read at their own points).
BOUND_TOLERANCE = 1e-12


def _unit(total_bytes, unit_bytes):
    if unit_bytes <= 0:
        raise ValueError('the unit must be positive')
    steps = -(-total_bytes // (MAX_UNITS * unit_bytes))
    return unit_bytes * max(1, steps)


def _sizes(vm, units, unit):
    """The VM's sizes of 0..units units: from its current memory's
    remainder of a unit."""
    return vm.current_bytes % unit + np.arange(units + 1) * unit


def within_bound(relative, delta):
    """Whether relative miss ratios (scalars or arrays) meet the
    isolation bound ``1 + delta``."""
    return relative <= 1.0 + delta + BOUND_TOLERANCE


def _costs(vm, units, unit, delta):
    """log(relative miss ratio) at 0..units units; inf where the VM may
    not be (outside its bounds, or below baseline beyond its bound)."""
    sizes = _sizes(vm, units, unit)
    relative = vm.relative_miss_ratio(sizes)
    # Every size fits the total with the others at their least.
    allowed = ((sizes >= vm.min_bytes)
               & (sizes <= vm.upper_bytes(int(sizes[-1])))
               & ((sizes >= vm.baseline_bytes)
                  | within_bound(relative, delta)))
    moved = np.abs(sizes - vm.current_bytes) / unit
    return np.where(allowed, np.log(relative) + STAY_PREFERENCE * moved,
                    np.inf)


def _exact_dense(costs, units):
    """Units per VM minimising the summed costs over at most ``units``:
    the dynamic programme over every unit, in numpy. ``exact`` gives the
    same optimum in C from the curves' breakpoints; this one is its
    reference in the tests and its baseline in benchmarks/optimizer_scale."""
    best = np.full(units + 1, np.inf)
    best[0] = 0.0
    choices = []
    for cost in costs:
        merged = np.full(units + 1, np.inf)
        choice = np.zeros(units + 1, np.int64)
        for k in np.flatnonzero(np.isfinite(cost)):
            candidate = best[:units + 1 - k] + cost[k]
            better = candidate < merged[k:]
            merged[k:][better] = candidate[better]
            choice[k:][better] = k
        best = merged
        choices.append(choice)
    # The most memory among the best: what lowers nobody's misses still
    # serves the VMs better than the host's free list.
    left = int(np.flatnonzero(best <= best.min() + 1e-12)[-1])
    if not np.isfinite(best[left]):
        return None
    taken = []
    for choice in reversed(choices):
        taken.append(int(choice[left]))
        left -= taken[-1]
    return taken[::-1]


def _exhaustive(costs, units):
    """Every allocation, as Lu and Shen check them for three VMs: each
    size of the first VMs in turn, the second-to-last's all at once."""
    if len(costs) > EXHAUSTIVE_MAX_VMS:
        raise ValueError('exhaustive search is for at most %d VMs' %
                         EXHAUSTIVE_MAX_VMS)
    # The last VM takes the best of what the others leave: the most
    # memory among its cheapest sizes up to that.
    last_cost = np.minimum.accumulate(costs[-1])
    last_size = np.maximum.accumulate(np.where(
        costs[-1] <= last_cost, np.arange(units + 1), 0))
    if len(costs) == 1:
        return [int(last_size[units])]
    best, best_cost = None, np.inf
    for head in itertools.product(range(units + 1), repeat=len(costs) - 2):
        left = units - sum(head)
        if left < 0:
            continue
        second = np.arange(left + 1)
        cost = (sum(c[k] for c, k in zip(costs, head))
                + costs[-2][:left + 1] + last_cost[left - second])
        k = int(np.argmin(cost))
        if cost[k] < best_cost:
            best = list(head) + [k, int(last_size[left - k])]
            best_cost = cost[k]
    return best


class _Curves:
    """A host's VMs' curves end to end, as the searches and the remainder
    read them: each VM's points after a point at -1 (below its first
    point a curve misses always), its relative miss ratios from each (as
    base.VM.relative_miss_ratio), and where each VM's points begin."""

    def __init__(self, vms):
        self.counts = np.array([len(vm.curve.sizes) + 1 for vm in vms])
        self.offsets = np.concatenate(([0], np.cumsum(self.counts)))
        self.points = np.concatenate([part for vm in vms
                                      for part in ([-1], vm.curve.sizes)])
        ratios = np.maximum(np.concatenate([
            part for vm in vms for part in ([1.0], vm.curve.miss_ratios)]),
            np.repeat([vm.miss_floor for vm in vms], self.counts))
        self.baselines = np.array([vm.baseline_bytes for vm in vms],
                                  np.int64)
        self.relative = ratios / np.repeat(
            self._at(ratios, self.baselines), self.counts)

    def _at(self, values, sizes):
        """``values`` of each VM's last point at or below its size."""
        below = np.add.reduceat(
            self.points <= np.repeat(sizes, self.counts), self.offsets[:-1])
        return values[self.offsets[:-1] + below - 1]

    def relative_at(self, sizes):
        """Each VM's relative miss ratio at its size in ``sizes``."""
        return self._at(self.relative, sizes)


def _runs(vms, curves, units, unit, delta):
    """The arguments of _allocate's searches: each VM's cost as runs of
    units over which its curve is one step (where each starts, its log
    relative miss ratio, whether that is allowed below the baseline),
    and its bounds in units. The same costs as _costs, without a value
    for every unit, for a host's VMs at once."""
    rems = np.array([vm.current_bytes % unit for vm in vms], np.int64)

    def first_unit(limits, rems=rems):
        return np.maximum(-((rems - limits) // unit), 0)

    # Each point starts a run at the first unit whose size reaches it.
    return (first_unit(curves.points, np.repeat(rems, curves.counts))
            .clip(max=units + 1).astype(np.int64),
            np.log(curves.relative),
            within_bound(curves.relative, delta).astype(np.uint8),
            curves.offsets.astype(np.int64),
            first_unit(np.array([vm.min_bytes for vm in vms], np.int64)),
            np.array([units if vm.max_bytes is None else
                      (vm.max_bytes - rem) // unit
                      for vm, rem in zip(vms, rems)], np.int64),
            first_unit(curves.baselines),
            np.array([vm.current_bytes // unit for vm in vms], np.int64),
            units, STAY_PREFERENCE)


def _search(vms, units, unit, delta, method, curves=None):
    """Units per VM by ``method``; None if no allocation is allowed."""
    if method == 'exhaustive':
        costs = [_costs(vm, units, unit, delta) for vm in vms]
        taken = _exhaustive(costs, units)
        if taken is None or not np.isfinite(sum(
                c[k] for c, k in zip(costs, taken))):
            return None
        return taken
    search = _allocate.exact if method == 'exact' else _allocate.greedy
    return search(*_runs(vms, curves or _Curves(vms), units, unit, delta))


def isolated_sharing(vms, total_bytes, delta,
                     unit_bytes=base.DEFAULT_UNIT_BYTES, method='exact'):
    """Targets for ``vms`` sharing ``total_bytes``; an Allocation."""
    if method not in METHODS:
        raise ValueError('method must be one of %s' % ', '.join(METHODS))
    if delta < 0:
        raise ValueError('delta must not be negative')
    pinned = [vm for vm in vms if vm.curve is None]
    free = [vm for vm in vms if vm.curve is not None]
    shared = total_bytes - sum(vm.baseline_bytes for vm in pinned)
    targets = {vm.name: vm.baseline_bytes for vm in pinned}
    unit = _unit(max(shared, 1), unit_bytes)
    if free:
        if shared < 0:
            raise ValueError('the VMs without a curve need more than the '
                             'total memory')
        units = (shared - sum(vm.current_bytes % unit for vm in free)) \
            // unit
        curves = _Curves(free)
        taken = _search(free, units, unit, delta, method, curves) \
            if units >= 0 else None
        if taken is None:
            raise ValueError('no allocation of %d bytes meets every VM\'s '
                             'bounds' % total_bytes)
        targets.update({vm.name: vm.current_bytes % unit + k * unit
                        for vm, k in zip(free, taken)})
        _give_remainder(free, curves, targets, shared - sum(
            targets[vm.name] for vm in free))
    # As base.Allocation.of predicts, with the host's curves read at once
    # (one by one that was half the time of a 30-VM greedy plan).
    predicted = {vm.name: 1.0 for vm in vms}
    if free:
        predicted.update(zip((vm.name for vm in free), curves.relative_at(
            np.array([targets[vm.name] for vm in free], np.int64)).tolist()))
    return base.Allocation(
        'isolated_sharing', {name: int(size) for name, size in
                             targets.items()},
        predicted, base.geometric_mean(predicted.values()),
        dict(method=method, delta=delta, unit_bytes=unit,
             total_bytes=total_bytes))


def _give_remainder(vms, curves, targets, remainder):
    """The bytes below one unit go where they lower the mean most."""
    if remainder <= 0:
        return
    sizes = np.array([targets[vm.name] for vm in vms], np.int64)
    fits = np.flatnonzero([vm.max_bytes is None or size + remainder
                           <= vm.max_bytes for vm, size in zip(vms, sizes)])
    if not fits.size:
        return
    gains = (curves.relative_at(sizes + remainder)
             / curves.relative_at(sizes))[fits]
    targets[vms[fits[np.argmin(gains)]].name] += remainder
