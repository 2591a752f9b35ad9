import json

import numpy as np
import pytest

from memcanal.policy import isolated
from memcanal.tests.unit.policy import curves

MB = curves.MB


def allocate(vms, total_mb, delta, method='exact', unit_mb=4):
    return isolated.isolated_sharing(vms, total_mb * MB, delta,
                                     unit_bytes=unit_mb * MB, method=method)


def test_table2_shape_larger_delta_moves_more():
    tight = allocate(curves.table2(), 1536, 0.05)
    loose = allocate(curves.table2(), 1536, 0.25)
    assert sum(tight.targets.values()) == 1536 * MB
    assert sum(loose.targets.values()) == 1536 * MB
    # At 25 % the web server gives memory down to its bound, the search
    # VM gets it, the decision-support VM keeps just its working set.
    assert loose.targets['tpch'] == 336 * MB
    assert loose.targets['search'] >= 920 * MB
    assert loose.predicted['web'] == pytest.approx(1.24, abs=0.01)
    assert loose.geometric_mean == pytest.approx(0.43, abs=0.02)
    assert loose.geometric_mean < tight.geometric_mean <= 1.0


@pytest.mark.parametrize('delta', [0.0, 0.05, 0.25])
def test_every_vm_below_baseline_keeps_its_bound(delta):
    allocation = allocate(curves.table2(), 1536, delta)
    for vm in curves.table2():
        if allocation.targets[vm.name] < vm.baseline_bytes:
            assert allocation.predicted[vm.name] <= 1 + delta + 1e-9


@pytest.mark.parametrize('seed', range(8))
def test_exact_equals_exhaustive(seed):
    rng = np.random.default_rng(seed)
    vms = [curves.random_vm(rng, 'vm%d' % i)
           for i in range(2 + seed % 2)]
    total = 512 * len(vms)
    exact = allocate(vms, total, 0.1, unit_mb=16)
    exhaustive = allocate(vms, total, 0.1, 'exhaustive', unit_mb=16)
    assert exact.geometric_mean == pytest.approx(
        exhaustive.geometric_mean, rel=1e-12)


def test_greedy_stays_close_to_exact_on_steps():
    rng = np.random.default_rng(42)
    ratios = []
    for case in range(50):
        vms = [curves.random_vm(rng, 'vm%d' % i)
               for i in range(2 + case % 5)]
        total = 512 * len(vms)
        exact = allocate(vms, total, 0.1, unit_mb=8)
        greedy = allocate(vms, total, 0.1, 'greedy', unit_mb=8)
        assert sum(greedy.targets.values()) == total * MB
        assert exact.geometric_mean <= greedy.geometric_mean + 1e-12
        ratios.append(greedy.geometric_mean / exact.geometric_mean)
    # These curves are a few random steps, far from convex: greedy's
    # hulls and exchanges miss some optima. Measured: equal on 42 of 50,
    # 0.7 % worse on (geometric) average.
    assert 40 <= sum(ratio <= 1 + 1e-9 for ratio in ratios) < 50
    assert isolated.base.geometric_mean(ratios) < 1.01


def test_greedy_crosses_a_step_whole():
    # Every unit from 512 MB to 636 MB leaves 'cliff' at its misses: a
    # unit-by-unit greedy gains nothing with the first unit and stops.
    # Its hull is one segment from 512 to 640 MB, taken at once.
    cliff = curves.vm('cliff', [(64, 1.0), (640, 0.1)])
    flat = curves.vm('flat', [(64, 0.3)])
    for delta in (0.0, 0.25):
        greedy = allocate([cliff, flat], 1024, delta, 'greedy')
        exact = allocate([cliff, flat], 1024, delta)
        assert greedy.targets == exact.targets == {
            'cliff': 640 * MB, 'flat': 384 * MB}
        assert greedy.predicted['cliff'] == pytest.approx(0.1)


def test_greedy_takes_a_step_from_the_vm_that_loses_least():
    # 'wide' crosses its step to 768 MB with memory 'cheap' gives at
    # little loss; 'dear' may not give any (it would break its bound).
    wide = curves.vm('wide', [(64, 1.0), (768, 0.05)])
    cheap = curves.vm('cheap', [(64, 1.0), (256, 0.5), (512, 0.49)])
    dear = curves.vm('dear', [(64, 1.0), (448, 0.5), (512, 0.2)])
    greedy = allocate([wide, cheap, dear], 1536, 0.05, 'greedy')
    exact = allocate([wide, cheap, dear], 1536, 0.05)
    assert greedy.targets == exact.targets
    assert greedy.targets['wide'] == 768 * MB
    assert greedy.targets['dear'] == 512 * MB


def convex_vm(rng, name):
    # A point every unit; a power law is log-convex, so the cost is
    # convex in the units and every unit a corner of its hull.
    sizes = np.arange(4, 2049, 4)
    floor = rng.uniform(0, 0.2)
    ratios = floor + (1 - floor) * (1 + sizes / rng.uniform(50, 800)) ** (
        -rng.uniform(0.5, 3))
    return curves.vm(name, list(zip(sizes.tolist(), ratios.tolist())),
                     baseline=int(rng.integers(128, 1024)))


@pytest.mark.parametrize('seed', range(6))
def test_greedy_matches_exact_on_convex_curves(seed):
    rng = np.random.default_rng(seed)
    vms = [convex_vm(rng, 'vm%d' % i) for i in range(2 + seed)]
    total = sum(vm.baseline_bytes for vm in vms) // MB
    for delta in (0.0, 0.05, 0.3):
        exact = allocate(vms, total, delta)
        greedy = allocate(vms, total, delta, 'greedy')
        assert greedy.geometric_mean == pytest.approx(
            exact.geometric_mean, rel=1e-9)


def random_host(rng):
    """VMs with bounds, and memory off their baselines and off the
    unit grid; a host of some 0.7 to 1.3 times their baselines."""
    vms = []
    for i in range(int(rng.integers(1, 8))):
        vm = curves.random_vm(rng, 'vm%d' % i,
                              baseline=int(rng.integers(200, 900)),
                              points=int(rng.integers(2, 40)))
        bounds = {}
        if rng.random() < 0.3:
            bounds['min_bytes'] = int(rng.integers(0, 400)) * MB
        if rng.random() < 0.3:
            bounds['max_bytes'] = int(rng.integers(300, 1500)) * MB
        if rng.random() < 0.5:
            bounds['memory_bytes'] = int(rng.integers(100 * MB, 1200 * MB))
        if rng.random() < 0.3:
            # A fault-rate curve's floor (base.miss_floor), often far
            # below a curve of misses per access.
            bounds['miss_floor'] = float(10 ** rng.uniform(-6, -1))
        vms.append(isolated.base.VM(vm.name, vm.baseline_bytes, vm.curve,
                                    **bounds))
    total = int(sum(vm.baseline_bytes for vm in vms) * rng.uniform(0.7, 1.3))
    return vms, total


@pytest.mark.parametrize('seed', range(4))
def test_exact_finds_the_dense_programmes_optimum(seed):
    # The C search merges only the units not dominated; the numpy one
    # every unit. Equal costs may be reached by different allocations
    # (units a stay preference trades one for one between VMs).
    rng = np.random.default_rng(seed)
    for _ in range(50):
        vms, total = random_host(rng)
        delta = float(rng.choice([0.0, 0.05, 0.25]))
        unit = isolated._unit(total, int(rng.choice([1, 4, 8])) * MB)
        units = (total - sum(vm.current_bytes % unit for vm in vms)) // unit
        if units < 0:
            continue
        costs = [isolated._costs(vm, units, unit, delta) for vm in vms]
        dense = isolated._exact_dense(costs, units)
        found = {method: isolated._search(vms, units, unit, delta, method)
                 for method in ('exact', 'greedy')}
        if dense is None:
            assert found == {'exact': None, 'greedy': None}
            continue
        optimum = sum(cost[k] for cost, k in zip(costs, dense))
        exact, greedy = (sum(cost[k] for cost, k in zip(costs, found[m]))
                         for m in ('exact', 'greedy'))
        assert exact == pytest.approx(optimum, rel=0, abs=1e-12)
        assert sum(found['exact']) <= units
        assert sum(found['greedy']) <= units
        assert optimum - 1e-12 <= greedy < np.inf


def test_searches_check_their_arguments():
    vms, total = random_host(np.random.default_rng(0))
    args = list(isolated._runs(vms, isolated._Curves(vms), 100, 4 * MB,
                               0.05))
    for method in (isolated._allocate.exact, isolated._allocate.greedy):
        with pytest.raises(ValueError, match='steps'):
            method(*[args[0], args[1][:-1]] + args[2:])
        with pytest.raises(ValueError, match='bound'):
            method(*args[:4] + [args[4][:-1]] + args[5:])
        with pytest.raises(ValueError, match='offsets'):
            method(*args[:3] + [args[3][::-1].copy()] + args[4:])


def test_flat_curve_gives_memory_away():
    flat = curves.vm('flat', [(64, 0.2), (1024, 0.2)])
    hungry = curves.vm('hungry', [(64, 1.0), (512, 0.5), (960, 0.0)])
    allocation = allocate([flat, hungry], 1024, 0.0)
    assert allocation.targets['flat'] < 512 * MB
    assert allocation.targets['hungry'] > 512 * MB


def test_vm_without_curve_keeps_its_baseline():
    no_curve = isolated.base.VM('unknown', 500 * MB, None)
    allocation = allocate([no_curve] + curves.table2(), 2036, 0.25)
    assert allocation.targets['unknown'] == 500 * MB
    assert allocation.predicted['unknown'] == 1.0


def test_bounds_and_remainder():
    web, search, tpch = curves.table2()
    capped = isolated.base.VM('search', search.baseline_bytes, search.curve,
                              max_bytes=600 * MB)
    allocation = allocate([web, capped, tpch], 1537, 0.25)
    assert allocation.targets['search'] <= 600 * MB
    # The odd MiB is not lost.
    assert sum(allocation.targets.values()) == 1537 * MB


def test_infeasible_and_bad_arguments():
    web, search, tpch = curves.table2()
    at_least = isolated.base.VM('web', web.baseline_bytes, web.curve,
                                min_bytes=1200 * MB)
    with pytest.raises(ValueError, match='no allocation'):
        allocate([at_least, search, tpch], 1536, 0.25)
    with pytest.raises(ValueError, match='at most 3'):
        allocate(curves.table2() * 2, 3072, 0.1, 'exhaustive')
    with pytest.raises(ValueError, match='method'):
        allocate(curves.table2(), 1536, 0.1, 'annealing')


def test_large_host_coarsens_the_unit():
    rng = np.random.default_rng(3)
    vms = [curves.random_vm(rng, 'vm%d' % i, baseline=3072)
           for i in range(20)]
    allocation = allocate(vms, 20 * 3072, 0.05)
    assert allocation.details['unit_bytes'] > 4 * MB
    assert sum(allocation.targets.values()) == 20 * 3072 * MB


def test_vms_that_gain_nothing_stay_where_they_are():
    flat = [curves.vm('a', [(4, 0.0)]), curves.vm('b', [(4, 0.0)]),
            curves.vm('c', [(4, 0.3)], baseline=512)]
    for method in isolated.METHODS:
        allocation = allocate(flat, 1536, 0.05, method)
        assert allocation.targets == {'a': 512 * MB, 'b': 512 * MB,
                                      'c': 512 * MB}


def test_sizes_off_the_unit_grid():
    # 510 MB is between units of 4 MB, and 508 MB would break the bound.
    steep = curves.vm('steep', [(64, 1.0), (500, 0.5), (510, 0.1),
                                (1024, 0.05)], baseline=510)
    other = curves.vm('other', [(64, 1.0), (1024, 0.5)], baseline=514)
    for method in isolated.METHODS:
        allocation = allocate([steep, other], 1024, 0.05, method)
        assert sum(allocation.targets.values()) == 1024 * MB
        assert allocation.targets['steep'] >= 510 * MB
    # Staying is among the allocations, and no single unit gains.
    greedy = allocate([steep, other], 1024, 0.05, 'greedy')
    assert greedy.targets == {'steep': 510 * MB, 'other': 514 * MB}


def test_a_coarse_unit_keeps_staying_possible():
    # 16 GiB is no multiple of the 12 MiB unit of a 48 GiB host; a bound
    # that forbids any VM to shrink still has the allocation they have.
    cliff = [(1024, 0.9), (8192, 0.5), (16384, 0.2), (24576, 0.1)]
    vms = [curves.vm(name, cliff, baseline=16384) for name in 'abc']
    for method in isolated.METHODS:
        allocation = allocate(vms, 3 * 16384, 0.05, method)
        assert allocation.details['unit_bytes'] == 12 * MB
        assert set(allocation.targets.values()) == {16384 * MB}


def test_greedy_moves_from_the_vm_that_also_gains_most():
    # 'a' would gain most from a unit but loses nothing giving one; the
    # only other donor, 'b', loses as much as 'a' would gain. The move
    # that pays is from 'a' to 'b'.
    a = curves.vm('a', [(64, 0.8), (516, 0.4)])
    b = curves.vm('b', [(64, 1.0), (512, 0.5), (516, 0.35)])
    greedy = allocate([a, b], 1024, 0.05, 'greedy')
    assert greedy.targets == {'a': 508 * MB, 'b': 516 * MB}
    assert greedy.geometric_mean == pytest.approx(0.7 ** 0.5)


def test_exhaustive_on_a_large_host_matches_exact():
    rng = np.random.default_rng(7)
    vms = [curves.random_vm(rng, 'vm%d' % i, baseline=4096)
           for i in range(3)]
    exact = allocate(vms, 3 * 4096, 0.05)
    exhaustive = allocate(vms, 3 * 4096, 0.05, 'exhaustive')
    assert exhaustive.details['unit_bytes'] == exact.details['unit_bytes']
    assert exact.geometric_mean == pytest.approx(
        exhaustive.geometric_mean, rel=1e-12)


def test_allocation_is_json():
    allocation = allocate(curves.table2(), 1536, 0.05)
    assert json.loads(json.dumps(allocation.as_json())) == (
        allocation.as_json())


def test_curve_from_points():
    curve = isolated.base.curve_from_points([[8, 0.2], [4, 0.5], [8, 0.1]])
    assert curve.sizes.tolist() == [4, 8]
    # Sorted by size; a repeated size keeps the ratio given first.
    assert curve.miss_ratios.tolist() == [0.5, 0.2]
    vm = isolated.base.VM('vm', 4, curve)
    assert vm.relative_miss_ratio(8) == pytest.approx(0.4)
    assert vm.relative_miss_ratio(np.array([0, 8])).tolist() == (
        pytest.approx([2.0, 0.4]))
    for bad in ([], [[1]], [[-1, 0.5]], [[1, float('nan')]],
                [[float('inf'), 0.5]], None):
        with pytest.raises(ValueError):
            isolated.base.curve_from_points(bad)


@pytest.mark.parametrize('method', isolated.METHODS)
def test_predictions_are_the_curves_at_the_targets(method):
    no_curve = isolated.base.VM('unknown', 100 * MB, None)
    vms = [no_curve] + curves.table2()[:2] + [curves.sampled_vm(
        baseline=1024, delta=0.25)]
    allocation = allocate(vms, 2661, 0.25, method)
    assert allocation == isolated.base.Allocation.of(
        'isolated_sharing', vms, allocation.targets, **allocation.details)


def hungry(baseline=2048):
    """A VM whose misses fall with every 4 MiB up to 8 GiB, less and
    less (a convex cost, where greedy finds the optimum too)."""
    sizes = np.arange(2048, 8192 + 1, 4)
    ratios = 0.05 + 0.45 * np.exp(-(sizes - 2048) / 1024)
    return curves.vm('hungry', list(zip(sizes.tolist(), ratios.tolist())),
                     baseline=baseline)


@pytest.mark.parametrize('method', isolated.METHODS)
def test_a_sampled_vm_shrinks_to_where_its_faults_meet_the_bound(method):
    sampled = curves.sampled_vm(delta=0.05)
    allocation = allocate([sampled, hungry()], 4096 + 2048, 0.05, method)
    target = allocation.targets['sampled']
    assert target == curves.SAMPLED_BOUND_MB * MB
    assert sampled.faults.per_minute(sampled.miss_ratio(target)) <= 0.002
    assert sampled.faults.per_minute(
        sampled.miss_ratio(target - 4 * MB)) > 0.002
    # Its faults under the bound cost nothing: the mean is hungry's gain.
    assert allocation.predicted['sampled'] == 1.0


def test_the_fault_bound_decides_how_far_a_sampled_vm_shrinks():
    # Read as a curve of misses per access (floor 0.001), 1300 MiB
    # looks fine although it faults 2.4 times the bound.
    plain = curves.vm('sampled', curves.SAMPLED, baseline=4096)
    assert allocate([plain, hungry()], 6144, 0.05).targets['sampled'] == (
        1300 * MB)
    # A bound of 1 % of the working set per minute allows it.
    lax = curves.sampled_vm(bound=0.01)
    assert allocate([lax, hungry()], 6144, 0.05).targets['sampled'] == (
        1300 * MB)


def test_a_vm_faulting_past_its_bound_everywhere_keeps_its_memory():
    # Its longer reuses alone fault 6 % of its working set per minute
    # at any size below its 4 GiB.
    streaming = curves.sampled_vm(points=[(1024, 0.5), (2048, 0.01)])
    allocation = allocate([streaming, hungry()], 6144, 0.05)
    assert allocation.targets['sampled'] == 4096 * MB
