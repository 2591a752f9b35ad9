"""The benefit threshold (memcanal.policy.benefit)."""

import dataclasses

import pytest

from memcanal.policy import benefit
from memcanal.tests.unit.policy import curves

MB = curves.MB


def grower_and_giver(grower_at=512, giver_at=512):
    """A VM whose misses fall from 0.30 to 0.28 past 520 MiB and to 0.10
    past 600, and one that misses nothing above 300 MiB."""
    return [curves.vm('grower', [(64, 0.9), (520, 0.28), (600, 0.10)],
                      memory_bytes=grower_at * MB),
            curves.vm('giver', [(64, 1.0), (300, 0.001)],
                      memory_bytes=giver_at * MB)]


def test_predicted_benefit_sums_the_falls_of_the_miss_ratios():
    vms = grower_and_giver()
    # 0.9 -> 0.28 for the grower, nothing for the giver (0.001 both).
    assert benefit.predicted_benefit(
        vms, {'grower': 524 * MB, 'giver': 500 * MB}) == pytest.approx(0.62)
    vms = grower_and_giver(grower_at=524, giver_at=500)
    assert benefit.predicted_benefit(
        vms, {'grower': 528 * MB, 'giver': 496 * MB}) == 0.0
    assert benefit.predicted_benefit(
        vms, {'grower': 600 * MB, 'giver': 424 * MB}) == pytest.approx(0.18)
    # A VM without a target or a curve counts nothing.
    vms[1] = dataclasses.replace(vms[1], curve=None)
    assert benefit.predicted_benefit(vms, {'grower': 600 * MB}) == (
        pytest.approx(0.18))


def test_an_allocation_below_the_threshold_is_not_made():
    vms = grower_and_giver(grower_at=524, giver_at=500)
    small = {'grower': 540 * MB, 'giver': 484 * MB}
    large = {'grower': 600 * MB, 'giver': 424 * MB}
    assert not benefit.worth_making(vms, small, 0.05, 0.01)
    assert benefit.worth_making(vms, large, 0.05, 0.01)
    assert not benefit.worth_making(vms, large, 0.05, 0.2)
    # 0 turns the threshold off.
    assert benefit.worth_making(vms, small, 0.05, 0.0)


def test_a_vm_past_its_bound_gets_its_memory_back_whatever_the_benefit():
    """A VM shrunk to 480 MiB has 3 times its misses at its 512 MiB
    baseline: past a bound of 1.05. Given its memory back from a VM that
    then misses more, the sum falls by nothing, and it is made."""
    shrunk = curves.vm('shrunk', [(64, 0.9), (500, 0.3)],
                       memory_bytes=480 * MB)
    lender = curves.vm('lender', [(64, 1.0), (540, 0.3)],
                       memory_bytes=544 * MB)
    assert benefit.past_bound(shrunk, 0.05)
    assert not benefit.past_bound(shrunk, 3.0)
    assert not benefit.past_bound(lender, 0.05)
    back = {'shrunk': 512 * MB, 'lender': 512 * MB}
    assert benefit.predicted_benefit([shrunk, lender], back) == (
        pytest.approx(-0.1))
    assert benefit.worth_making([shrunk, lender], back, 0.05, 0.01)
    assert not benefit.worth_making([shrunk, lender], back, 3.0, 0.01)


def test_falls_each_within_the_threshold_do_not_add_up_to_it():
    """Two VMs each predicted 0.006 lower: 0.012 in all, but neither
    resize moves its VM's prediction by min_benefit (0.01)."""
    vms = [curves.vm(name, [(64, 0.9), (512, 0.016), (560, 0.010)],
                     memory_bytes=512 * MB) for name in ('one', 'two')]
    grown = {'one': 560 * MB, 'two': 560 * MB}
    assert benefit.predicted_benefit(vms, grown) == pytest.approx(0.012)
    assert benefit.predicted_benefit(vms, grown, 0.01) == 0.0
    assert not benefit.worth_making(vms, grown, 0.05, 0.01)
    assert benefit.worth_making(vms, grown, 0.05, 0.005)


def with_band(vm, spread):
    """``vm`` with a band ``spread`` either side of its curve."""
    points = [[int(size), float(ratio)] for size, ratio in zip(
        vm.curve.sizes, vm.curve.miss_ratios)]
    return dataclasses.replace(vm, band=tuple(
        curves.base.curve_from_points(
            [[size, min(1.0, max(0.0, ratio + sign * spread))]
             for size, ratio in points]) for sign in (-1, 1)))


def test_a_shrink_is_held_by_a_band_wider_than_the_benefit():
    """The giver shrinks from 512 to 424 MiB for the grower's fall of
    0.18 (0.28 to 0.10): a band from 0 to 0.201 there (its curve's 0.001
    + 0.2) could hide a rise larger than the gain, and holds it; one to
    0.051 does not."""
    grower, giver = grower_and_giver(grower_at=520, giver_at=512)
    targets = {'grower': 608 * MB, 'giver': 424 * MB}
    wide = [grower, with_band(giver, 0.2)]
    weighed, held = benefit.held_by_band(wide, targets)
    assert weighed == pytest.approx(0.18)
    assert held == {'giver': pytest.approx((0.0, 0.201))}
    narrow = [grower, with_band(giver, 0.05)]
    assert benefit.held_by_band(narrow, targets) == (
        pytest.approx(0.18), {})
    # A growing VM is never held, whatever its band; nor one without.
    assert benefit.held_by_band([with_band(grower, 0.5), giver],
                                targets)[1] == {}


def test_with_no_benefit_any_width_holds_a_shrink_and_none_does_not():
    _, giver = grower_and_giver()
    shrink = {'giver': 424 * MB}
    assert benefit.held_by_band([with_band(giver, 0.001)], shrink)[1] == {
        'giver': pytest.approx((0.0, 0.002))}
    assert benefit.held_by_band([with_band(giver, 0.0)], shrink)[1] == {}
