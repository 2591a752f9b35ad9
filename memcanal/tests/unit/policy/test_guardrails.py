import numpy as np
import pytest

from memcanal.policy import guardrails

MB = 2 ** 20
RAILS = guardrails.Rails(kernel_bytes=64 * MB, max_step_fraction=0.05,
                         min_change_bytes=4 * MB, hold_seconds=300)


def limits(memory=1024, **kwargs):
    return guardrails.Limits(memory_bytes=memory * MB, **kwargs)


def guard(proposed_mb, vm_limits, now=1000.0, free=0):
    return guardrails.apply({name: mb * MB for name, mb in
                             proposed_mb.items()}, vm_limits, RAILS, now,
                            free_bytes=free * MB)


def test_step_is_at_most_five_percent():
    result = guard({'a': 512, 'b': 2048}, {'a': limits(), 'b': limits()},
                   free=100)
    assert result.targets == {'a': 1024 * MB - int(0.05 * 1024 * MB),
                              'b': 1024 * MB + int(0.05 * 1024 * MB)}
    assert result.reasons == {'a': ['step'], 'b': ['step']}


def test_floor_is_wss_plus_kernel_or_operator_minimum():
    assert guardrails.floor_of(limits(wss_bytes=900 * MB), RAILS) == (
        964 * MB)
    assert guardrails.floor_of(limits(wss_bytes=10 * MB,
                                      floor_bytes=1000 * MB), RAILS) == (
        1000 * MB)
    # Never above the ceiling.
    assert guardrails.floor_of(limits(wss_bytes=900 * MB,
                                      ceiling_bytes=950 * MB), RAILS) == (
        950 * MB)
    result = guard({'a': 1000}, {'a': limits(wss_bytes=950 * MB)})
    assert result.targets == {'a': 1014 * MB}
    assert result.reasons == {'a': ['floor']}


def test_ceiling():
    result = guard({'a': 1070}, {'a': limits(ceiling_bytes=1040 * MB)},
                   free=100)
    assert result.targets == {'a': 1040 * MB}
    assert result.reasons == {'a': ['ceiling']}


def test_opt_out_hold_and_min_change():
    vms = {'out': limits(opt_out=True), 'held': limits(last_change_at=900),
           'tiny': limits(), 'free': limits(last_change_at=500)}
    result = guard({'out': 1000, 'held': 1000, 'tiny': 1022, 'free': 1000},
                   vms)
    assert result.targets == {'free': 1000 * MB}
    assert result.reasons == {'out': ['opt_out'], 'held': ['hold'],
                              'tiny': ['min_change']}


def test_unknown_vm_is_ignored():
    assert guard({'ghost': 10}, {'a': limits()}).targets == {}


def test_growth_limited_to_what_shrinks_and_free_memory_give():
    result = guard({'a': 1000, 'b': 1070, 'c': 1070},
                   {'a': limits(), 'b': limits(), 'c': limits()}, free=6)
    grown = sum(result.targets[n] - 1024 * MB for n in ('b', 'c'))
    assert grown == pytest.approx(30 * MB, abs=2)
    assert result.reasons['b'] == ['budget']


def test_budget_is_never_exceeded():
    rng = np.random.default_rng(0)
    for _ in range(200):
        count = int(rng.integers(1, 8))
        names = ['vm%d' % i for i in range(count)]
        vm_limits = {n: limits(memory=int(rng.integers(256, 4096)),
                               wss_bytes=int(rng.integers(0, 2048)) * MB)
                     for n in names}
        proposed = {n: int(rng.integers(64, 5000)) for n in names}
        free = int(rng.integers(0, 512))
        result = guard(proposed, vm_limits, free=free)
        change = sum(result.targets[n] - vm_limits[n].memory_bytes
                     for n in result.targets)
        assert change <= free * MB
        for name, target in result.targets.items():
            memory = vm_limits[name].memory_bytes
            assert 4 * MB <= abs(target - memory) <= 0.05 * memory


def test_growth_scaled_below_the_smallest_change_is_dropped():
    result = guard({'a': 1070, 'b': 1070}, {'a': limits(), 'b': limits()},
                   free=6)
    assert result.targets == {}
    assert result.reasons == {'a': ['budget'], 'b': ['budget']}


def test_rules_apply_in_order():
    # Opted out wins over everything; a hold over the floor.
    vms = {'out': limits(opt_out=True, wss_bytes=2000 * MB),
           'held': limits(last_change_at=999, wss_bytes=2000 * MB),
           # The floor raises the target, the step then limits it.
           'low': limits(wss_bytes=1500 * MB),
           # 5 % of 70 MiB is below the smallest change.
           'small': limits(memory=70)}
    result = guard({'out': 100, 'held': 100, 'low': 100, 'small': 10},
                   vms, free=1000)
    assert result.targets == {'low': 1024 * MB + int(0.05 * 1024 * MB)}
    assert result.reasons == {'out': ['opt_out'], 'held': ['hold'],
                              'low': ['floor', 'step'],
                              'small': ['floor', 'step', 'min_change']}


def test_preferred_wss_is_prl_else_the_sampler_before_pml_and_esx():
    assert guardrails.preferred_wss({'sampled': 3, 'pml': 2, 'esx': 1}) == 3
    assert guardrails.preferred_wss({'prl': 4, 'sampled': 3}) == 4
    assert guardrails.preferred_wss({'pml': 2, 'esx': 1}) == 2
    assert guardrails.preferred_wss({'distinct': 5}) is None


def test_changes_below_a_fraction_of_the_memory_are_not_made():
    """Hysteresis: with min_change_fraction 2 %, a 1024 MiB VM is not
    moved by 20 MiB (4 MiB is the least change otherwise), a 512 MiB one
    is; a growth the budget scales below it is not made either."""
    rails = guardrails.Rails(kernel_bytes=64 * MB, min_change_bytes=4 * MB,
                             hold_seconds=300, min_change_fraction=0.02)
    vms = {'a': limits(), 'b': limits(512), 'c': limits()}
    result = guardrails.apply({'a': 1044 * MB, 'b': 532 * MB,
                               'c': 1000 * MB}, vms, rails, 1000.0)
    assert result.targets == {'b': 532 * MB, 'c': 1000 * MB}
    assert result.reasons == {'a': ['min_change']}
    # c gives 24 MiB; a's and d's growths of 50 are scaled to 12 each.
    result = guardrails.apply({'a': 1074 * MB, 'c': 1000 * MB,
                               'd': 1074 * MB}, {
        'a': limits(), 'c': limits(), 'd': limits()}, rails, 1000.0)
    assert result.targets == {'c': 1000 * MB}
    assert result.reasons == {'a': ['budget'], 'd': ['budget']}
