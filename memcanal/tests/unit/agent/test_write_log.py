"""A hypervisor's write log through the PML estimator and a write curve
(memcanal.agent.write_log)."""

import numpy as np

from memcanal.agent import driver
from memcanal.agent import write_log

PAGE = 4096


def log(*intervals):
    return driver.WriteLog('xen', tuple(np.asarray(frames, np.int64)
                                        for frames in intervals))


def estimators(conf):
    return write_log.WriteLogEstimators(conf, 256 * 2 ** 20, PAGE, 'xen')


def test_the_round_ends_when_a_report_adds_no_frame(conf):
    written = write_log.name('xen')
    vm = estimators(conf)
    first = vm.collect(log(range(100), range(50, 150)))
    assert first['wss'] == {}
    second = vm.collect(log(range(0, 150, 2)))
    assert second['wss'] == {written: 150 * PAGE}
    assert set(second['mrc']) == {written}


def test_a_report_without_intervals_is_no_interval(conf):
    """The helper was down: the round goes on rather than ending at
    nothing written."""
    vm = estimators(conf)
    vm.collect(log(range(10)))
    assert vm.collect(log())['wss'] == {}
    assert vm.pml.rounds == 0


def test_the_write_curve_misses_less_with_more_memory(conf):
    conf.set_override('mrc_methods', ['exact'], 'estimation')
    vm = estimators(conf)
    summary = vm.collect(log(range(64), range(64), range(64)))
    sizes, ratios = np.array(summary['mrc']['xen_logdirty']).T
    assert ratios[0] == 1.0 and ratios[-1] < ratios[0]
    assert sizes[-1] >= 64 * PAGE
