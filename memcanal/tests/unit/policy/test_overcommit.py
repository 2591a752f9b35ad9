import pytest

from memcanal.policy import guardrails
from memcanal.policy import overcommit

MB = 2 ** 20
GB = 2 ** 30
RAILS = guardrails.Rails(kernel_bytes=64 * MB)
WIDE = overcommit.Bounds(min_ratio=0.5, max_ratio=10.0, max_step=10.0,
                         min_change=0.0)


def guests(*wss_mb, flavor=1 * GB):
    return [overcommit.Guest(flavor, None if wss is None else wss * MB)
            for wss in wss_mb]


def test_demand_fraction_counts_unmeasured_vms_whole():
    # (448 + 64) of 1024, and 1024 of 1024 for the unmeasured one.
    assert overcommit.demand_fraction(guests(448, None), RAILS) == 0.75


def test_demand_fraction_of_no_flavor_memory_is_none():
    assert overcommit.demand_fraction([], RAILS) is None


def test_ideal_ratio_keeps_demand_at_the_target_utilization():
    # d = (448 + 64) / 1024 = 0.5: filled to capacity * 1.8 of flavor
    # memory, the host's VMs demand 0.9 of its capacity.
    proposal = overcommit.propose(1.0, guests(448, 448), WIDE, RAILS)
    assert proposal.ideal == pytest.approx(1.8)
    assert proposal.ratio == 1.8
    assert proposal.demand_fraction == 0.5
    assert proposal.reasons == ()


def test_ratio_is_clamped_to_the_bounds():
    bounds = overcommit.Bounds(min_ratio=1.0, max_ratio=1.5, max_step=5.0)
    idle = overcommit.propose(1.0, guests(0, 0), bounds, RAILS)
    assert idle.ratio == 1.5 and idle.reasons == ('max_ratio',)
    busy = overcommit.propose(1.4, guests(1024, 960), bounds, RAILS)
    assert busy.ideal < 1.0
    assert busy.ratio == 1.0 and busy.reasons == ('min_ratio',)


def test_ratio_moves_at_most_max_step_each_way():
    bounds = overcommit.Bounds(max_ratio=3.0, max_step=0.1)
    up = overcommit.propose(1.0, guests(0), bounds, RAILS)
    assert up.ratio == 1.1 and up.reasons == ('max_ratio', 'max_step')
    down = overcommit.propose(2.0, guests(1024), bounds, RAILS)
    assert down.ratio == 1.9 and down.reasons == ('min_ratio', 'max_step')


def test_a_step_of_exactly_max_step_is_not_reported_as_held_back():
    bounds = overcommit.Bounds(max_ratio=1.1, max_step=0.1)
    assert overcommit.propose(1.0, guests(0), bounds, RAILS).reasons == (
        'max_ratio',)


def test_steps_reach_the_bound_and_then_stop():
    bounds = overcommit.Bounds(max_ratio=1.5, max_step=0.1, min_change=0.02)
    current, seen = 1.0, []
    for _ in range(10):
        ratio = overcommit.propose(current, guests(0), bounds, RAILS).ratio
        if ratio is None:
            break
        seen.append(ratio)
        current = ratio
    assert seen == [1.1, 1.2, 1.3, 1.4, 1.5]


def test_a_change_under_min_change_is_not_made():
    bounds = overcommit.Bounds(max_ratio=5.0, min_change=0.05)
    # ideal 1.8
    kept = overcommit.propose(1.76, guests(448, 448), bounds, RAILS)
    assert kept.ratio is None and kept.reasons == ('min_change',)
    assert kept.ideal == pytest.approx(1.8)
    moved = overcommit.propose(1.75, guests(448, 448), bounds, RAILS)
    assert moved.ratio == 1.8


def test_already_at_the_ratio_is_no_change_even_without_min_change():
    bounds = overcommit.Bounds(max_ratio=5.0, min_change=0.0)
    assert overcommit.propose(1.8, guests(448, 448), bounds,
                              RAILS).ratio is None


def test_a_host_with_too_few_measured_vms_keeps_its_ratio():
    bounds = overcommit.Bounds(min_measured_instances=2)
    proposal = overcommit.propose(1.2, guests(0, None, None), bounds, RAILS)
    assert proposal.ratio is None
    assert proposal.reasons == ('too_few_measured',)
    assert (proposal.measured, proposal.instances) == (1, 3)
    assert overcommit.propose(1.2, [], overcommit.Bounds(),
                              RAILS).ratio is None


def test_unmeasured_vms_pull_the_ratio_down():
    bounds = overcommit.Bounds(max_ratio=5.0, max_step=5.0)
    alone = overcommit.propose(1.0, guests(448), bounds, RAILS).ratio
    with_unknown = overcommit.propose(1.0, guests(448, None), bounds,
                                      RAILS).ratio
    assert alone == 1.8 and with_unknown == 1.2


def test_ratio_is_rounded():
    ratio = overcommit.propose(1.0, guests(100), WIDE, RAILS).ratio
    assert ratio == round(ratio, overcommit.DIGITS)


@pytest.mark.parametrize('kwargs', [
    dict(min_ratio=2.0, max_ratio=1.0), dict(min_ratio=0.0),
    dict(max_step=0.0), dict(min_change=-1.0),
    dict(target_utilization=0.0), dict(target_utilization=1.5)])
def test_inconsistent_bounds_are_refused(kwargs):
    with pytest.raises(ValueError):
        overcommit.Bounds(**kwargs)


def test_proposal_as_json_is_plain():
    proposal = overcommit.propose(1.0, guests(0), overcommit.Bounds(), RAILS)
    assert proposal.as_json()['reasons'] == ['max_ratio', 'max_step']
    assert proposal.as_json()['ratio'] == 1.1
