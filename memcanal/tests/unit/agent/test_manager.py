from unittest import mock

import oslo_messaging as messaging
import pytest

from memcanal.agent import driver
from memcanal.agent import manager
from memcanal.estimation import packed_curve
from memcanal import exception
from memcanal.rpc import reports

HOST_UUID = '4f1c2a2e-6b1f-4f5e-9a43-2b9f0e4d1c11'


@pytest.fixture
def agent(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 4, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 2000, 'simulated')
    conf.set_override('prl_tau', 5, 'estimation')
    return make_agent(conf)


def make_agent(conf, hypervisor=None):
    """An agent of compute-1 (on a simulated host unless ``hypervisor``)
    whose service registers it and has stored none of its reports."""
    hypervisor = hypervisor or driver.load('simulated', conf, 'compute-1')
    agent = manager.AgentManager(conf, 'compute-1', hypervisor)
    agent._service_api = mock.Mock()
    agent._service_api.register_host.return_value = {
        'uuid': HOST_UUID, 'last_sequence': 0}
    agent._service_api.stored_reports.return_value = {'stored': [],
                                                      'rejected': []}
    return agent


def test_report_registers_first_and_is_valid(agent, conf):
    report = agent.report()
    agent.service_api.register_host.assert_called_once()
    assert agent.service_api.register_host.call_args.kwargs[
        'hypervisor_type'] == 'simulated'
    assert report['sequence'] == 1
    assert len(report['instances']) == 4
    # Whatever the agent sends, the service's validation accepts.
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    sent = agent.service_api.report.call_args.args[1]
    assert sent is report
    curves = [packed_curve.unpack(sample['mrc']['shards'])
              for sample in report['instances'] if 'shards' in sample['mrc']]
    assert curves
    assert all(len(curve) <= conf.agent.max_mrc_points for curve in curves)


def test_reports_carry_the_zone_and_each_vms_flavor(agent, conf):
    conf.set_override('availability_zone', 'az1', 'agent')
    report = agent.report()
    assert report['availability_zone'] == 'az1'
    assert all(sample['flavor'].startswith('sim.')
               for sample in report['instances'])


def test_reports_register_the_hosts_memory_server(agent, conf):
    assert 'memserver' not in agent.build_report()
    conf.set_override('memserver_mb', 512, 'simulated')
    report = make_agent(conf).report()
    assert report['memserver'] == {'address': 'compute-1:7400',
                                   'capacity_bytes': 512 * 2 ** 20,
                                   'used_bytes': 0}
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)


def test_an_unreachable_memory_server_is_not_registered(agent, conf):
    # Nothing listens on port 9 of localhost here.
    conf.set_override('memserver_address', '127.0.0.1:9', 'pooling')
    assert 'memserver' not in agent.build_report()


def test_reports_carry_each_vms_estimates_once_they_converge(agent, conf):
    for _ in range(8):
        report = agent.report()
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    wss = {sample['uuid']: sample['wss'] for sample in report['instances']}
    vms = {vm.uuid: vm for vm in agent.driver._vms.values()}
    for uuid, estimates in wss.items():
        workload = vms[uuid].workload
        if workload.__class__.__name__ == 'PrlSyntheticApp':
            # The array is the working set, to the page.
            assert estimates['prl'] == workload.working_set_pages * 4096
        assert set(estimates) <= {'prl', 'pml', 'esx', 'sampled',
                                  'sampled_write'}
        assert 'esx' in estimates
        assert agent.estimators(uuid).prl.rounds >= 1


def test_reports_say_what_the_emulated_logs_did(agent):
    """Each interval's log-full events and GPAs logged, by log; PML's
    handler runs on the VM's CPU, PRL's never does."""
    logs = [sample['logs'] for _ in range(3)
            for sample in agent.report()['instances']]
    assert all(set(log) == {'prl', 'pml'} for log in logs)
    total = {key: sum(log['prl'][key] for log in logs)
             for key in ('events', 'logged')}
    # A log may fill with entries of an earlier interval: only over the
    # whole run is every event a full log.
    assert 0 < total['events'] * 512 <= total['logged']
    for log in logs:
        assert log['prl']['vm_cpu_ns'] == 0
        assert log['pml']['vm_cpu_ns'] == log['pml']['handler_ns']


def test_vanished_vm_loses_its_estimators(agent):
    agent.report()
    gone = next(iter(agent.driver._vms))
    del agent.driver._vms[gone]
    agent.report()
    assert gone not in agent._collectors
    assert len(agent._collectors) == 3


def test_a_vm_leaving_while_measured_leaves_the_others_reported(agent):
    listed = agent.driver.list_instances()
    gone = listed[0].uuid
    collect = agent.driver.collect

    def collect_after_it_left(uuid):
        # The VM migrates away between the listing and its collection.
        agent.driver._vms.pop(gone, None)
        return collect(uuid)

    with mock.patch.object(agent.driver, 'list_instances',
                           return_value=listed), \
            mock.patch.object(agent.driver, 'collect',
                              side_effect=collect_after_it_left):
        report = agent.build_report()
    assert [s['uuid'] for s in report['instances']] == [
        i.uuid for i in listed[1:]]
    assert gone not in agent._collectors


def test_sequence_resumes_after_what_service_stored(agent):
    agent.service_api.register_host.return_value['last_sequence'] = 41
    assert agent.report()['sequence'] == 42
    assert agent.report()['sequence'] == 43


def test_sequence_survives_a_restart_even_if_service_knows_less(agent, conf):
    for _ in range(3):
        agent.report()
    restarted = manager.AgentManager(conf, 'compute-1', agent.driver)
    restarted._service_api = agent.service_api
    # Reports 1-3 may still be in flight: the service knows only of 1.
    agent.service_api.register_host.return_value['last_sequence'] = 1
    assert restarted.report()['sequence'] == 4


def test_no_report_until_registration_succeeds(agent):
    agent.service_api.register_host.side_effect = messaging.MessagingTimeout
    assert agent.report() is None
    agent.service_api.report.assert_not_called()
    agent.service_api.register_host.side_effect = None
    assert agent.report()['sequence'] == 1


MIB = 2 ** 20


def resize_recorder(agent, fail_on=()):
    """Make the driver record resizes and fail those of ``fail_on`` VMs;
    each guest is at its target as soon as it is set."""
    done = []
    reached = {}

    def resize(uuid, target_bytes, mechanism='balloon', stores=(),
               lease_tokens=None):
        if uuid in fail_on:
            raise exception.ResizeFailed(uuid=uuid, reason='cap')
        done.append((uuid, target_bytes, mechanism))
        reached[uuid] = target_bytes
        return driver.Resize(mechanism, 64 * MIB, target_bytes, 0.05)

    agent.driver.apply_memory_target = resize
    agent.driver.memory_now = lambda uuid, mechanism: reached[uuid]
    return done


class LaggingGuest:
    """A guest whose balloon gives up ``step_bytes`` of a shrink each
    time its memory is read, down to ``floor_bytes`` at most: a fake
    driver's VM that lags its target."""

    def __init__(self, memory_bytes, step_bytes, floor_bytes):
        self.memory_bytes = memory_bytes
        self.step_bytes = step_bytes
        self.floor_bytes = floor_bytes
        self.target_bytes = None
        self.reads = 0

    def resize(self, uuid, target_bytes, mechanism='balloon', stores=(),
               lease_tokens=None):
        self.target_bytes = target_bytes
        return driver.Resize(mechanism, self.memory_bytes, target_bytes, 0.01)

    def memory_now(self, uuid, mechanism):
        self.reads += 1
        self.memory_bytes = max(self.memory_bytes - self.step_bytes,
                                self.target_bytes, self.floor_bytes)
        return self.memory_bytes


def actions(agent, *targets_mb):
    vms = [vm.uuid for vm in agent.driver.list_instances()]
    return [{'uuid': 'action-%d' % index, 'instance_uuid': vms[index],
             'target_bytes': target * MIB, 'mechanism': 'hotplug'}
            for index, target in enumerate(targets_mb)]


def test_actions_are_applied_once_by_action_id(agent):
    done = resize_recorder(agent)
    vm = agent.driver.list_instances()[0]
    for uuid, target in (('action-1', 48), ('action-1', 48),
                         ('action-2', 32)):
        agent._carry_out('d', [{'uuid': uuid, 'instance_uuid': vm.uuid,
                                'target_bytes': target * MIB,
                                'mechanism': 'balloon'}])
    assert done == [(vm.uuid, 48 * MIB, 'balloon'),
                    (vm.uuid, 32 * MIB, 'balloon')]


def test_apply_decision_shrinks_first_and_reports(agent):
    done = resize_recorder(agent)
    results = agent._carry_out('decision-1', actions(agent, 96, 32, 64))
    # The VMs have 64 MiB: the shrink to 32 goes first; 64 is no change.
    assert [target // MIB for _, target, _ in done] == [32, 64, 96]
    assert [r['state'] for r in results] == ['applied'] * 3
    assert dict(results[0]['result'], settle_seconds=None) == {
        'mechanism': 'hotplug', 'previous_bytes': 64 * MIB,
        'target_bytes': 32 * MIB, 'seconds': 0.05,
        'reached_bytes': 32 * MIB, 'lagged': False, 'settle_seconds': None}
    assert results[0]['result']['settle_seconds'] >= 0
    call = agent.service_api.actions_done.call_args
    assert call.args[1:] == ('decision-1', results)


def test_a_failed_shrink_skips_only_the_growth_it_paid_for(agent):
    """The VMs have 64 MiB; the failed shrink (-32) would have paid for
    the larger growth (+32), not for the smaller (+16)."""
    failing = agent.driver.list_instances()[1].uuid
    done = resize_recorder(agent, fail_on={failing})
    results = agent._carry_out('d', actions(agent, 96, 32, 80))
    by_uuid = {r['uuid']: r for r in results}
    assert by_uuid['action-1']['state'] == 'failed'
    assert 'cap' in by_uuid['action-1']['error']
    assert by_uuid['action-0']['state'] == 'skipped'
    assert by_uuid['action-2']['state'] == 'applied'
    assert [target // MIB for _, target, _ in done] == [80]
    assert all(set(r) == {'uuid', 'state', 'error', 'result'}
               for r in results)


def test_an_action_for_a_vanished_vm_does_not_stop_the_others(agent):
    vms = agent.driver.list_instances()
    done = resize_recorder(agent)
    decision = actions(agent, 96, 32) + [{
        'uuid': 'action-gone', 'instance_uuid':
        '99999999-0000-4000-8000-000000000009', 'target_bytes': 16 * MIB,
        'mechanism': 'hotplug'}]
    real = agent.driver.apply_memory_target

    def resize(uuid, target_bytes, mechanism='balloon', stores=(),
               lease_tokens=None):
        if uuid not in {vm.uuid for vm in vms}:
            raise exception.InstanceNotFound(uuid=uuid)
        return real(uuid, target_bytes, mechanism)
    agent.driver.apply_memory_target = resize
    results = agent._carry_out('d', decision)
    states = {r['uuid']: r['state'] for r in results}
    assert states == {'action-gone': 'failed', 'action-1': 'applied',
                      'action-0': 'applied'}
    assert sorted(target // MIB for _, target, _ in done) == [32, 96]


def test_a_paging_action_gives_the_driver_its_stores_and_tokens(agent):
    """A pooling decision's page action, as the service signs it: the
    lease token of each store goes to the driver, for the VM's pager."""
    vm = agent.driver.list_instances()[0]
    store = 'tls:10.0.0.5:7400'
    given = []

    def resize(uuid, target_bytes, mechanism='balloon', stores=(),
               lease_tokens=None):
        given.append((uuid, target_bytes, mechanism, stores, lease_tokens))
        return driver.Resize(mechanism, 64 * MIB, target_bytes, 0.05)
    agent.driver.apply_memory_target = resize
    agent.driver.memory_now = lambda uuid, mechanism: 32 * MIB
    [result] = agent._carry_out('d', [{
        'uuid': 'page-1', 'instance_uuid': vm.uuid,
        'target_bytes': 32 * MIB, 'mechanism': 'paging', 'stores': [store],
        'lent_bytes': 32 * MIB, 'lease_tokens': {store: 'dG9rZW4='}}])
    assert result['state'] == 'applied'
    assert given == [(vm.uuid, 32 * MIB, 'paging', [store],
                      {store: 'dG9rZW4='})]


def test_a_guest_that_lags_its_target_is_reported_short_of_it(agent, conf):
    """The guest gives up 12 MiB a read, to 40 MiB at most: after
    [agent] target_settle_timeout the result says where it stopped."""
    conf.set_override('target_settle_timeout', 0.3, 'agent')
    vm = agent.driver.list_instances()[0]
    guest = LaggingGuest(64 * MIB, 12 * MIB, 40 * MIB)
    agent.driver.apply_memory_target = guest.resize
    agent.driver.memory_now = guest.memory_now
    [result] = agent._carry_out('d', [{
        'uuid': 'a', 'instance_uuid': vm.uuid, 'target_bytes': 32 * MIB,
        'mechanism': 'balloon'}])
    assert result['state'] == 'applied'
    done = result['result']
    assert (done['target_bytes'], done['reached_bytes'], done['lagged']) == (
        32 * MIB, 40 * MIB, True)
    assert done['settle_seconds'] > 0
    assert guest.reads >= 2
    agent.service_api.actions_done.assert_called_once_with(
        mock.ANY, 'd', [result])


def test_a_decisions_lagging_guests_share_one_wait(agent, conf):
    """The first shrink's guest lags until the decision's wait is over:
    the second's guest is read once, not waited for again."""
    conf.set_override('target_settle_timeout', 1.0, 'agent')
    vms = [vm.uuid for vm in agent.driver.list_instances()[:2]]
    guests = {uuid: LaggingGuest(64 * MIB, MIB, 60 * MIB) for uuid in vms}
    agent.driver.apply_memory_target = (
        lambda uuid, *args, **kwargs: guests[uuid].resize(uuid, *args))
    agent.driver.memory_now = (
        lambda uuid, mechanism: guests[uuid].memory_now(uuid, mechanism))
    results = agent._carry_out('d', [
        {'uuid': 'a%d' % index, 'instance_uuid': uuid,
         'target_bytes': (16 + index) * MIB, 'mechanism': 'balloon'}
        for index, uuid in enumerate(vms)])
    assert [r['result']['lagged'] for r in results] == [True, True]
    # The larger shrink (to 16 MiB) goes first and waits out the decision.
    assert (guests[vms[0]].reads >= 2, guests[vms[1]].reads) == (True, 1)


def test_a_guest_that_reaches_its_target_late_is_not_lagging(agent, conf):
    """16 MiB a read: at the 32 MiB target on the second read, well
    within the timeout."""
    conf.set_override('target_settle_timeout', 30, 'agent')
    vm = agent.driver.list_instances()[0]
    guest = LaggingGuest(64 * MIB, 16 * MIB, 0)
    agent.driver.apply_memory_target = guest.resize
    agent.driver.memory_now = guest.memory_now
    [result] = agent._carry_out('d', [{
        'uuid': 'a', 'instance_uuid': vm.uuid, 'target_bytes': 32 * MIB,
        'mechanism': 'balloon'}])
    assert (result['result']['reached_bytes'], result['result']['lagged'],
            guest.reads) == (32 * MIB, False, 2)
    assert result['result']['settle_seconds'] < 30


def test_the_simulated_driver_reads_back_its_resized_vm(agent):
    vm = agent.driver.list_instances()[0]
    [result] = agent._carry_out('d', [{
        'uuid': 'a', 'instance_uuid': vm.uuid, 'target_bytes': 48 * MIB,
        'mechanism': 'balloon'}])
    assert (result['result']['reached_bytes'],
            result['result']['lagged']) == (48 * MIB, False)


def test_redelivered_decision_is_applied_once(agent):
    done = resize_recorder(agent)
    first = agent._carry_out('d', actions(agent, 32, 96))
    again = agent._carry_out('d', actions(agent, 32, 96))
    assert len(done) == 2
    assert first == again
    assert agent.service_api.actions_done.call_count == 2


def test_tracing_windows_report_an_hcache_curve(agent, conf):
    conf.set_override('report_interval', 1, 'agent')
    conf.set_override('tracing_period', 10, 'hcache')
    conf.set_override('tracing_window', 3, 'hcache')
    conf.set_override('cache_fraction', 0.5, 'hcache')
    # Enough references that each VM touches all its data in report 1.
    conf.set_override('references_per_interval', 20000, 'simulated')
    agent.driver = driver.load('simulated', conf, 'compute-1')
    # Report 1 starts the windows; reports 2 (warm-up) to 4 trace.
    for _ in range(4):
        report = agent.report()
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    for sample in report['instances']:
        curve = packed_curve.unpack(sample['mrc']['hcache'])
        # From the half the VM kept; the data fits there, so nothing
        # misses once the VM has touched it all.
        assert curve[0][0] == 32 * 2 ** 20
        assert all(0.0 <= ratio < 0.05 for _, ratio in curve)
        assert 'shards' in sample['mrc']
    assert not any(vm._tracing for vm in agent.driver._vms.values())
    assert 'hcache' in agent.report()['instances'][0]['mrc']


def test_a_driver_without_a_hypervisor_cache_turns_tracing_off(agent,
                                                               conf):
    conf.set_override('tracing_period', 10, 'hcache')
    with mock.patch.object(type(agent.driver), 'start_tracing',
                           driver.HypervisorDriver.start_tracing):
        first = agent.report()
        second = agent.report()
    assert not agent._can_trace
    assert second['sequence'] == first['sequence'] + 1
    assert all('hcache' not in sample['mrc']
               for sample in second['instances'])


def test_a_simulated_host_hands_a_vm_to_another_once(agent, conf):
    destination = driver.load('simulated', conf, 'compute-2')
    uuid = agent.driver.list_instances()[0].uuid
    action = {'uuid': 'move-1', 'instance_uuid': uuid, 'kind': 'migrate',
              'source_host': 'compute-1', 'destination_host': 'compute-2'}
    [result] = agent._carry_out('decision-1', [action])
    assert result['state'] == 'applied'
    assert uuid not in [i.uuid for i in agent.driver.list_instances()]
    assert uuid in [i.uuid for i in destination.list_instances()]
    # Redelivered: the first outcome, nothing moved twice.
    assert agent._carry_out('decision-1', [action]) == [result]
    # A new action for a VM already there counts as moved.
    again = dict(action, uuid='move-2')
    assert agent._carry_out('decision-2', [again])[0][
        'state'] == 'applied'
    agent.service_api.actions_done.assert_called_with(
        mock.ANY, 'decision-2', mock.ANY)


def test_a_migration_to_an_unknown_host_fails_and_the_vm_stays(agent):
    uuid = agent.driver.list_instances()[0].uuid
    [result] = agent._carry_out('decision-1', [{
        'uuid': 'move-1', 'instance_uuid': uuid, 'kind': 'migrate',
        'source_host': 'compute-1', 'destination_host': 'nowhere'}])
    assert result['state'] == 'failed'
    assert 'no such simulated host' in result['error']
    assert uuid in [i.uuid for i in agent.driver.list_instances()]


def test_drivers_of_real_hypervisors_leave_migrations_to_nova(agent):
    uuid = agent.driver.list_instances()[0].uuid
    with pytest.raises(exception.MigrationFailed, match='nova does'):
        driver.HypervisorDriver.migrate_instance(agent.driver, uuid, 'x')
