"""VMware ESX server emulation (Lu and Shen, Hcache, section 4.2).

ESX divides memory by proportional shares with an idle memory tax
(Waldspurger, OSDI'02): a VM's claim is its shares per page,

    rho = S / (P * (f + k * (1 - f))),  k = 1 / (1 - tax_rate),

where P is its memory and f the fraction of it in active use, so an idle
page counts k times against it. Memory is taken from the VM of least rho
that has idle memory (the victim) and given to the VM of most rho that
would use it, until the victim would claim more than the receiver.

ESX samples pages to estimate f. Here the miss-ratio curve says it: the
active memory is the smallest size at which the VM misses, within
``tolerance``, no more than with all the memory it could use, so a VM
that streams through much data without reusing it is a victim although
its working set is large, which sampling cannot see (for a fault-rate
curve the tolerance is the ratio its fault bound allows,
base.FaultBound.allowed_ratio). The same size says who would use more
memory: a VM below it, whose misses still fall by more than
``tolerance``. Curves are step functions between their points, so
"lower one unit further" would stall every VM between two points.

The tax leaves a victim part of its idle memory: moves stop where its
taxed claim, S / (active + k * idle), meets the receivers' S / P. With
the default 75 % that is what ESX itself did in Hcache's Table 3 (384 MB
of TPC-H's 512); as the tax nears 1 the victim keeps only its active
memory, as the paper's emulation did (336 MB).

VMs start where they are (``VM.current_bytes``). Memory beyond that
goes to the VMs that would use it, most rho first, and stays unallocated
if none would; missing memory is taken from the least rho first.
"""

import numpy as np

from memcanal.policy import base

DEFAULT_TAX_RATE = 0.75
DEFAULT_TOLERANCE = 0.01


def active_bytes(vm, tolerance=DEFAULT_TOLERANCE):
    """The memory the VM's misses need; all it has without a curve.

    For a fault-rate curve the tolerance is the ratio at which its
    faults meet their bound (base.FaultBound.allowed_ratio): a share of
    first-touch events as large as a per-access tolerance would be many
    times the faults the bound allows.
    """
    if vm.curve is None:
        return vm.current_bytes
    if vm.faults is not None:
        tolerance = vm.faults.allowed_ratio
    # The curve keeps its last value beyond its last point: the miss
    # ratio at max(baseline, last size), with all the memory it could use.
    enough = vm.curve.miss_ratios <= vm.curve.miss_ratios[-1] + tolerance
    return int(vm.curve.sizes[np.argmax(enough)])


def _claims(shares, sizes, active, idle_cost):
    """rho per VM: active pages count once, idle ones idle_cost times."""
    taxed = np.minimum(sizes, active) + idle_cost * np.maximum(
        sizes - active, 0)
    return np.divide(shares, taxed, out=np.full(len(sizes), np.inf),
                     where=taxed > 0)


def esx_emulation(vms, total_bytes, tax_rate=DEFAULT_TAX_RATE,
                  unit_bytes=base.DEFAULT_UNIT_BYTES,
                  tolerance=DEFAULT_TOLERANCE):
    """Targets for ``vms`` sharing at most ``total_bytes``; an
    Allocation whose details give each VM's active memory and final rho.
    """
    if not 0.0 <= tax_rate < 1.0:
        raise ValueError('the tax rate must be in [0, 1)')
    if unit_bytes <= 0:
        raise ValueError('the unit must be positive')
    idle_cost = 1.0 / (1.0 - tax_rate)
    shares = np.array([vm.shares for vm in vms], float)
    active = np.array([active_bytes(vm, tolerance) for vm in vms], np.int64)
    sizes = np.array([vm.current_bytes for vm in vms], np.int64)
    lowest = np.array([vm.min_bytes for vm in vms], np.int64)
    highest = np.array([vm.upper_bytes(total_bytes) for vm in vms],
                       np.int64)
    # A VM without a curve neither needs more nor has idle memory.
    curved = np.array([vm.curve is not None for vm in vms])
    spare = total_bytes - int(sizes.sum())
    while True:
        claims = _claims(shares, sizes, active, idle_cost)
        step = min(unit_bytes, abs(spare)) if spare else unit_bytes
        wants = curved & (sizes < active) & (sizes + step <= highest)
        if spare < 0:
            can_give = sizes - step >= lowest
            if not can_give.any():
                raise ValueError("the VMs' minimums exceed the %d bytes "
                                 'to share' % total_bytes)
            loser = _pick(claims, can_give, np.argmin)
            sizes[loser] -= step
            spare += step
            continue
        if spare > 0 and wants.any():
            sizes[_pick(claims, wants, np.argmax)] += step
            spare -= step
            continue
        idle = curved & (sizes - unit_bytes >= np.maximum(active, lowest))
        if not (idle.any() and wants.any()):
            break
        victim = _pick(claims, idle, np.argmin)
        receiver = _pick(claims, wants, np.argmax)
        after = sizes.copy()
        after[victim] -= unit_bytes
        after[receiver] += unit_bytes
        moved = _claims(shares, after, active, idle_cost)
        if moved[victim] >= moved[receiver]:
            break
        sizes = after
    names = [vm.name for vm in vms]
    return base.Allocation.of(
        'esx', vms, dict(zip(names, sizes.tolist())), tax_rate=tax_rate,
        unit_bytes=unit_bytes, tolerance=tolerance,
        active_bytes=dict(zip(names, active.tolist())),
        rho=dict(zip(names, claims.tolist())), unallocated_bytes=spare)


def _pick(claims, allowed, choose):
    """The index ``choose`` (np.argmin or np.argmax) finds among the
    allowed VMs' claims; the first VM on a tie."""
    candidates = np.flatnonzero(allowed)
    return candidates[choose(claims[candidates])]
