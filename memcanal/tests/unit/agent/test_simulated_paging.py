"""Paging on the simulated hypervisor (TMemCanal): a VM keeps its memory,
its cold pages leave the host, and its pager's faults give the "paging"
miss-ratio curve."""

import json

import numpy as np
import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import actuators
from memcanal.agent.drivers import simulated
from memcanal.agent import manager
from memcanal.agent import tracing
from memcanal.estimation import coldpages
from memcanal.estimation import mrc
from memcanal.estimation import traces
from memcanal.estimation import workloads
from memcanal import exception
from memcanal.rpc import reports
from memcanal.tests.unit.agent import test_manager

PAGE = 4096
VM_PAGES = 4096
HOT_PAGES = 1024
STORE = 'tcp:10.0.0.5:7070'


def uniform(pages, count, seed=0):
    """``count`` references spread evenly over ``pages``."""
    return np.random.default_rng(seed).integers(0, pages, count)


def warm_up(pager):
    """The VM wrote all its memory once, then kept to its first HOT_PAGES
    for longer than the detector's expire-time-II; its references."""
    history = [np.arange(VM_PAGES)] + [
        uniform(HOT_PAGES, 20_000, seed) for seed in range(8)]
    for pages in history:
        pager.run(pages)
    return history


def warmed_pager(pool_pages=0):
    pager = actuators.Pager(VM_PAGES, 1.0, scans=4, pool_pages=pool_pages)
    warm_up(pager)
    return pager


def test_paging_frees_the_cold_set_and_the_hot_set_does_not_fault():
    pager = warmed_pager()
    seconds = pager.resize(HOT_PAGES * PAGE, [STORE])
    assert pager.paged and pager.resident_pages == HOT_PAGES
    assert pager.resident[:HOT_PAGES].all()
    # Each cold page copied to both stores, at the slower one's pace.
    assert seconds == pytest.approx(
        (VM_PAGES - HOT_PAGES) * PAGE
        / actuators.STORE_SWAP_OUT_BYTES_PER_SECOND['tcp'])
    pager.take_events()
    for seed in range(3):
        pager.run(uniform(HOT_PAGES, 20_000, seed + 100))
    blocks, reads, faults, fault_seconds = pager.take_events()
    assert (faults, blocks.size, fault_seconds) == (0, 0, 0.0)
    assert pager.resident_pages == HOT_PAGES


def test_a_fault_brings_its_zone_and_a_cold_page_goes_out():
    pager = warmed_pager()
    pager.resize(HOT_PAGES * PAGE, [STORE])
    pager.take_events()
    cold = HOT_PAGES + 100
    pager.run([cold])
    blocks, reads, faults, fault_seconds = pager.take_events()
    assert faults == 1 and pager.resident[cold]
    assert pager.resident_pages == HOT_PAGES
    # The page and its prefetched neighbours came from the memory
    # server, the fastest store that has them.
    prefetched = coldpages.PREFETCH_COUNT
    assert fault_seconds == pytest.approx(
        (1 + prefetched) * actuators.STORE_FAULT_SECONDS['tcp'])
    assert blocks[reads].tolist() == [cold]


def test_a_fault_on_a_page_still_in_the_pool_is_faster():
    pager = warmed_pager(pool_pages=VM_PAGES)
    pager.resize(HOT_PAGES * PAGE, [])
    pager.take_events()
    pager.run([HOT_PAGES + 100])
    _, _, _, fault_seconds = pager.take_events()
    assert fault_seconds == pytest.approx(
        (1 + coldpages.PREFETCH_COUNT) * actuators.POOL_FAULT_SECONDS)


def test_a_memory_server_over_tls_is_a_store():
    """What the service lends: tls:HOST:PORT, at TCP's costs."""
    pager = warmed_pager()
    seconds = pager.resize(HOT_PAGES * PAGE, ['tls:10.0.0.5:7070'])
    assert pager.stores == ('tls:10.0.0.5:7070',)
    assert seconds == pytest.approx(
        (VM_PAGES - HOT_PAGES) * PAGE
        / actuators.STORE_SWAP_OUT_BYTES_PER_SECOND['tls'])


def test_paging_back_to_the_whole_vm_ends_paging():
    pager = warmed_pager()
    pager.resize(HOT_PAGES * PAGE, [])
    seconds = pager.resize(VM_PAGES * PAGE, [])
    assert not pager.paged and pager.resident.all()
    # Without a memory server, every page came from the local store.
    assert seconds == pytest.approx(
        (VM_PAGES - HOT_PAGES) * actuators.STORE_FAULT_SECONDS['file'])


@pytest.mark.parametrize('spec', ['file:/tmp/x', 'tcp:host', 'tcp::70',
                                  'tcp:host:port'])
def test_a_store_the_service_cannot_lend_fails_and_changes_nothing(spec):
    pager = warmed_pager()
    with pytest.raises(exception.ResizeFailed, match='tcp:HOST:PORT'):
        pager.resize(HOT_PAGES * PAGE, [STORE, spec])
    assert not pager.paged and pager.resident.all()


def exact_miss_ratios(history, window, sizes):
    """The exact LRU miss ratio at ``sizes`` of the window's references
    after its first interval (which only warms the pager's list up),
    with all the VM's references before them."""
    distances = mrc.stack_distances(np.concatenate(history + window))[
        -sum(len(pages) for pages in window[1:]):]
    return [np.mean((distances == 0) | (distances > size))
            for size in sizes]


def zipf_files(seed):
    """Hcache's file server: 12 files of 1 MB in pages 0-3071."""
    server = workloads.FileServer('zipf', files=12, file_mb=1,
                                  rng=np.random.default_rng(seed))
    return lambda count: server.take(count).pages


def uniform_working_set(seed):
    """A working set of 1000 pages, touched evenly."""
    rng = np.random.default_rng(seed)
    return lambda count: rng.integers(0, 1000, count)


@pytest.mark.parametrize('workload, resident', [
    (uniform_working_set, 500), (zipf_files, 1500)])
def test_the_paging_curve_matches_the_exact_lru_curve(workload, resident):
    """A working set larger than the resident memory, the rest of the VM
    cold: what the pager swapped out and faulted back in gives the VM's
    curve from its resident memory up to its size."""
    pager = actuators.Pager(VM_PAGES, 1.0, scans=4)
    history = warm_up(pager)
    pager.resize(resident * PAGE, [STORE])
    curve = tracing.PagingCurve(intervals=4, max_points=100,
                                page_size=PAGE)
    window = []
    references = workload(200)
    for _ in range(5):
        pages = references(5_000)
        accesses = pager.run(pages)
        blocks, reads, faults, _ = pager.take_events()
        assert faults > 0
        curve.add(driver.CacheTrace(blocks, reads, pager.resident_pages,
                                    accesses))
        window.append(pages)
    points = curve.curves()['paging']
    sizes = [size // PAGE for size, _ in points]
    assert sizes[0] == resident and sizes[-1] <= VM_PAGES
    predicted = [ratio for _, ratio in points]
    # As the hcache tests: within 0.03 of the truth at every point.
    assert predicted == pytest.approx(
        exact_miss_ratios(history, window, sizes), abs=0.03)
    assert predicted[0] > 0.2


def test_a_curve_needs_two_paged_intervals_and_restarts_unpaged():
    curve = tracing.PagingCurve(intervals=2, max_points=10, page_size=PAGE)
    trace = driver.CacheTrace(np.array([5, 5]), np.array([False, True]),
                              10, 4)
    curve.add(trace)
    assert curve.curves() == {}
    curve.add(trace)
    assert curve.curves() == {'paging': [[10 * PAGE, 0.25],
                                         [11 * PAGE, 0.0]]}
    curve.add(None)
    curve.add(trace)
    assert curve.curves() == {}


@pytest.fixture
def host(conf, tmp_path):
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    conf.set_override('references_per_interval', 4000, 'simulated')
    conf.set_override('resize_log', str(tmp_path / 'resizes'), 'simulated')
    return driver.load('simulated', conf, 'compute-1')


def test_a_paged_vm_keeps_its_memory_and_the_host_holds_less(host):
    first, second = [vm.uuid for vm in host.list_instances()]
    host.collect(first)
    resize = host.apply_memory_target(first, 4 * 2 ** 20, 'paging',
                                      [STORE])
    assert (resize.mechanism, resize.previous_bytes,
            resize.target_bytes) == ('paging', 16 * 2 ** 20, 4 * 2 ** 20)
    paged, other = host.list_instances()
    assert (paged.resident_bytes, paged.paged_bytes) == (
        4 * 2 ** 20, 12 * 2 ** 20)
    assert paged.target_bytes is None
    assert (other.resident_bytes, other.paged_bytes) == (None, 0)
    assert host.memory_used_bytes() == 20 * 2 ** 20
    sample = host.collect(first)
    # The guest sees all its memory; the pager saw its accesses.
    assert sample.guest_stats['memory_bytes'] == 16 * 2 ** 20
    assert sample.paging_trace.direct_pages == 1024
    assert sample.paging_trace.accesses == 4000
    assert sample.guest_stats['paging_faults'] <= np.count_nonzero(
        sample.paging_trace.reads)
    assert host.collect(second).paging_trace is None


def test_paging_survives_a_restart_of_the_agent(conf, host):
    first = host.list_instances()[0].uuid
    host.apply_memory_target(first, 4 * 2 ** 20, 'paging', [STORE])
    with open(conf.simulated.resize_log) as log:
        assert json.loads(log.readline())['stores'] == [STORE]
    again = driver.load('simulated', conf, 'compute-1')
    assert again.list_instances()[0].resident_bytes == 4 * 2 ** 20


def test_the_collector_reports_the_paging_curve(conf, host):
    vm = host.list_instances()[0]
    estimators = collector.InstanceCollector(conf, vm.uuid,
                                             vm.allocated_bytes, PAGE)
    host.apply_memory_target(vm.uuid, 2 * 2 ** 20, 'paging')
    summaries = [estimators.collect(host.collect(vm.uuid))
                 for _ in range(3)]
    assert 'paging' not in summaries[0]['mrc']
    assert 'paging' in summaries[-1]['mrc']


def test_the_agent_pages_with_the_decisions_stores_and_reports_it(
        conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    conf.set_override('references_per_interval', 4000, 'simulated')
    agent = test_manager.make_agent(conf)
    vm = agent.driver.list_instances()[0].uuid
    action = {'uuid': 'action-1', 'instance_uuid': vm,
              'target_bytes': 4 * 2 ** 20, 'mechanism': 'paging',
              'stores': [STORE]}
    [result] = agent._carry_out('decision-1', [action])
    assert result['state'] == 'applied'
    assert result['result']['previous_bytes'] == 16 * 2 ** 20
    assert agent.driver._vms[vm].pager.stores == (STORE,)
    # Applied already: the VM is at its resident target.
    assert agent._size(agent._sizes(), action) == 4 * 2 ** 20
    agent.build_report()
    report = agent.build_report()
    report['host_uuid'] = test_manager.HOST_UUID
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    assert 'paging' in report['instances'][0]['mrc']
    paging = [sample.get('paging') for sample in report['instances']]
    assert paging[1] is None
    assert paging[0]['resident_bytes'] == 4 * 2 ** 20
    assert paging[0]['paged_bytes'] == 12 * 2 ** 20
    # Its 64-page working set came back in the first interval.
    assert (paging[0]['faults'], paging[0]['swapped_out']) == (0, 0)


def test_a_paging_the_agent_was_killed_in_is_not_done_twice(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 1, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    agent = test_manager.make_agent(conf)
    vm = agent.driver.list_instances()[0].uuid
    action = {'uuid': 'action-1', 'instance_uuid': vm,
              'target_bytes': 4 * 2 ** 20, 'mechanism': 'paging',
              'stores': [STORE]}
    # Killed after paging the VM out, before recording the outcome.
    agent.journal.intend(action, 16 * 2 ** 20)
    agent.driver.apply_memory_target(vm, 4 * 2 ** 20, 'paging', [STORE])
    restarted = test_manager.make_agent(conf, agent.driver)
    restarted.driver.apply_memory_target = None
    [result] = restarted._carry_out('decision-1', [action])
    assert result['state'] == 'applied'
    assert (result['result']['previous_bytes'],
            result['result']['target_bytes']) == (16 * 2 ** 20,
                                                  4 * 2 ** 20)


def test_a_paging_report_counts_the_drivers_faults():
    instance = driver.InstanceInfo('u', 'p', 10 * PAGE, None, None,
                                   4 * PAGE, 6 * PAGE)
    trace = driver.CacheTrace(np.array([1, 2, 1]),
                              np.array([False, False, True]), 4, 10)
    sample = driver.Sample(PAGE, traces.Trace.of([]), {}, paging_trace=trace)
    assert manager._paging(instance, sample) == {
        'resident_bytes': 4 * PAGE, 'paged_bytes': 6 * PAGE,
        'faults': 1, 'swapped_out': 2}


def test_only_the_simulated_vms_pages_below_its_memory_are_accesses():
    vm = simulated.SimulatedVM('compute-1', 0, 64 * PAGE, 0, 10 ** 9, 100)
    vm.resize(16 * PAGE, 'paging', loaded=False)
    vm.run_guest(traces.Trace.of(np.array([1, 2, 64, 65, 3])))
    trace, _, _ = vm.paging_trace()
    assert trace.accesses == 3
