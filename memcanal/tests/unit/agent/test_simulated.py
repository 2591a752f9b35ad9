import numpy as np
import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import simulated
from memcanal.agent import tracing
from memcanal.estimation import hcache_runs
from memcanal.estimation import packed_curve
from memcanal.estimation import traces
from memcanal.estimation import workloads
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


def test_samples_are_traces_inside_the_vm(hypervisor):
    for vm in hypervisor.list_instances():
        sample = hypervisor.collect(vm.uuid)
        trace = sample.trace
        assert len(trace) == 5000
        assert 0 <= trace.pages.min()
        assert trace.pages.max() < vm.allocated_bytes // 4096
        assert sample.guest_stats['references'] == 5000.0
        assert sample.guest_stats['writes'] == trace.writes.sum()


def test_vm_clock_advances_one_interval_per_collection(hypervisor, conf):
    uuid = hypervisor.list_instances()[0].uuid
    first = hypervisor.collect(uuid).trace.times_ns()
    second = hypervisor.collect(uuid).trace.times_ns()
    interval_ns = conf.agent.report_interval * 1e9
    assert first[-1] < interval_ns <= second[0]
    assert second[-1] < 2 * interval_ns


def test_vms_run_the_papers_workloads(hypervisor):
    kinds = [type(vm.workload).__name__
             for vm in hypervisor._vms.values()]
    assert kinds == ['PrlSyntheticApp', 'PrlSyntheticApp', 'FileServer',
                     'WriteThenWork']


def test_host_info_from_options(hypervisor, conf):
    info = hypervisor.host_info()
    assert info.memory_total_bytes == conf.simulated.host_memory_mb * 2 ** 20


def test_unknown_vm_and_driver_raise(hypervisor, conf):
    with pytest.raises(exception.InstanceNotFound):
        hypervisor.collect('nope')
    with pytest.raises(exception.DriverNotFound):
        driver.load('no-such-driver', conf, 'compute-1')


def _collector(conf, memory_mb=16):
    return collector.InstanceCollector(
        conf, 'b8a1ad34-5a9e-4b2f-9f53-ff4ed0b7c0de', memory_mb * 2 ** 20,
        4096)


def _intervals(workload, count, per_interval, interval_s=60.0):
    workload.reference_ns = int(interval_s * 1e9) // per_interval
    for _ in range(count):
        yield driver.Sample(page_size=4096, trace=workload.take(per_interval),
                            guest_stats={'x': 1.0})


def test_collector_reports_prl_once_converged_and_pml_blind_spot(conf):
    conf.set_override('prl_tau', 5, 'estimation')
    conf.set_override('mrc_methods', ['shards', 'exact'], 'estimation')
    vm = _collector(conf)
    app = workloads.PrlSyntheticApp(300, 'RRWW', phase_seconds=10 ** 6)
    summaries = [vm.collect(sample)
                 for sample in _intervals(app, 6, 3000)]
    # tau = 5 log entries after 5 passes, in the first interval; the
    # estimate once two more intervals (omega = 120 s) changed nothing.
    assert 'prl' not in summaries[1]['wss']
    assert summaries[-1]['wss']['prl'] == 300 * 4096
    # Reads only so far: PML saw no dirty page, and said so.
    assert summaries[-1]['wss']['pml'] == 0
    assert summaries[-1]['guest_stats'] == {'x': 1.0}
    exact = packed_curve.unpack(summaries[-1]['mrc']['exact'])
    assert exact[-1][0] == 300 * 4096
    assert set(summaries[-1]['mrc']) == {'shards', 'exact'}


def test_collector_adds_the_guest_kernel_footprint(conf):
    conf.set_override('prl_tau', 2, 'estimation')
    conf.set_override('guest_kernel_footprint_mb', 8, 'estimation')
    vm = _collector(conf)
    app = workloads.PrlSyntheticApp(100, 'RWRW')
    for sample in _intervals(app, 4, 1000):
        summary = vm.collect(sample)
    assert summary['wss']['prl'] == 100 * 4096 + 8 * 2 ** 20


def test_collector_without_references_reports_only_stats(conf):
    sample = driver.Sample(page_size=4096, trace=None,
                           guest_stats={'x': 1.0})
    assert _collector(conf).collect(sample) == {
        'wss': {}, 'mrc': {}, 'guest_stats': {'x': 1.0}}


def test_tracing_mode_moves_memory_to_the_hypervisor_cache(conf):
    conf.set_override('instances', 4, 'simulated')
    conf.set_override('instance_memory_mb', 4, 'simulated')
    conf.set_override('references_per_interval', 4000, 'simulated')
    hypervisor = driver.load('simulated', conf, 'compute-1')
    # VM 2 serves a 1 MB file, more than the 512 KB it keeps.
    uuid = hypervisor.list_instances()[2].uuid
    assert hypervisor.collect(uuid).cache_trace is None
    hypervisor.start_tracing(uuid, 3584 * 1024)
    traced = hypervisor.collect(uuid).cache_trace
    assert (traced.direct_pages, traced.accesses) == (128, 4000)
    # The VM had read the file's 256 pages; giving up memory evicted the
    # 128 least recently used into the cache.
    assert not traced.reads[:128].any()
    # The file server then cycles through the file: every access misses
    # the direct memory and is seen, and the cache serves it.
    assert traced.reads[128:].sum() == 4000
    sample = hypervisor.collect(uuid)
    # The cache its memory was lent to served them: no miss of the VM's
    # memory.
    assert sample.guest_stats['accesses'] == 4000
    assert sample.guest_stats['misses'] == 0
    assert sample.guest_stats['major_faults'] == 0
    assert sample.guest_stats['memory_bytes'] == 4 * 2 ** 20
    hypervisor.stop_tracing(uuid)
    after = hypervisor.collect(uuid)
    assert after.cache_trace is None
    # The cache's memory came back empty: the VM reads again the 128
    # pages it held, misses an untraced VM would not have had.
    assert after.guest_stats['misses'] == 128
    assert after.guest_stats['tracing_refills'] == 128
    settled = hypervisor.collect(uuid).guest_stats
    assert (settled['misses'], settled['tracing_refills']) == (0, 0)
    vm = hypervisor._vms[uuid]
    assert vm.guest.capacity == 1024 and vm.guest.corrupted == 0


def test_tracing_on_an_unknown_vm_raises(hypervisor):
    with pytest.raises(exception.InstanceNotFound):
        hypervisor.start_tracing('nope', 2 ** 20)


def miss_ratio(hypervisor, uuid, intervals=3):
    for _ in range(intervals - 1):
        hypervisor.collect(uuid)
    stats = hypervisor.collect(uuid).guest_stats
    return stats['misses'] / stats['accesses']


@pytest.fixture
def file_server(conf):
    """A 64 MiB VM running the Zipf file server over 8 MiB of files."""
    conf.set_override('instances', 3, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 20000, 'simulated')
    conf.set_override('guest_kernel_mb', 4, 'simulated')
    hypervisor = driver.load('simulated', conf, 'compute-1')
    return hypervisor, hypervisor.list_instances()[2].uuid


def test_resizing_the_guest_changes_its_misses(file_server):
    hypervisor, uuid = file_server
    assert miss_ratio(hypervisor, uuid) == 0.0
    resize = hypervisor.apply_memory_target(uuid, 2 * 2 ** 20, 'balloon')
    assert (resize.previous_bytes, resize.target_bytes) == (64 * 2 ** 20,
                                                            2 * 2 ** 20)
    assert resize.seconds > 0
    small = miss_ratio(hypervisor, uuid)
    assert small > 0.1
    hypervisor.apply_memory_target(uuid, 64 * 2 ** 20, 'balloon')
    assert miss_ratio(hypervisor, uuid) < small
    assert hypervisor.list_instances()[2].target_bytes == 64 * 2 ** 20


def test_guest_statistics_are_consistent(file_server):
    hypervisor, uuid = file_server
    hypervisor.apply_memory_target(uuid, 4 * 2 ** 20, 'balloon')
    stats = hypervisor.collect(uuid).guest_stats
    assert stats['memory_bytes'] == 4 * 2 ** 20
    assert 4 * 2 ** 20 >= stats['used_bytes'] >= 0
    assert stats['accesses'] == stats['references'] == 20000
    assert stats['major_faults'] == stats['misses'] > 0
    assert stats['committed_bytes'] > 4 * 2 ** 20
    # The writes that no longer fit are paged out.
    assert stats['swap_bytes'] > 0
    hypervisor.apply_memory_target(uuid, 64 * 2 ** 20, 'balloon')
    hypervisor.collect(uuid)
    stats = hypervisor.collect(uuid).guest_stats
    # 4 MB of kernel and the 8 MB of files, all in memory now.
    assert stats['used_bytes'] == 12 * 2 ** 20
    assert stats['swap_bytes'] == 0
    assert stats['committed_bytes'] >= 4 * 2 ** 20
    assert all(isinstance(value, float) for value in stats.values())


def test_a_vm_using_its_memory_is_slower_to_shrink(file_server):
    hypervisor, uuid = file_server
    idle = hypervisor.apply_memory_target(uuid, 32 * 2 ** 20, 'balloon')
    assert idle.seconds == pytest.approx(32 / 128 * 0.056)
    hypervisor.apply_memory_target(uuid, 8 * 2 ** 20, 'balloon')
    # 4 MB of kernel and 4 MB of files in use: all its memory.
    assert hypervisor.collect(uuid).guest_stats['used_bytes'] == 8 * 2 ** 20
    loaded = hypervisor.apply_memory_target(uuid, 4 * 2 ** 20, 'balloon')
    assert loaded.seconds == pytest.approx(4 / 128 * 0.056 * 4)


def test_a_failed_resize_leaves_the_vm_unchanged(file_server):
    hypervisor, uuid = file_server
    hypervisor.apply_memory_target(uuid, 16 * 2 ** 20, 'balloon')
    with pytest.raises(exception.ResizeFailed, match='booted with'):
        hypervisor.apply_memory_target(uuid, 65 * 2 ** 20, 'balloon')
    assert hypervisor.list_instances()[2].target_bytes == 16 * 2 ** 20
    stats = hypervisor.collect(uuid).guest_stats
    assert stats['memory_bytes'] == 16 * 2 ** 20
    # The balloon still holds all it took.
    balloon = hypervisor._vms[uuid]._actuators['balloon']
    assert balloon.held_pages == 48 * 256
    grown = hypervisor.apply_memory_target(uuid, 64 * 2 ** 20, 'balloon')
    assert grown.previous_bytes == 16 * 2 ** 20


def test_hotplug_grows_past_boot_memory_in_sections(file_server):
    hypervisor, uuid = file_server
    grown = hypervisor.apply_memory_target(uuid, 100 * 2 ** 20, 'hotplug')
    assert grown == driver.Resize('hotplug', 64 * 2 ** 20, 100 * 2 ** 20,
                                  pytest.approx(0.060))
    actuator = hypervisor._vms[uuid]._actuators['hotplug']
    assert (actuator.sections, actuator.offline_pages) == (2, 92 * 256)
    onlined = hypervisor.apply_memory_target(uuid, 120 * 2 ** 20,
                                             'hotplug')
    assert actuator.sections == 2
    assert onlined.seconds == pytest.approx(20 / 128 * 0.005)
    assert hypervisor.collect(uuid).guest_stats['memory_bytes'] == (
        120 * 2 ** 20)


def test_resizing_a_traced_vm_keeps_its_cache_while_it_can(file_server):
    hypervisor, uuid = file_server
    vm = hypervisor._vms[uuid]
    hypervisor.collect(uuid)
    hypervisor.start_tracing(uuid, 16 * 2 ** 20)
    hypervisor.apply_memory_target(uuid, 32 * 2 ** 20, 'hotplug')
    traced = hypervisor.collect(uuid)
    assert traced.cache_trace.direct_pages == 16 * 256
    assert traced.guest_stats['memory_bytes'] == 32 * 2 ** 20
    # Too small for the cache: it shrinks, the VM keeps a page.
    hypervisor.apply_memory_target(uuid, 8 * 2 ** 20, 'hotplug')
    traced = hypervisor.collect(uuid)
    assert traced.cache_trace.direct_pages == 1
    assert traced.guest_stats['memory_bytes'] == 8 * 2 ** 20
    hypervisor.stop_tracing(uuid)
    assert vm.guest.capacity == 8 * 256
    hypervisor.collect(uuid)
    assert vm.guest.corrupted == 0


def test_the_curve_of_a_traced_vm_matches_its_misses(conf):
    """The agent's path (start_tracing, the driver's CacheTraces,
    CacheTracing) against a VM-only run of the same references."""
    conf.set_override('instances', 3, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    conf.set_override('references_per_interval', 10000, 'simulated')
    # 8 files of 1 MB.
    conf.set_override('file_server_memory_ratio', 0.5, 'simulated')
    conf.set_override('report_interval', 1, 'agent')
    conf.set_override('tracing_period', 100, 'hcache')
    conf.set_override('tracing_window', 3, 'hcache')
    hypervisor = driver.load('simulated', conf, 'compute-1')
    uuid = hypervisor.list_instances()[2].uuid
    windows = tracing.CacheTracing(conf, 4096)
    samples = [hypervisor.collect(uuid)]
    # 2 MB direct, 14 MB of hypervisor cache.
    hypervisor.start_tracing(uuid, 14 * 2 ** 20)
    windows.start()
    for _ in range(3):
        samples.append(hypervisor.collect(uuid))
        windows.add(samples[-1].cache_trace)
    points = windows.curves()['hcache']
    assert points[0][0] == 2 * 2 ** 20
    # The VM's misses while traced are those of all its 16 MB.
    counted = samples[2:]
    measured = sum(s.guest_stats['misses'] for s in counted) / sum(
        s.guest_stats['accesses'] for s in counted)
    whole_memory = [ratio for size_bytes, ratio in points
                    if size_bytes <= 16 * 2 ** 20][-1]
    assert whole_memory == pytest.approx(measured, abs=0.01)
    whole = traces.Trace.of(
        np.concatenate([s.trace.pages for s in samples]),
        writes=np.concatenate([s.trace.writes for s in samples]))
    for size in (512, 768, 1024, 1536, 2048):
        actual = hcache_runs.vm_only(whole, size, warmup=20_000).miss_ratio
        predicted = [ratio for size_bytes, ratio in points
                     if size_bytes <= size * 4096][-1]
        assert predicted == pytest.approx(actual, abs=0.03)


def test_mechanisms_and_failures(conf, file_server):
    hypervisor, uuid = file_server
    with pytest.raises(exception.ResizeFailed, match='booted'):
        hypervisor.apply_memory_target(uuid, 128 * 2 ** 20, 'balloon')
    assert hypervisor.list_instances()[2].target_bytes is None
    grown = hypervisor.apply_memory_target(uuid, 200 * 2 ** 20, 'hotplug')
    assert grown.mechanism == 'hotplug'
    assert hypervisor.collect(uuid).guest_stats['memory_bytes'] == (
        200 * 2 ** 20)
    for bad in ('teleport', None):
        with pytest.raises(exception.ResizeFailed):
            hypervisor.apply_memory_target(uuid, 2 ** 20, bad)
    with pytest.raises(exception.ResizeFailed):
        hypervisor.apply_memory_target(uuid, 1.5, 'hotplug')
    conf.set_override('fail_resize_instances', ['0'], 'simulated')
    failing = driver.load('simulated', conf, 'compute-1')
    first = failing.list_instances()[0].uuid
    with pytest.raises(exception.ResizeFailed, match='fail_resize'):
        failing.apply_memory_target(first, 2 ** 20, 'balloon')


def test_used_memory_counts_pages_of_the_last_intervals():
    vm = simulated.SimulatedVM('compute-1', 0, 64 * 4096, 0, 10 ** 9, 100,
                               kernel_bytes=2 * 4096)

    def run(pages):
        pages = np.array(pages, np.int64)
        trace = traces.Trace.of(pages, writes=np.zeros(pages.size, bool))
        return vm.run_guest(trace)['used_bytes'] / 4096

    # The kernel's two pages plus what the guest touched lately.
    assert run(range(10)) == 2 + 10
    assert run(range(10, 15)) == 2 + 15
    assert run([]) == 2 + 15
    # Pages 0-9 were last used three intervals ago: no longer active.
    assert run([20]) == 2 + 6
    # Pages still active but evicted are not in use; nor is more than
    # the VM's memory.
    vm.resize(8 * 4096, 'balloon', loaded=False)
    assert run(range(30, 40)) == 8
    vm.kernel_bytes = 0
    # Ten pages active, eight of them in memory.
    assert run([]) == 8
    assert run([]) == 8
    assert run([]) == 0


def test_a_program_that_exits_frees_its_committed_memory_and_swap():
    vm = simulated.SimulatedVM('compute-1', 0, 64 * 4096, 0, 10 ** 9, 1000)
    # 1000 references a second: a 100-page program for 10 s, then a
    # 10-page one.
    vm.workload = workloads.DacapoLike(
        phases=[('big', 100 * 4096 / 2 ** 20, 10),
                ('small', 10 * 4096 / 2 ** 20, 10)],
        rng=np.random.default_rng(1), reference_ns=10 ** 6,
        references_per_round=1000)
    stats = vm.run_guest(vm.workload.take(9000))
    assert stats['committed_bytes'] == 100 * 4096
    assert stats['swap_bytes'] >= 36 * 4096
    stats = vm.run_guest(vm.workload.take(2000))
    assert vm.workload.allocated_pages == 10
    assert stats['committed_bytes'] == 10 * 4096
    assert stats['swap_bytes'] == 0


def _after_one_window():
    """A VM of 1024 pages that read 1000, then one tracing window of 896
    pages (128 direct: the cache takes blocks 0..871, dropped at the
    window's end); the VM and a function running pages through it."""
    vm = simulated.SimulatedVM('compute-1', 0, 4 * 2 ** 20, 0, 10 ** 9, 100)

    def run(pages):
        return vm.run_guest(traces.Trace.of(np.asarray(pages, np.int64)))

    run(range(1000))
    vm.start_tracing(896 * 4096, 'delayed')
    vm.cache_trace(0)
    vm.stop_tracing()
    return vm, run


def test_a_window_lists_what_the_last_window_dropped_before_the_vm_read_it(
        conf):
    """A window that starts while the VM still refills the memory the last
    one gave back empty: the reads of what it dropped are refills, and
    its curve puts them where a VM never traced holds them, not at misses
    of every size."""
    vm, run = _after_one_window()
    run(range(100))
    vm.start_tracing(896 * 4096, 'delayed')
    run(range(2000, 2010))
    window = [vm.cache_trace(10)]
    # Blocks 500..509: 610 pages deep for a VM of 1024 never traced.
    stats = run(range(500, 510))
    window.append(vm.cache_trace(10))
    assert (stats['misses'], stats['tracing_refills']) == (10, 10)
    curve = tracing.window_curve(window)
    assert curve.sizes[0] == 128
    assert curve.at(128) == 1.0
    assert curve.at(1024) == 0.0


def test_only_what_a_vm_never_traced_would_hold_is_a_refill(conf):
    """Of what a window dropped, a refill is what the VM's free memory
    still has room for; the rest, and what the guest evicted, a VM never
    traced would have evicted too: the next window's curve puts its reads
    above the VM's memory."""
    vm, run = _after_one_window()
    # 1024 pages: the 128 it kept, these 100, and 796 of the 872 dropped
    # (76..871); a VM never traced evicted blocks 0..75 for these.
    run(range(2000, 2100))
    assert run(range(70, 76))['tracing_refills'] == 0
    assert run(range(500, 506))['tracing_refills'] == 6
    # Past its memory: the guest evicts blocks 3000..3999's elders.
    run(range(3000, 4000))
    vm.start_tracing(896 * 4096, 'delayed')
    run(range(5000, 5010))
    window = [vm.cache_trace(10)]
    # 2000..2009: evicted for 3000..3999, 1000-odd pages deep.
    run(range(2000, 2010))
    window.append(vm.cache_trace(10))
    curve = tracing.window_curve(window)
    assert curve.at(1024) == 1.0
    assert curve.at(1200) == 0.0


def test_what_two_windows_dropped_is_refilled_while_there_is_room(conf):
    """What the first of two windows dropped and the VM did not read
    since, a VM never traced holds still: reading it after the second is
    a refill too."""
    vm = simulated.SimulatedVM('compute-1', 0, 4 * 2 ** 20, 0, 10 ** 9, 100)

    def run(pages):
        return vm.run_guest(traces.Trace.of(np.asarray(pages, np.int64)))

    run(range(1000))
    for _ in range(2):
        vm.start_tracing(896 * 4096, 'delayed')
        vm.cache_trace(0)
        vm.stop_tracing()
        run(range(500, 510))
    stats = run(range(10))
    assert (stats['misses'], stats['tracing_refills']) == (10, 10)
