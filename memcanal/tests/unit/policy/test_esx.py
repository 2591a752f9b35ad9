import pytest

from memcanal.policy import base
from memcanal.policy import esx
from memcanal.tests.unit.policy import curves

MB = curves.MB


def test_table3_shape_idle_memory_goes_to_the_others():
    allocation = esx.esx_emulation(curves.table2(), 1536 * MB)
    targets = allocation.targets
    assert sum(targets.values()) == 1536 * MB
    assert allocation.details['active_bytes']['tpch'] == 336 * MB
    # The decision-support VM is the victim; it keeps its active memory.
    assert 336 * MB <= targets['tpch'] < 512 * MB
    assert targets['web'] > 512 * MB and targets['search'] > 512 * MB
    assert abs(targets['web'] - targets['search']) <= 8 * MB
    assert allocation.predicted['tpch'] == pytest.approx(1.0)


def test_higher_tax_takes_more_idle_memory():
    light = esx.esx_emulation(curves.table2(), 1536 * MB, tax_rate=0.25)
    heavy = esx.esx_emulation(curves.table2(), 1536 * MB, tax_rate=0.9)
    assert heavy.targets['tpch'] < light.targets['tpch']


def test_streaming_vm_is_a_victim_despite_a_large_working_set():
    # Touches much, reuses nothing: its misses do not depend on memory.
    streaming = curves.vm('stream', [(4, 0.95), (1024, 0.95)])
    hungry = curves.vm('hungry', [(64, 1.0), (512, 0.6), (1000, 0.05)])
    allocation = esx.esx_emulation([streaming, hungry], 1024 * MB)
    assert allocation.details['active_bytes']['stream'] == 4 * MB
    assert allocation.targets['stream'] < 512 * MB
    assert allocation.targets['hungry'] > 512 * MB


def test_shares_divide_the_victims_memory():
    idle = curves.vm('idle', [(64, 0.5), (128, 0.0)])
    gold = base.VM('gold', 512 * MB, curves.table2()[1].curve, shares=2.0)
    silver = base.VM('silver', 512 * MB, curves.table2()[1].curve)
    targets = esx.esx_emulation([idle, gold, silver], 1536 * MB).targets
    assert targets['gold'] > targets['silver']


def test_spare_memory_goes_to_who_benefits():
    targets = esx.esx_emulation(curves.table2(), 1600 * MB).targets
    assert sum(targets.values()) == 1600 * MB
    with pytest.raises(ValueError):
        esx.esx_emulation(curves.table2(), 1000 * MB)
    with pytest.raises(ValueError):
        esx.esx_emulation(curves.table2(), 1536 * MB, tax_rate=1.0)
