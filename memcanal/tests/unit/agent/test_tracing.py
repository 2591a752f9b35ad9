"""Tracing windows: when the agent lends a VM's memory to the hypervisor
cache, and the curve a window gives."""

import numpy as np
import pytest

from memcanal.agent import driver
from memcanal.agent import tracing
from memcanal.estimation import guest
from memcanal.estimation import hcache
from memcanal.estimation import hcache_runs
from memcanal.estimation import traces
from memcanal.estimation import workloads


@pytest.fixture
def windows(conf):
    conf.set_override('report_interval', 10, 'agent')
    conf.set_override('tracing_period', 60, 'hcache')
    conf.set_override('tracing_window', 25, 'hcache')
    return tracing.CacheTracing(conf, 4096)


def cache_trace(blocks, reads, direct_pages=100, accesses=10):
    return driver.CacheTrace(np.array(blocks, np.int64),
                             np.array(reads, bool), direct_pages, accesses)


def test_off_unless_a_period_is_set(conf):
    assert not tracing.CacheTracing(conf, 4096).due()


def test_windows_start_every_period_and_last_whole_intervals(windows):
    assert (windows.period, windows.window) == (6, 3)
    schedule = []
    for _ in range(14):
        windows.add(cache_trace([], []) if windows.active else None)
        if windows.window_complete:
            windows.stop()
            schedule.append('stop')
        elif windows.due():
            windows.start()
            schedule.append('start')
        else:
            schedule.append('-')
    assert schedule == ['start', '-', '-', 'stop', '-', '-', 'start', '-',
                        '-', 'stop', '-', '-', 'start', '-']


def test_the_first_interval_only_warms_the_list_up(windows):
    windows.start()
    # Interval 1 evicts 1 and 2; later intervals read them back.
    windows.add(cache_trace([1, 2, 9], [False, False, True]))
    windows.add(cache_trace([2], [True]))
    assert windows.curves() == {}
    windows.add(cache_trace([1], [True]))
    # 2 of 20 accesses miss 100 direct pages; each read is first in the
    # list (1 moves up once 2 has gone back to the VM).
    assert windows.curves() == {'hcache': [
        [100 * 4096, pytest.approx(0.1)], [101 * 4096, 0.0]]}


def test_the_curve_stays_until_the_next_window_replaces_it(windows):
    windows.start()
    for _ in range(3):
        windows.add(cache_trace([], []))
    curve = windows.curves()
    windows.stop()
    windows.add(None)
    assert windows.curves() == curve and 'hcache' in curve


def test_a_window_predicts_what_a_smaller_vm_would_miss(conf):
    """The agent's path (driver window, CacheTracing) against a VM-only
    run of the same references at each size."""
    conf.set_override('report_interval', 1, 'agent')
    conf.set_override('tracing_period', 100, 'hcache')
    conf.set_override('tracing_window', 3, 'hcache')
    windows = tracing.CacheTracing(conf, 4096)
    workload = workloads.FileServer('zipf', files=16, file_mb=1,
                                    rng=np.random.default_rng(2))
    intervals = [workload.take(20_000) for _ in range(3)]
    ghost = hcache.GhostEvents()
    vm = guest.GuestPageCache(1024, hcache.HypervisorCache(
        hcache.Storage(), 2048, ghost=ghost))
    windows.start()
    for trace in intervals:
        vm.run(trace.pages, trace.writes)
        blocks, reads = ghost.arrays()
        ghost.clear()
        windows.add(driver.CacheTrace(blocks, reads, 1024, len(trace)))
    points = windows.curves()['hcache']
    whole = traces.Trace.of(
        np.concatenate([trace.pages for trace in intervals]),
        writes=np.concatenate([trace.writes for trace in intervals]))
    for size in (1024, 2048, 4096):
        actual = hcache_runs.vm_only(whole, size, warmup=20_000).miss_ratio
        predicted = [ratio for size_bytes, ratio in points
                     if size_bytes <= size * 4096][-1]
        assert predicted == pytest.approx(actual, abs=0.03)
