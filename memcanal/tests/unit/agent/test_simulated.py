import numpy as np
import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import simulated
from memcanal import exception


@pytest.fixture
def hypervisor(conf):
    conf.set_override('instances', 4, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 5000, 'simulated')
    return driver.load('simulated', conf, 'compute-1')


def test_same_host_gives_same_vms(conf, hypervisor):
    again = driver.load('simulated', conf, 'compute-1')
    other = driver.load('simulated', conf, 'compute-2')
    uuids = [vm.uuid for vm in hypervisor.list_instances()]
    assert uuids == [vm.uuid for vm in again.list_instances()]
    assert not set(uuids) & {vm.uuid for vm in other.list_instances()}
    assert {vm.project_id for vm in hypervisor.list_instances()} == set(
        simulated.PROJECTS)


def test_samples_are_references_inside_the_vm(hypervisor):
    for vm in hypervisor.list_instances():
        sample = hypervisor.collect(vm.uuid)
        assert sample.references.size == 5000
        assert 0 <= sample.references.min()
        assert sample.references.max() < vm.allocated_bytes // 4096
        assert sample.guest_stats == {'references': 5000.0}


def test_host_info_from_options(hypervisor, conf):
    info = hypervisor.host_info()
    assert info.memory_total_bytes == conf.simulated.host_memory_mb * 2 ** 20


def test_unknown_vm_and_driver_raise(hypervisor, conf):
    with pytest.raises(exception.InstanceNotFound):
        hypervisor.collect('nope')
    with pytest.raises(exception.DriverNotFound):
        driver.load('no-such-driver', conf, 'compute-1')


def test_collector_summarizes_references():
    sample = driver.Sample(page_size=4096,
                           references=np.array([1, 2, 1, 3, 1, 2]),
                           guest_stats={'x': 1.0})
    summary = collector.summarize(sample, max_mrc_points=256)
    assert summary['wss'] == {'distinct': 3 * 4096}
    # Stack distances: cold, cold, 2, cold, 2, 3 -> misses 6, 5, 3 of 6.
    assert summary['mrc']['exact'] == [[4096, 1.0],
                                       [8192, pytest.approx(4 / 6)],
                                       [12288, 0.5]]
    assert summary['guest_stats'] == {'x': 1.0}


def test_collector_without_references_reports_only_stats():
    sample = driver.Sample(page_size=4096, references=None,
                           guest_stats={'x': 1.0})
    assert collector.summarize(sample, 256) == {
        'wss': {}, 'mrc': {}, 'guest_stats': {'x': 1.0}}
