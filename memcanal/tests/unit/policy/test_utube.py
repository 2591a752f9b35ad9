import pytest

from memcanal.policy import utube

MB = 2 ** 20


def usage(name, memory, used, before, **kwargs):
    return utube.GuestUsage(name, memory * MB, used * MB, before * MB,
                            **kwargs)


def test_predicted_demand_equation_3():
    vm = usage('a', 1000, 600, 500, swap_bytes=20 * MB,
               previous_swap_bytes=10 * MB)
    # lambda = 1.2 / 0.6; increase = 100 + 10 MB.
    assert utube.predicted_demand(vm, 0.6) == int(600 * MB + 2.0 * 110 * MB)
    shrinking = usage('b', 1000, 400, 500)
    assert utube.predicted_demand(shrinking, 0.6) == 400 * MB


def test_balance_equalises_utilization():
    busy = usage('busy', 1000, 950, 900)
    calm = usage('calm', 1000, 300, 300)
    allocation = utube.balance([busy, calm])
    details = allocation.details
    assert details['under_allocated'] == ['busy']
    assert details['utilization'] == pytest.approx(0.625)
    demand = details['predicted_demand_bytes']
    assert demand['busy'] == int(950 * MB + 1.2 / 0.625 * 50 * MB)
    expected = (demand['busy'] + demand['calm']) / (2000 * MB)
    assert details['expected_utilization'] == pytest.approx(expected)
    for name in ('busy', 'calm'):
        assert allocation.targets[name] == int(demand[name] / expected)
        assert allocation.predicted[name] == pytest.approx(expected,
                                                           rel=1e-6)
    assert allocation.targets['busy'] > 1000 * MB > allocation.targets['calm']


def test_vms_keep_reclaimable_memory_while_no_use_grows():
    vms = [usage('a', 1000, 500, 550), usage('b', 1000, 200, 200)]
    allocation = utube.balance(vms)
    assert allocation.targets == {'a': 1000 * MB, 'b': 1000 * MB}
    assert allocation.details['growing'] == []


def test_a_growing_vm_is_given_memory_before_it_is_short():
    growing = usage('growing', 1000, 500, 450)
    idle = usage('idle', 1000, 200, 250)
    allocation = utube.balance([growing, idle])
    assert allocation.details['under_allocated'] == []
    assert allocation.details['growing'] == ['growing']
    # The idle VM's use fell: it gives its reclaimable memory.
    assert allocation.targets['growing'] > 1000 * MB
    assert allocation.targets['idle'] < 1000 * MB
    assert allocation.predicted['growing'] == pytest.approx(
        allocation.predicted['idle'], rel=1e-6)


def test_delta_suppresses_small_changes():
    busy = usage('busy', 1000, 910, 910)
    near = usage('near', 1000, 905, 905)
    allocation = utube.balance([busy, near], available_bytes=40 * MB)
    # Both would move by about 1 % of their memory: below delta.
    assert allocation.targets == {'busy': 1000 * MB, 'near': 1000 * MB}
    assert utube.balance([busy, near], available_bytes=40 * MB,
                         delta=0.001).targets['busy'] > 1000 * MB


def test_committed_floor_and_balloon_cap():
    busy = usage('busy', 1000, 990, 900, max_bytes=1100 * MB)
    committed = usage('committed', 1000, 100, 100,
                      committed_bytes=800 * MB)
    targets = utube.balance([busy, committed]).targets
    assert targets['busy'] == 1100 * MB
    assert targets['committed'] == 800 * MB


def test_admission_equation_7():
    vms = [usage('a', 1000, 500, 500), usage('b', 1000, 400, 400)]
    # (M^R + 900) / (free + 2000) <= 0.9.
    yes = utube.admit(900 * MB, 0, vms)
    assert yes.admitted and yes.utilization == pytest.approx(0.9)
    assert yes.targets == {'a': int(500 * MB / 0.9),
                           'b': int(400 * MB / 0.9)}
    no = utube.admit(901 * MB, 0, vms)
    assert not no.admitted and no.targets == {}


def test_admission_never_squeezes_a_vm_above_the_threshold():
    vms = [usage('hot', 1000, 950, 950), usage('cool', 1000, 100, 100)]
    admission = utube.admit(500 * MB, 200 * MB, vms)
    assert admission.admitted
    assert 'hot' not in admission.targets
    assert admission.utilization == pytest.approx(600 / 1200)
