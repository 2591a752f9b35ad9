"""Whether a new allocation is worth making: a benefit threshold.

A curve is measured again every tracing window, and each measure moves
its steps a little: the optimum moves with them, and a policy that
follows it resizes its VMs for ever by a few MiB, each move predicting
less than the prediction's own error. An allocation is made only when
the VMs' curves predict its miss ratios, summed, at least
``min_benefit`` below those at the memory they have now, counting only
the VMs whose own miss ratio falls by at least that; a steady workload
then reaches a steady size. The isolation bound is kept
whatever the benefit: a VM already past its bound is given back its
memory even when the others lose more than it gains.

A sampled curve comes with its 95 % band (memcanal.rpc.reports): where
the band at a VM's smaller target is wider than what the whole move is
predicted to gain, the curve cannot tell whether shrinking it costs more
than the move buys, and the VM keeps its memory (held_by_band).
"""

from memcanal.policy import isolated


def predicted_benefit(vms, targets, least_gain=0.0):
    """How much lower the VMs' miss ratios would be, summed, at
    ``targets`` (name -> bytes) than at their memory now, as each VM's
    curve predicts them; VMs without a curve or a target count 0, and
    so does a VM's fall smaller than ``least_gain`` (a rise counts
    whole)."""
    changes = (float(vm.miss_ratio(vm.current_bytes))
               - float(vm.miss_ratio(targets[vm.name]))
               for vm in vms if vm.curve is not None and vm.name in targets)
    return sum(change for change in changes
               if change < 0 or change >= least_gain)


def past_bound(vm, delta):
    """Whether a VM below its baseline has more than ``1 + delta`` times
    its misses there (isolated sharing's isolation bound)."""
    return (vm.curve is not None and vm.current_bytes < vm.baseline_bytes
            and not isolated.within_bound(
                float(vm.relative_miss_ratio(vm.current_bytes)), delta))


def worth_making(vms, targets, delta, min_benefit):
    """Whether the allocation ``targets`` is to be made: it predicts at
    least ``min_benefit`` (absolute miss ratios, summed) less, counting
    only the VMs whose own miss ratio falls by that much (a resize that
    moves a VM's prediction by less is within the prediction's error: two
    such did not make one worth making), or some VM is past its isolation
    bound now; always with ``min_benefit`` 0."""
    return (min_benefit <= 0 or any(past_bound(vm, delta) for vm in vms)
            or predicted_benefit(vms, targets, min_benefit) >= min_benefit)


def band_at(vm, size):
    """(low, high) of the VM's band at ``size`` bytes, or None without
    one."""
    if vm.band is None:
        return None
    low, high = vm.band
    return float(low.at(size)), float(high.at(size))


def held_by_band(vms, targets, least_gain=0.0):
    """The shrinks of ``targets`` not to make, and the benefit they were
    weighed against: (benefit, {name: (low, high)}).

    The benefit is predicted_benefit's over all ``vms`` (counting the
    shrinking VMs' own rises), at least 0. A VM to shrink (its target
    below its memory now) whose band at the target is wider than it is
    held, with the band there; a VM without a band, or whose band has
    no width there, never is.
    """
    benefit = max(predicted_benefit(vms, targets, least_gain), 0.0)
    held = {}
    for vm in vms:
        target = targets.get(vm.name)
        if target is None or target >= vm.current_bytes:
            continue
        band = band_at(vm, target)
        if band is not None and band[1] - band[0] > benefit:
            held[vm.name] = band
    return benefit, held
