import json

import pytest

from memcanal.policy import base
from memcanal.policy import esx
from memcanal.tests.unit.policy import curves

MB = curves.MB


def targets_mb(allocation):
    return {name: size / MB for name, size in allocation.targets.items()}


def test_active_memory_comes_from_the_curve():
    web, search, tpch = curves.table2()
    # Within 1 point of the miss ratio with all the memory it could use.
    assert esx.active_bytes(web) == 1024 * MB
    assert esx.active_bytes(search) == 920 * MB
    assert esx.active_bytes(tpch) == 336 * MB
    assert esx.active_bytes(tpch, tolerance=0.7) == 300 * MB
    assert esx.active_bytes(base.VM('none', 512 * MB, None)) == 512 * MB


def test_table3_shape_idle_memory_goes_to_the_others():
    allocation = esx.esx_emulation(curves.table2(), 1536 * MB)
    got = targets_mb(allocation)
    assert sum(got.values()) == 1536
    # TPC-H gives idle memory until its taxed claim, 1 / (336 + 4 idle),
    # meets the others' 1 / P: ESX's own Table 3 row (576, 576, 384).
    assert 384 <= got['tpch'] <= 400
    assert 336 + 4 * (got['tpch'] - 336) == pytest.approx(got['web'],
                                                          abs=24)
    assert abs(got['web'] - got['search']) <= 4
    # Its curve is flat there; the others' steps are further up.
    assert allocation.predicted == pytest.approx(
        {'web': 1.0, 'search': 1.0, 'tpch': 1.0})


def test_a_heavy_tax_takes_all_idle_memory():
    # Hcache's emulation row (600, 600, 336).
    got = targets_mb(esx.esx_emulation(curves.table2(), 1536 * MB,
                                       tax_rate=0.99))
    assert 336 <= got['tpch'] <= 340
    assert abs(got['web'] - got['search']) <= 4


def test_no_tax_moves_nothing_between_equal_shares():
    allocation = esx.esx_emulation(curves.table2(), 1536 * MB, tax_rate=0.0)
    assert set(targets_mb(allocation).values()) == {512}


def test_streaming_vm_is_a_victim_despite_a_large_working_set():
    # Touches much, reuses nothing: its misses do not depend on memory.
    streaming = curves.vm('stream', [(4, 0.95), (1024, 0.95)])
    hungry = curves.vm('hungry', [(64, 1.0), (512, 0.6), (1000, 0.05)])
    allocation = esx.esx_emulation([streaming, hungry], 1024 * MB)
    assert allocation.details['active_bytes']['stream'] == 4 * MB
    assert allocation.targets['stream'] < 256 * MB
    assert allocation.targets['hungry'] > 768 * MB


def test_equal_shares_split_evenly_and_more_shares_claim_more():
    idle = curves.vm('idle', [(64, 0.5), (128, 0.0)])
    search = curves.table2()[1].curve
    even = esx.esx_emulation([idle, base.VM('a', 512 * MB, search),
                              base.VM('b', 512 * MB, search)], 1536 * MB)
    assert abs(even.targets['a'] - even.targets['b']) <= 4 * MB
    assert even.targets['a'] > 512 * MB
    gold = base.VM('gold', 512 * MB, search, shares=2.0)
    silver = base.VM('silver', 512 * MB, search)
    rich = esx.esx_emulation([idle, gold, silver], 1536 * MB)
    assert rich.targets['gold'] > rich.targets['silver']
    assert rich.details['rho']['gold'] >= rich.details['rho']['silver']


def test_bounds_and_vms_without_a_curve():
    web, search, tpch = curves.table2()
    capped = base.VM('search', search.baseline_bytes, search.curve,
                     max_bytes=520 * MB)
    floored = base.VM('tpch', tpch.baseline_bytes, tpch.curve,
                      min_bytes=480 * MB)
    none = base.VM('none', 512 * MB, None)
    got = targets_mb(esx.esx_emulation([web, capped, floored, none],
                                       2048 * MB))
    assert got['search'] <= 520
    assert got['tpch'] >= 480
    assert got['none'] == 512


def test_starts_where_the_vms_are():
    web, search, tpch = curves.table2()
    moved = [base.VM(vm.name, vm.baseline_bytes, vm.curve,
                     memory_bytes=size * MB)
             for vm, size in ((web, 560), (search, 600), (tpch, 376))]
    allocation = esx.esx_emulation(moved, 1536 * MB)
    assert sum(allocation.targets.values()) == 1536 * MB
    assert allocation.targets['tpch'] >= 376 * MB


def test_spare_and_missing_memory():
    spare = esx.esx_emulation(curves.table2(), 1600 * MB)
    assert sum(spare.targets.values()) == 1600 * MB
    assert spare.details['unallocated_bytes'] == 0
    # Missing memory comes first from the VM that claims least per page.
    short = esx.esx_emulation(curves.table2(), 1400 * MB + 1)
    assert sum(short.targets.values()) == 1400 * MB + 1
    assert short.targets['tpch'] < 400 * MB
    # Memory nobody would use stays unallocated.
    flat = curves.vm('flat', [(64, 0.0)])
    alone = esx.esx_emulation([flat], 1024 * MB)
    assert alone.targets == {'flat': 512 * MB}
    assert alone.details['unallocated_bytes'] == 512 * MB


def test_bad_arguments():
    floored = base.VM('vm', 512 * MB, None, min_bytes=512 * MB)
    with pytest.raises(ValueError, match='minimums'):
        esx.esx_emulation([floored], 500 * MB)
    with pytest.raises(ValueError, match='tax rate'):
        esx.esx_emulation(curves.table2(), 1536 * MB, tax_rate=1.0)
    with pytest.raises(ValueError, match='unit'):
        esx.esx_emulation(curves.table2(), 1536 * MB, unit_bytes=0)


def test_allocation_is_json():
    allocation = esx.esx_emulation(curves.table2(), 1536 * MB)
    assert json.loads(json.dumps(allocation.as_json())) == (
        allocation.as_json())


def test_a_sampled_vms_active_memory_keeps_its_faults_within_the_bound():
    sampled = curves.sampled_vm()
    # Its faults with 1400 MiB are within 0.2 % of its working set per
    # minute of those with all its memory; a tolerance of 1 % of
    # first-touch events would call 1100 MiB active, where it faults 30
    # times the bound.
    assert esx.active_bytes(sampled) == curves.SAMPLED_BOUND_MB * MB
    plain = base.VM('plain', sampled.baseline_bytes, sampled.curve)
    assert esx.active_bytes(plain) == 1100 * MB
    hungry = curves.vm('hungry', [(64, 1.0), (2048, 0.5), (6000, 0.05)],
                       baseline=2048)
    allocation = esx.esx_emulation([sampled, hungry], 6144 * MB,
                                   tax_rate=0.99)
    target = allocation.targets['sampled']
    assert curves.SAMPLED_BOUND_MB * MB <= target < 1500 * MB
    assert sampled.faults.per_minute(sampled.miss_ratio(target)) <= 0.002
    assert allocation.predicted['sampled'] == 1.0
