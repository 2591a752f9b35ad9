from memcanal.policy import demand
from memcanal.policy import guardrails

MB = 2 ** 20
RAILS = guardrails.Rails(kernel_bytes=64 * MB)


def test_demand_is_working_set_plus_kernel_within_memory():
    assert demand.vm_demand(1024 * MB, 300 * MB, RAILS) == 364 * MB
    assert demand.vm_demand(1024 * MB, 1000 * MB, RAILS) == 1024 * MB


def test_unmeasured_vm_demands_all_its_memory():
    assert demand.vm_demand(1024 * MB, None, RAILS) == 1024 * MB


def test_host_accepts_what_fits_its_headroom_and_threshold():
    host = demand.HostLoad('h', capacity_bytes=1000, demand_bytes=500)
    # headroom 1000 - 550 = 450; eq. 7: (500 + new) / 1000 <= 0.9
    assert demand.accepts(host, 400)
    assert not demand.accepts(host, 451)
    # The threshold binds before the headroom with no margin.
    assert demand.accepts(host, 400, margin=0.0)
    assert not demand.accepts(host, 401, margin=0.0)


def test_host_without_capacity_accepts_nothing():
    host = demand.HostLoad('h', capacity_bytes=0, demand_bytes=0)
    assert not demand.accepts(host, 0)
    assert host.utilization == float('inf')


def test_with_demand_moves_the_utilization():
    host = demand.HostLoad('h', capacity_bytes=1000, demand_bytes=950)
    assert host.utilization == 0.95
    assert host.with_demand(-100).utilization == 0.85
