"""U-tube's dynamic memory balancing and overcommit admission (Liu et
al., sections 3.3 and 3.4, equations 1-7).

Balancing predicts each VM's demand from the change of its used memory
and swap (eqs. 1-3, lambda = 1.2 / U(t)), then gives every VM the same
expected utilization (eqs. 4-5), never below its Committed_AS, and only
changes a VM whose memory would move by delta of it (eq. 6; the paper
writes |M^T/M - M^U/M|, target against *used* memory, which is about
1/U - 1 for every VM whatever it needs, so we read it as the change
of the VM's memory, |M^T - M| / M, the adjustment it is there to
limit).

It runs when some VM is under-allocated (used above 90 % of its memory,
or predicted to need more than it has) or some VM's use is growing. The
paper has both: each window's demand, written to Xenstore, "immediately
trigger[s] a memory re-balancing", which "can pre-allocate memory to a VM
that has potential memory requirements before its memory becomes
under-allocated"; while every VM's use falls, each "would keep the
reclaimable memory until the memory balancing algorithm is triggered".
Reading the trigger as under-allocation alone left Fig. 12's VMs apart
for minutes after a program ended (fairness 0.35 against the paper's
0.9). Admission (eq. 7) admits a new VM only if the resizable VMs'
utilization stays under 90 % with it.
"""

import dataclasses

from memcanal.policy import base

DEFAULT_THRESHOLD = 0.9
DEFAULT_DELTA = 0.03
LAMBDA_NUMERATOR = 1.2


@dataclasses.dataclass(frozen=True)
class GuestUsage:
    """A VM's memory now and as the guest reported it, now and before."""

    name: str
    memory_bytes: int
    used_bytes: int
    previous_used_bytes: int
    swap_bytes: int = 0
    previous_swap_bytes: int = 0
    committed_bytes: int = 0
    max_bytes: int | None = None

    @property
    def utilization(self):
        return self.used_bytes / self.memory_bytes


def utilization(vms):
    """U(t): the VMs' used memory over their memory."""
    memory = sum(vm.memory_bytes for vm in vms)
    return sum(vm.used_bytes for vm in vms) / memory if memory else 0.0


def demand_increase(vm):
    """Eqs. 1-2: the change of used memory plus the change of swap."""
    return (vm.used_bytes - vm.previous_used_bytes) + (
        vm.swap_bytes - vm.previous_swap_bytes)


def predicted_demand(vm, host_utilization):
    """Eq. 3. A VM whose use fell keeps it (the paper keeps reclaimable
    memory until a balancing needs it)."""
    increase = demand_increase(vm)
    if increase <= 0:
        return vm.used_bytes
    factor = LAMBDA_NUMERATOR / max(host_utilization, 1e-9)
    return int(vm.used_bytes + factor * increase)


def under_allocated(vm, threshold=DEFAULT_THRESHOLD, demand=None):
    """Section 3.3: used at or above ``threshold`` of its memory, or a
    predicted demand above it."""
    return (vm.utilization >= threshold
            or (demand is not None and demand > vm.memory_bytes))


def _target(vm, demand, expected):
    target = max(int(demand / expected), vm.committed_bytes)
    return target if vm.max_bytes is None else min(target, vm.max_bytes)


def balance(vms, threshold=DEFAULT_THRESHOLD, delta=DEFAULT_DELTA,
            available_bytes=None):
    """Eqs. 1-6 over ``vms``; ``available_bytes`` of free host memory may
    be handed out too. An Allocation whose ``predicted`` is each VM's
    expected utilization at its target (M^P / M^T)."""
    now = utilization(vms)
    demand = {vm.name: predicted_demand(vm, now) for vm in vms}
    short = [vm.name for vm in vms
             if under_allocated(vm, threshold, demand[vm.name])]
    growing = [vm.name for vm in vms if demand_increase(vm) > 0]
    memory = sum(vm.memory_bytes for vm in vms) + (available_bytes or 0)
    expected = sum(demand.values()) / memory if memory else 0.0
    targets = {vm.name: vm.memory_bytes for vm in vms}
    if (short or growing) and expected > 0:
        for vm in vms:
            target = _target(vm, demand[vm.name], expected)
            if abs(target - vm.memory_bytes) / vm.memory_bytes >= delta:
                targets[vm.name] = target
    predicted = {vm.name: demand[vm.name] / targets[vm.name] for vm in vms}
    return base.Allocation(
        'utube', targets, predicted, base.geometric_mean(
            max(value, 1e-9) for value in predicted.values()),
        {'utilization': now, 'expected_utilization': expected,
         'predicted_demand_bytes': demand, 'under_allocated': short,
         'growing': growing,
         'delta': delta, 'threshold': threshold})


@dataclasses.dataclass(frozen=True)
class Admission:
    admitted: bool
    utilization: float
    targets: dict


def admit(new_bytes, free_bytes, vms, threshold=DEFAULT_THRESHOLD):
    """Eq. 7: may a VM needing ``new_bytes`` start, squeezing the VMs that
    are not above ``threshold`` (U-tube never takes memory from those)?
    If so, the squeezed targets balance them (eq. 5)."""
    resizable = [vm for vm in vms if vm.utilization <= threshold]
    capacity = free_bytes + sum(vm.memory_bytes for vm in resizable)
    if capacity <= 0:
        return Admission(False, float('inf'), {})
    expected = (new_bytes + sum(vm.used_bytes for vm in resizable)) / capacity
    if expected > threshold:
        return Admission(False, expected, {})
    return Admission(True, expected, {
        vm.name: _target(vm, vm.used_bytes, expected) for vm in resizable}
        if expected > 0 else {})
