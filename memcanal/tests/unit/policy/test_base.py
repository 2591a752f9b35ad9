"""What every policy shares: relative miss ratios from a floor, and the
floor that turns a fault-rate curve's isolation bound into a bound on
its faults per minute."""

import numpy as np
import pytest

from memcanal.policy import base
from memcanal.tests.unit.policy import curves

MB = base.MB


def test_only_a_sampled_curve_with_its_rates_is_bounded_by_faults():
    stats = curves.SAMPLED_STATS
    for method in ('hcache', 'shards', 'exact', 'aet'):
        assert base.fault_bound(method, curves.SAMPLED_WSS, stats,
                                0.002) is None
    # Without the touch rate or the working set the ratios cannot be
    # turned into faults: the curve is read as any other.
    assert base.fault_bound('sampled', curves.SAMPLED_WSS, {}, 0.002) is None
    assert base.fault_bound('sampled', None, stats, 0.002) is None
    assert base.fault_bound('sampled', 0, stats, 0.002) is None
    assert base.miss_floor(None, 0.05) == base.MIN_MISS_RATIO
    with pytest.raises(ValueError):
        base.fault_bound('sampled', curves.SAMPLED_WSS, stats, 0.0)


def test_the_allowed_ratio_is_the_bound_over_the_touch_rate():
    faults = base.fault_bound('sampled', curves.SAMPLED_WSS,
                              curves.SAMPLED_STATS, 0.002)
    # 262,144 pages touched per 10 s; 0.2 % of them per minute allowed.
    assert faults.allowed_ratio == pytest.approx(0.002 * 10 / 60)
    assert faults.per_minute(faults.allowed_ratio) == pytest.approx(0.002)
    assert faults.per_minute([0.0003, 0.0008]).tolist() == pytest.approx(
        [0.0018, 0.0048])
    assert base.miss_floor(faults, 0.05) == pytest.approx(
        faults.allowed_ratio / 1.05)
    # A VM touching nothing faults at no size; a lax bound caps at 1.
    idle = base.fault_bound('sampled', MB, {'sampled_touches_per_s': 0},
                            0.002)
    assert idle.allowed_ratio == 1.0
    lax = base.fault_bound('sampled', MB, {'sampled_touches_per_s': 1},
                           1.0)
    assert lax.allowed_ratio == 1.0


def test_relative_miss_ratio_meets_one_plus_delta_where_faults_meet_bound():
    vm = curves.sampled_vm(delta=0.05)
    sizes = np.array([size for size, _ in curves.SAMPLED]) * MB
    relative = vm.relative_miss_ratio(sizes)
    rates = vm.faults.per_minute(vm.miss_ratio(sizes))
    np.testing.assert_array_equal(relative <= 1.05 + 1e-12, rates <= 0.002)
    # Sizes faulting under bound / (1 + delta) cost nothing.
    assert relative[sizes >= 1400 * MB].tolist() == [1.0, 1.0, 1.0]


def test_a_fault_rate_curve_takes_no_fault_with_all_the_memory():
    curve = base.curve_from_points([[1024 * MB, 0.5], [2048 * MB, 0.01],
                                    [8192 * MB, 0.005]])
    read = base.fault_curve(curve, 4096 * MB)
    # Past its last point the sampler only knows that longer reuses and
    # first touches fault: up to the flavor they do; from it, nothing.
    assert read.at(np.array([2048, 4095, 4096, 9000]) * MB).tolist() == [
        0.01, 0.01, 0.0, 0.0]
    assert base.fault_curve(curve, 16384 * MB).at(12000 * MB) == 0.005


def test_a_vm_faulting_past_the_bound_at_every_measured_size_keeps_its_flavor():
    # 1 % of its first touches are reuses longer than the sampler tells
    # apart: 6 % of its working set per minute below its 4 GiB. Taken
    # relative to that extrapolation it could shrink to 2 GiB; against
    # the bound it cannot shrink at all.
    vm = curves.sampled_vm(points=[(1024, 0.5), (2048, 0.0102),
                                   (3072, 0.01)])
    sizes = np.array([2048, 3072, 4092, 4096]) * MB
    assert (vm.relative_miss_ratio(sizes[:3]) > 1.05).all()
    assert vm.relative_miss_ratio(sizes[3]) == 1.0
