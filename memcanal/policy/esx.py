"""VMware ESX server emulation (Lu and Shen, Hcache, section 4.2).

ESX divides memory by proportional shares with an idle memory tax
(Waldspurger, OSDI'02): a VM's claim is its shares per page,

    rho = S / (P * (f + k * (1 - f))),  k = 1 / (1 - tax_rate),

where P is its memory and f the fraction of it in active use, so idle
pages count k times against it. Memory is taken from the VM of least
rho (the victim) and given to the VM of most rho.

ESX samples pages to estimate f. Here the miss-ratio curve says it: the
active memory is the smallest size at which the VM misses (within
``tolerance``) no more than with all its memory, so a VM that streams
through much data without reusing it is a victim although its working
set is large, which sampling cannot see. A VM only receives memory while
its curve still falls above its current size.
"""

import numpy as np

from memcanal.policy import base

DEFAULT_TAX_RATE = 0.75
DEFAULT_TOLERANCE = 0.01


def active_bytes(vm, tolerance=DEFAULT_TOLERANCE):
    """Memory the VM needs to miss no more than with all of it."""
    if vm.curve is None:
        return vm.baseline_bytes
    sizes, ratios = vm.curve.sizes, vm.curve.miss_ratios
    reference = float(vm.miss_ratio(max(vm.baseline_bytes, sizes[-1])))
    enough = np.flatnonzero(ratios <= reference + tolerance)
    return min(int(sizes[enough[0]]), vm.baseline_bytes)


def _rho(vm, size, active, idle_cost):
    active_fraction = min(1.0, active / size) if size > 0 else 1.0
    return vm.shares / (size * (active_fraction + idle_cost * (
        1.0 - active_fraction)))


def _benefits(vm, size, total_bytes):
    """Whether more memory would lower the VM's misses."""
    if vm.curve is None or size >= vm.upper_bytes(total_bytes):
        return False
    beyond = vm.curve.miss_ratios[vm.curve.sizes > size]
    return beyond.size > 0 and beyond.min() < float(vm.miss_ratio(size))


def esx_emulation(vms, total_bytes, tax_rate=DEFAULT_TAX_RATE,
                  unit_bytes=base.DEFAULT_UNIT_BYTES,
                  tolerance=DEFAULT_TOLERANCE):
    """Targets for ``vms`` sharing ``total_bytes``, starting from their
    baselines (the remainder goes to the VM of most shares per page);
    an Allocation."""
    if not 0.0 <= tax_rate < 1.0:
        raise ValueError('the tax rate must be in [0, 1)')
    idle_cost = 1.0 / (1.0 - tax_rate)
    sizes = {vm.name: vm.baseline_bytes for vm in vms}
    active = {vm.name: active_bytes(vm, tolerance) for vm in vms}
    spare = total_bytes - sum(sizes.values())
    if spare < 0:
        raise ValueError('the baselines exceed the total memory')
    while True:
        rho = {vm.name: _rho(vm, sizes[vm.name], active[vm.name], idle_cost)
               for vm in vms}
        receivers = [vm for vm in vms
                     if _benefits(vm, sizes[vm.name], total_bytes)]
        if not receivers:
            break
        receiver = max(receivers, key=lambda vm: rho[vm.name])
        if spare >= unit_bytes:
            sizes[receiver.name] += unit_bytes
            spare -= unit_bytes
            continue
        victims = [vm for vm in vms if vm is not receiver and sizes[
            vm.name] - unit_bytes >= max(active[vm.name], vm.min_bytes)]
        if not victims:
            break
        victim = min(victims, key=lambda vm: rho[vm.name])
        after_victim = _rho(victim, sizes[victim.name] - unit_bytes,
                            active[victim.name], idle_cost)
        after_receiver = _rho(receiver, sizes[receiver.name] + unit_bytes,
                              active[receiver.name], idle_cost)
        if after_victim >= after_receiver:
            break
        sizes[victim.name] -= unit_bytes
        sizes[receiver.name] += unit_bytes
    return base.Allocation.of(
        'esx', vms, sizes, tax_rate=tax_rate, unit_bytes=unit_bytes,
        active_bytes=active, unallocated_bytes=spare)
