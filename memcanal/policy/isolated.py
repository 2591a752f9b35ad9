"""Isolated sharing (Lu and Shen, Hcache, section 4.2).

Divide a host's memory among its VMs to minimise the geometric mean of
their relative miss ratios (misses at the new size over misses at the
baseline), under an isolation constraint: a VM given less than its
baseline may have at most ``1 + delta`` times its baseline misses.

Three searches over allocations in whole units (4 MB by default):

- ``exhaustive``: every allocation, as the paper does for three VMs.
- ``greedy``: the paper's heuristic for more VMs: move a unit from the VM
  that loses least to the VM that gains most while that lowers the mean
  and the loser stays within its bound.
- ``exact``: the geometric mean is the exponential of a sum of per-VM
  logarithms, so the optimum is a knapsack-like dynamic programme over
  memory units: the true optimum for any number of VMs.

A VM's sizes are its current memory plus or minus whole units, so
staying where all are is always among the allocations searched, however
the unit was rounded. VMs without a curve keep their baseline. The
memory below one unit left after dividing the rest in units goes to the
VM it helps most. Memory no VM may take (all at their ceilings) stays
unallocated, as does memory that lowers nobody's misses.
"""

import itertools

import numpy as np

from memcanal.policy import base

METHODS = ('exact', 'greedy', 'exhaustive')
MAX_UNITS = 4096
"""The exact search costs units squared per VM; on hosts with more than
this many units of memory the unit grows to keep it about a second."""
EXHAUSTIVE_MAX_VMS = 3
STAY_PREFERENCE = 1e-9
"""Cost of each unit a VM moves from its current memory: among
allocations of equal mean it picks the one that moves least, so VMs
whose curves are flat are not shuffled for nothing."""


def _unit(total_bytes, unit_bytes):
    if unit_bytes <= 0:
        raise ValueError('the unit must be positive')
    steps = -(-total_bytes // (MAX_UNITS * unit_bytes))
    return unit_bytes * max(1, steps)


def _sizes(vm, units, unit):
    """The VM's sizes of 0..units units: from its current memory's
    remainder of a unit."""
    return vm.current_bytes % unit + np.arange(units + 1) * unit


def _costs(vm, units, unit, delta):
    """log(relative miss ratio) at 0..units units; inf where the VM may
    not be (outside its bounds, or below baseline beyond its bound)."""
    sizes = _sizes(vm, units, unit)
    relative = vm.relative_miss_ratio(sizes)
    # Every size fits the total with the others at their least.
    allowed = ((sizes >= vm.min_bytes)
               & (sizes <= vm.upper_bytes(int(sizes[-1])))
               & ((sizes >= vm.baseline_bytes)
                  | (relative <= 1.0 + delta + 1e-12)))
    moved = np.abs(sizes - vm.current_bytes) / unit
    return np.where(allowed, np.log(relative) + STAY_PREFERENCE * moved,
                    np.inf)


def _exact(costs, units):
    """Units per VM minimising the summed costs over at most ``units``."""
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


def _nearest_allowed(cost, k):
    """The allowed number of units closest to ``k`` (None if none)."""
    allowed = np.flatnonzero(np.isfinite(cost))
    if not allowed.size:
        return None
    return int(allowed[np.argmin(np.abs(allowed - k))])


def _greedy(costs, start, units):
    """Lu and Shen's unit moves from the current allocation ``start``.

    A VM out of its bounds there first moves to the nearest size it may
    have, and the allocation is brought to at most ``units``: a unit to
    the VM it helps most while one helps, a unit from the VM it hurts
    least while there are too many. Then a unit moves from the VM that
    loses least to the VM that gains most, over every pair, while that
    lowers the mean; a VM may not break its bound.
    """
    taken = [_nearest_allowed(c, k) for c, k in zip(costs, start)]
    if None in taken:
        return None
    while True:
        # A step out of bounds costs inf: no VM is ever taken there.
        gains = np.array([c[k + 1] - c[k] if k < units else np.inf
                          for c, k in zip(costs, taken)])
        losses = np.array([c[k - 1] - c[k] if k > 0 else np.inf
                           for c, k in zip(costs, taken)])
        spare = units - sum(taken)
        if spare < 0:
            if not np.isfinite(losses.min()):
                return None
            taken[int(np.argmin(losses))] -= 1
        elif spare > 0 and gains.min() < -1e-12:
            taken[int(np.argmin(gains))] += 1
        else:
            moves = gains[:, None] + losses[None, :]
            np.fill_diagonal(moves, np.inf)
            receiver, donor = np.unravel_index(np.argmin(moves),
                                               moves.shape)
            if not moves[receiver, donor] < -1e-12:
                return taken
            taken[receiver] += 1
            taken[donor] -= 1


def _search(vms, units, unit, delta, method):
    """Units per VM by ``method``; None if no allocation is allowed."""
    costs = [_costs(vm, units, unit, delta) for vm in vms]
    if method == 'exact':
        taken = _exact(costs, units)
    elif method == 'exhaustive':
        taken = _exhaustive(costs, units)
    else:
        taken = _greedy(costs, [vm.current_bytes // unit for vm in vms],
                        units)
    if taken is None or not np.isfinite(sum(
            c[k] for c, k in zip(costs, taken))):
        return None
    return taken


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
        taken = _search(free, units, unit, delta, method) \
            if units >= 0 else None
        if taken is None:
            raise ValueError('no allocation of %d bytes meets every VM\'s '
                             'bounds' % total_bytes)
        targets.update({vm.name: int(_sizes(vm, units, unit)[k])
                        for vm, k in zip(free, taken)})
        _give_remainder(free, targets, shared - sum(
            targets[vm.name] for vm in free))
    return base.Allocation.of(
        'isolated_sharing', vms, targets, method=method, delta=delta,
        unit_bytes=unit, total_bytes=total_bytes)


def _give_remainder(vms, targets, remainder):
    """The bytes below one unit go where they lower the mean most."""
    if remainder <= 0:
        return
    fits = [vm for vm in vms
            if vm.max_bytes is None or targets[vm.name] + remainder
            <= vm.max_bytes]
    if not fits:
        return
    best = min(fits, key=lambda vm: float(
        vm.relative_miss_ratio(targets[vm.name] + remainder)
        / vm.relative_miss_ratio(targets[vm.name])))
    targets[best.name] += remainder
