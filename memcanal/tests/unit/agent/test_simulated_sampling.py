"""Access sampling on the simulated hypervisor: what memcanal-pager would
see of each VM, the agent's "sampled" estimates from it, and simulated
paging learning from it."""

import numpy as np
import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import actuators
from memcanal.agent.drivers import simulated_sampling
from memcanal.estimation import mrc
from memcanal.estimation import packed_curve
from memcanal.rpc import reports
from memcanal.tests.unit.agent import test_manager

PAGE = 4096
PAGES = 1000
RATE = 0.1
SAMPLED = np.flatnonzero(mrc.sample_mask(PAGES, RATE))
UNSAMPLED = np.setdiff1d(np.arange(PAGES), SAMPLED)


def sampler(full_pass_every=3):
    """Intervals of 10 ns: a full pass every third."""
    return simulated_sampling.Sampler(
        PAGES, simulated_sampling.Settings(RATE, 10, full_pass_every))


def access(sampling, pages, writes, start_ns):
    """References one ns apart from ``start_ns``."""
    sampling.access(pages, writes, start_ns + np.arange(len(pages)))


def test_a_sampled_page_is_seen_once_an_interval_another_once_a_pass():
    sampling = sampler()
    both = sorted([SAMPLED[0], UNSAMPLED[0]])
    for interval in range(6):
        access(sampling, both * 2, [False] * 4, interval * 10)
    sampling.advance(60)
    intervals = sampling.take()
    assert [i.full for i in intervals] == [False, False, True] * 2
    # A VM starts with no page populated: its first access is seen.
    assert [i.touched.tolist() for i in intervals] == [
        both, [SAMPLED[0]], both, [SAMPLED[0]], [SAMPLED[0]], both]
    assert all(i.seconds == 10e-9 for i in intervals)
    assert sampling.take() == ()


def test_writes_are_seen_as_the_pager_s_fault_rules_show_them():
    sampling = sampler(full_pass_every=1)
    sampled, unsampled = SAMPLED[:3], UNSAMPLED[:3]
    # Read then write, write first, read only: a sampled page read is
    # protected, so its later write faults; another is mapped writable.
    pages = np.concatenate([sampled, sampled[:2], unsampled, unsampled[:2]])
    writes = [False, True, False, True, False] * 2
    access(sampling, pages, writes, 0)
    sampling.advance(10)
    [interval] = sampling.take()
    assert interval.touched.tolist() == sorted(
        sampled.tolist() + unsampled.tolist())
    assert interval.written.tolist() == sorted(
        sampled[:2].tolist() + [unsampled[1]])


def test_a_page_paged_out_faults_and_a_prefetched_one_does_not():
    sampling = sampler(full_pass_every=0)
    out, prefetched = UNSAMPLED[:2]
    sampled_out = SAMPLED[0]
    pages = [out, prefetched, sampled_out]
    access(sampling, pages, [False] * 3, 0)
    sampling.advance(10)
    sampling.take()
    sampling.swapped_out(pages)
    # The pager prefetches no sampled page: it faults instead.
    sampling.fetched([prefetched, sampled_out])
    access(sampling, [out, prefetched, sampled_out], [True, True, False], 13)
    access(sampling, [sampled_out], [True], 16)
    sampling.advance(20)
    [interval] = sampling.take()
    assert interval.touched.tolist() == sorted([out, sampled_out])
    # A MISSING write is a write; a sampled page read from out is
    # mapped write-protected, so its later write is seen too.
    assert interval.written.tolist() == sorted([out, sampled_out])
    access(sampling, [out, prefetched], [False, False], 20)
    sampling.advance(30)
    assert sampling.take()[0].touched.size == 0


def test_intervals_end_by_the_references_times():
    sampling = sampler(full_pass_every=0)
    sampling.access([SAMPLED[0], SAMPLED[1]], [False, False], [5, 35])
    assert [i.touched.tolist() for i in sampling.take()] == [
        [SAMPLED[0]], [], []]
    sampling.advance(39)
    assert sampling.take() == ()


def paging_settings(interval_ns=10 ** 9, full_pass_every=4):
    return simulated_sampling.Settings(RATE, interval_ns, full_pass_every)


def run_seconds(pager, pages, second, count=4000):
    """``count`` references to ``pages`` spread over the ``second``-th
    second; the intervals that ended."""
    rng = np.random.default_rng(second)
    references = rng.choice(pages, count)
    times = second * 10 ** 9 + np.arange(count) * (10 ** 9 // count)
    pager.run(references, np.zeros(count, bool), times)
    return pager.take_samples((second + 1) * 10 ** 9)


def test_the_pager_s_detector_learns_only_what_sampling_saw():
    """A hot tenth, the rest idle: before the first full pass (the
    eighth interval) only idle sampled pages can be cold; after it, the
    pages outside the sample it did not see are, once idle for the
    detector's expire-time-II (20 scans, 5 s)."""
    pager = actuators.Pager(PAGES, 1.0, scans=4,
                            sampling_settings=paging_settings(
                                full_pass_every=8))
    hot = np.arange(100)
    for second in range(7):
        [interval] = run_seconds(pager, hot, second)
        assert not interval.full
    cold = pager.feed.cold()
    assert cold.size and np.isin(cold, SAMPLED).all()
    for second in range(7, 12):
        run_seconds(pager, hot, second)
    assert np.isin(pager.feed.cold(), SAMPLED).all()
    run_seconds(pager, hot, 12)
    cold = pager.feed.cold()
    assert np.isin(np.setdiff1d(np.arange(100, PAGES), SAMPLED), cold).all()
    assert not np.isin(hot, cold).any()


def test_paging_with_sampling_keeps_the_hot_pages():
    pager = actuators.Pager(PAGES, 1.0, scans=4,
                            sampling_settings=paging_settings())
    hot = np.arange(100)
    for second in range(12):
        run_seconds(pager, hot, second)
    pager.resize(200 * PAGE, [])
    assert pager.resident[hot].all()
    pager.take_events()
    for second in range(12, 15):
        intervals = run_seconds(pager, hot, second)
        # The pager still sees the sample every interval.
        assert np.isin(np.intersect1d(hot, SAMPLED),
                       intervals[0].touched).all()
    assert pager.take_events()[2] == 0


def test_a_fault_on_a_paged_out_page_is_a_touch():
    pager = actuators.Pager(PAGES, 1.0, scans=1,
                            sampling_settings=paging_settings(
                                full_pass_every=0))
    for second in range(3):
        run_seconds(pager, np.arange(100), second)
    pager.resize(100 * PAGE, [])
    cold = UNSAMPLED[UNSAMPLED > 500][0]
    pager.run([cold], [False], [3 * 10 ** 9])
    [interval] = pager.take_samples(4 * 10 ** 9)
    assert cold in interval.touched


# -- the driver and the agent ---------------------------------------------


@pytest.fixture
def host(conf):
    conf.set_override('instances', 4, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 20_000, 'simulated')
    conf.set_override('rate', RATE, 'sampling')
    conf.set_override('target_error', 0, 'sampling')
    return driver.load('simulated', conf, 'compute-1')


def test_each_sample_carries_the_interval_that_ended_in_it(host):
    vm = host.list_instances()[0].uuid
    samples = [host.collect(vm).accesses for _ in range(12)]
    assert all(len(s.intervals) == 1 for s in samples)
    assert [s.intervals[0].full for s in samples] == [False] * 11 + [True]
    assert (samples[0].rate, samples[0].salt) == (RATE, mrc.DEFAULT_SALT)
    # The first PRL array of 1/64 of the VM: 256 pages, all touched.
    np.testing.assert_array_equal(samples[1].intervals[0].touched,
                                  SAMPLED_64MB[SAMPLED_64MB < 256])


SAMPLED_64MB = np.flatnonzero(mrc.sample_mask(64 * 256, RATE))


def test_shorter_sampling_intervals_split_a_report(conf):
    conf.set_override('interval', conf.agent.report_interval / 4,
                      'sampling')
    conf.set_override('instances', 1, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    host = driver.load('simulated', conf, 'compute-1')
    vm = host.list_instances()[0].uuid
    assert [len(host.collect(vm).accesses.intervals)
            for _ in range(3)] == [4, 4, 4]


def test_sampling_disabled_leaves_samples_without_accesses(conf):
    conf.set_override('enabled', False, 'sampling')
    conf.set_override('instances', 1, 'simulated')
    conf.set_override('instance_memory_mb', 16, 'simulated')
    host = driver.load('simulated', conf, 'compute-1')
    vm = host.list_instances()[0]
    assert host.collect(vm.uuid).accesses is None
    estimators = collector.InstanceCollector(conf, vm.uuid,
                                             vm.allocated_bytes, PAGE)
    summary = estimators.collect(host.collect(vm.uuid))
    assert 'sampled' not in summary['wss']
    assert 'sampling_rate' not in summary['guest_stats']


def test_the_collector_reports_the_sampled_estimates(host, conf):
    vm = host.list_instances()[0]
    estimators = collector.InstanceCollector(conf, vm.uuid,
                                             vm.allocated_bytes, PAGE)
    for _ in range(4):
        summary = estimators.collect(host.collect(vm.uuid))
    # PRL's array of 256 pages, read and written every pass.
    assert summary['wss']['sampled'] == pytest.approx(256 * PAGE, rel=0.05)
    assert summary['wss']['sampled_write'] == summary['wss']['sampled']
    stats = summary['guest_stats']
    assert stats['sampling_rate'] == RATE
    assert stats['sampling_interval_s'] == conf.agent.report_interval
    assert stats['sampled_touches_per_s'] == pytest.approx(
        256 / conf.agent.report_interval, rel=0.05)
    curve = packed_curve.unpack(summary['mrc']['sampled'])
    # Every page comes back the next interval: after the first one's
    # cold touches, no fault at the array's size.
    assert curve[0][0] == summary['wss']['sampled']
    assert curve[0][1] == pytest.approx(1 / 4)
    assert estimators.accesses.intervals[0].touched.size


def test_a_new_rate_keeps_the_estimates_and_a_new_salt_restarts(conf):
    estimators = collector.InstanceCollector(conf, 'vm', 1000 * PAGE, PAGE)

    def collect(rate, salt=mrc.DEFAULT_SALT, own=False):
        interval = driver.AccessInterval(
            np.arange(1000), np.arange(0), False, 2.0,
            *((rate, salt) if own else ()))
        sample = driver.Sample(PAGE, None, {}, accesses=driver.AccessSamples(
            (interval,), rate if not own else 0.5, salt if not own else 3))
        return estimators.collect(sample)
    collect(1.0)
    assert collect(1.0)['guest_stats']['sampled_touches_per_s'] == 500.0
    summary = collect(0.1, own=True)
    stats = summary['guest_stats']
    assert stats['sampling_rate'] == 0.1
    assert stats['sampling_confidence'] == 0.95
    # The window's pages at the lowest rate, 0.1.
    assert stats['sampled_pages'] == mrc.shards_sample(
        np.arange(1000), 0.1).size
    low, high = summary['wss_bounds']['sampled']
    assert low <= summary['wss']['sampled'] <= high
    assert low <= 1000 * PAGE <= high
    # The curve goes on, at the lowest rate: a third of its touches cold.
    assert packed_curve.unpack(summary['mrc']['sampled'])[0][1] == \
        pytest.approx(1 / 3)
    band = summary['mrc_bands']['sampled']
    lows, highs = (packed_curve.unpack(band[edge]) for edge in ('low',
                                                                'high'))
    assert [size for size, _ in lows] == [
        size for size, _ in packed_curve.unpack(summary['mrc']['sampled'])]
    assert lows[0][1] <= 1 / 3 <= highs[0][1]
    # Another salt: another sample, whose first touches are cold.
    summary = collect(0.1, salt=99, own=True)
    assert packed_curve.unpack(summary['mrc']['sampled'])[0][1] == 1.0
    # No interval ended: the estimates stay.
    empty = driver.Sample(PAGE, None, {}, accesses=driver.AccessSamples(
        (), 0.1, 99))
    assert estimators.collect(empty)['wss'] == summary['wss']


def test_the_simulated_pager_takes_a_new_sample_at_its_next_interval():
    sampling = sampler(full_pass_every=0)
    sampling.resample(0.5, 7)
    # The interval under way keeps its sample; the next has the new one.
    for start in (0, 10):
        sampling.access(np.arange(PAGES), np.zeros(PAGES, bool),
                        np.full(PAGES, start))
    sampling.advance(20)
    first, second = sampling.take()
    assert (first.rate, first.salt) == (RATE, mrc.DEFAULT_SALT)
    assert (second.rate, second.salt) == (0.5, 7)
    new = np.flatnonzero(mrc.sample_mask(PAGES, 0.5, 7))
    # Every page of the new sample faults; the old sample's pages were
    # zapped at the first interval's start and touched then: mapped.
    assert set(new) <= set(second.touched)


def test_reports_with_sampled_estimates_are_valid(conf):
    agent = test_manager.make_agent(conf)
    for _ in range(3):
        report = agent.report()
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    assert all('sampled' in sample['mrc'] and 'sampled' in sample['wss']
               for sample in report['instances'])
