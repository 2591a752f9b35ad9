"""The agent's adaptive sampling rate: each VM's rate follows its
working set within the bounds and budgets, and reaches its pager."""

from unittest import mock

import numpy as np
import pytest

from memcanal.agent import adaptive
from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.estimation import mrc
from memcanal.rpc import reports
from memcanal.rpc import service_api
from memcanal.tests.unit.agent import test_manager

PAGE = 4096


def sampled_vm(conf, touched_pages, rate=0.01, intervals=3, seconds=1.0):
    """A collector that saw ``touched_pages`` pages touched an interval
    (scattered, so the sample draws them binomially)."""
    estimators = collector.InstanceCollector(conf, 'vm', 1 << 32, PAGE)
    pages = np.random.default_rng(0).permutation(1 << 20)[:touched_pages]
    for _ in range(intervals):
        interval = driver.AccessInterval(pages, pages[:0], False, seconds)
        estimators.collect(driver.Sample(PAGE, None, {}, accesses=(
            driver.AccessSamples((interval,), rate, mrc.DEFAULT_SALT))))
    return estimators


def test_a_small_vm_gets_a_high_rate_a_large_one_a_low_one(conf):
    conf.set_override('vm_fault_budget', 0, 'sampling')
    conf.set_override('host_fault_budget', 0, 'sampling')
    rates = adaptive.SamplingRates(conf.sampling)
    plan = rates.plan({'small': sampled_vm(conf, 650, rate=0.5),
                       'large': sampled_vm(conf, 60_000)})
    assert plan['small'][0] >= 0.7
    assert plan['large'][0] <= 0.05
    assert plan['small'][1] == plan['large'][1] == mrc.DEFAULT_SALT


def test_the_budgets_hold_the_rates_down(conf):
    conf.set_override('vm_fault_budget', 100, 'sampling')
    conf.set_override('host_fault_budget', 0, 'sampling')
    # 650 first touches a second: 100 of them is 15 %.
    plan = adaptive.SamplingRates(conf.sampling).plan(
        {'vm': sampled_vm(conf, 650, rate=0.5)})
    assert plan['vm'][0] * 650 <= 100
    conf.set_override('vm_fault_budget', 0, 'sampling')
    conf.set_override('host_fault_budget', 300, 'sampling')
    vms = {'a': sampled_vm(conf, 650, rate=0.5),
           'b': sampled_vm(conf, 650, rate=0.5)}
    plan = adaptive.SamplingRates(conf.sampling).plan(vms)
    assert sum(plan[vm][0] * vms[vm].sampled.touches_per_s()
               for vm in vms) <= 300
    assert plan['a'][0] < 0.5


def test_no_adaptation_without_a_target_error(conf):
    conf.set_override('target_error', 0, 'sampling')
    assert adaptive.SamplingRates(conf.sampling).plan(
        {'vm': sampled_vm(conf, 650)}) == {}


def test_a_vm_not_sampled_is_left_alone(conf):
    estimators = collector.InstanceCollector(conf, 'vm', 1 << 30, PAGE)
    assert adaptive.SamplingRates(conf.sampling).plan(
        {'vm': estimators, 'gone': None}) == {}


def test_resalting_draws_another_sample_every_few_intervals(conf):
    conf.set_override('resalt_every', 2, 'sampling')
    rates = adaptive.SamplingRates(conf.sampling)
    vm = sampled_vm(conf, 650, rate=1.0)
    salts = [rates.plan({'vm': vm}).get('vm', (None, None))[1]
             for _ in range(4)]
    assert salts[0] is None and salts[2] is None
    assert salts[1] == adaptive.salt_for('vm', 1)
    assert salts[3] == adaptive.salt_for('vm', 2) != salts[1]


def test_the_agent_sets_each_simulated_vm_s_rate(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 2000, 'simulated')
    agent = test_manager.make_agent(conf)
    for _ in range(4):
        report = agent.report()
    rates = [sample['guest_stats']['sampling_rate']
             for sample in report['instances']]
    # 2,000 references over a few hundred pages an interval: far above
    # the default 1 %.
    assert all(rate > 0.1 for rate in rates)
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)


def test_before_rpc_1_7_the_intervals_stay_out(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 1, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 2000, 'simulated')
    agent = test_manager.make_agent(conf)
    with mock.patch.object(service_api.ServiceAPI, 'VERSION', '1.6'):
        for _ in range(3):
            report = agent.report()
    sample = report['instances'][0]
    assert 'sampled' in sample['wss']
    assert 'wss_bounds' not in sample and 'mrc_bands' not in sample


def test_from_rpc_1_7_the_report_carries_the_intervals(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 1, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 2000, 'simulated')
    agent = test_manager.make_agent(conf)
    with mock.patch.object(service_api.ServiceAPI, 'VERSION', '1.7'):
        for _ in range(3):
            report = agent.report()
    sample = report['instances'][0]
    low, high = sample['wss_bounds']['sampled']
    assert low <= sample['wss']['sampled'] <= high
    assert set(sample['mrc_bands']['sampled']) == {'low', 'high'}
    assert sample['guest_stats']['sampled_pages'] > 0


@pytest.mark.parametrize('draw', [1, 2, 3])
def test_salts_differ_by_vm_and_draw(draw):
    assert adaptive.salt_for('a', draw) != adaptive.salt_for('b', draw)
    assert adaptive.salt_for('a', 0) == mrc.DEFAULT_SALT
