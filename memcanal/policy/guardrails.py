"""Guardrails: what every policy's targets pass through before a VM is
resized, whatever the policy and however wrong its inputs.

In order: a VM that opted out, or changed less than ``hold_seconds``
ago, keeps its memory; a target is clamped to the VM's floor (its
measured working set plus the guest kernel, or the operator's minimum,
the larger) and ceiling; a step changes at most ``max_step_fraction`` of
the VM's memory; a change below ``min_change_bytes``, or below
``min_change_fraction`` of the VM's memory, is not made; and
the VMs that grow may not take more than those that shrink give back
plus the host's free memory.
"""

import dataclasses

from memcanal.policy import base


@dataclasses.dataclass(frozen=True)
class Rails:
    kernel_bytes: int = 64 * base.MB
    max_step_fraction: float = 0.05
    min_change_bytes: int = 4 * base.MB
    hold_seconds: float = 300.0
    min_change_fraction: float = 0.0


@dataclasses.dataclass(frozen=True)
class Limits:
    """One VM's: its memory now, what bounds it, when it last changed
    (seconds, on the clock ``apply`` is given)."""

    memory_bytes: int
    wss_bytes: int | None = None
    floor_bytes: int | None = None
    ceiling_bytes: int | None = None
    opt_out: bool = False
    last_change_at: float | None = None


@dataclasses.dataclass(frozen=True)
class Guarded:
    """The targets of the VMs that change, and per VM the rails that held
    its target back."""

    targets: dict
    reasons: dict


# Working-set estimators by preference: PRL sees reads and writes; the
# sampler (first touches of a hashed sample of pages, any host) sees both
# too, from a sample; PML only writes, and so does PML's estimator on
# Xen's own log-dirty (xen_logdirty, memcanal.agent.write_log); ESX
# sampling is the least exact.
WSS_ESTIMATORS = ('prl', 'sampled', 'pml', 'xen_logdirty', 'esx')


def _preferred(wss):
    for name in WSS_ESTIMATORS:
        if wss.get(name) is not None:
            return name
    return None


def preferred_wss(wss):
    """The working set of the most exact estimator a report gave, or
    None; ``wss`` maps estimator names to bytes."""
    name = _preferred(wss)
    return None if name is None else wss[name]


def preferred_bounds(wss, wss_bounds):
    """The 95 % interval, (low, high) bytes, of preferred_wss's working
    set, or None when the report gave it none (an estimate that is no
    sample's, or an agent before RPC 1.7): it is then read as exact.
    ``wss_bounds`` maps estimator names to [low, high]."""
    bounds = (wss_bounds or {}).get(_preferred(wss))
    return None if bounds is None else (int(bounds[0]), int(bounds[1]))


def demand_wss(wss_bytes, bounds):
    """The working set a VM's demand and floor count: the upper bound of
    its interval (``bounds``, (low, high) or None), never below the
    estimate itself; the estimate when it has none."""
    if bounds is None or wss_bytes is None:
        return wss_bytes
    return max(wss_bytes, bounds[1])


def floor_of(limits, rails):
    """The working set plus the kernel, or the operator's floor, the
    larger; no floor is above the ceiling."""
    floor = max((limits.wss_bytes or 0) + rails.kernel_bytes,
                limits.floor_bytes or 0)
    if limits.ceiling_bytes is not None:
        floor = min(floor, limits.ceiling_bytes)
    return floor


def _clamp(target, limits, rails, reasons):
    floor = floor_of(limits, rails)
    if target < floor:
        reasons.append('floor')
        target = floor
    if limits.ceiling_bytes is not None and target > limits.ceiling_bytes:
        reasons.append('ceiling')
        target = limits.ceiling_bytes
    step = int(rails.max_step_fraction * limits.memory_bytes)
    change = target - limits.memory_bytes
    if abs(change) > step:
        reasons.append('step')
        target = limits.memory_bytes + (step if change > 0 else -step)
    return target


def _least_change(limits, rails):
    """The smallest change of a VM's memory that is made."""
    return max(rails.min_change_bytes,
               rails.min_change_fraction * limits.memory_bytes, 1)


def _held(limits, rails, now):
    if limits.opt_out:
        return 'opt_out'
    if (limits.last_change_at is not None
            and now - limits.last_change_at < rails.hold_seconds):
        return 'hold'
    return None


def apply(proposed, limits, rails, now, free_bytes=0):
    """``proposed`` targets (name -> bytes) through the rails; targets of
    VMs without ``limits`` are ignored."""
    reasons = {}
    targets = {}
    for name, target in proposed.items():
        if name not in limits:
            continue
        vm = limits[name]
        reasons[name] = []
        held = _held(vm, rails, now)
        if held is not None:
            reasons[name].append(held)
            continue
        target = _clamp(int(target), vm, rails, reasons[name])
        if abs(target - vm.memory_bytes) < _least_change(vm, rails):
            if target != vm.memory_bytes:
                reasons[name].append('min_change')
            continue
        targets[name] = target
    _fit_budget(targets, limits, rails, free_bytes, reasons)
    return Guarded(targets, {name: why for name, why in reasons.items()
                             if why})


def _fit_budget(targets, limits, rails, free_bytes, reasons):
    """Scale the growths down to what the shrinks and free memory give;
    a growth scaled below the smallest change is not made."""
    grows = {name: target - limits[name].memory_bytes
             for name, target in targets.items()
             if target > limits[name].memory_bytes}
    budget = free_bytes + sum(limits[name].memory_bytes - target
                              for name, target in targets.items()
                              if target < limits[name].memory_bytes)
    wanted = sum(grows.values())
    if wanted <= budget:
        return
    scale = max(budget, 0) / wanted
    for name, grow in grows.items():
        reasons[name].append('budget')
        granted = int(grow * scale)
        if granted < _least_change(limits[name], rails):
            del targets[name]
        else:
            targets[name] = limits[name].memory_bytes + granted
