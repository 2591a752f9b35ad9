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
