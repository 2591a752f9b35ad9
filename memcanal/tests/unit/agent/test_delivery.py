"""The agent's side of at-least-once delivery: reports kept until the
service confirms them, actions journalled so each is applied once."""

import threading
import time

import oslo_messaging as messaging
import pytest

from memcanal.agent import driver
from memcanal.tests.unit.agent import test_manager as cases

MIB = 2 ** 20


@pytest.fixture
def agent(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 500, 'simulated')
    conf.set_override('report_confirm_delay', 0, 'agent')
    return cases.make_agent(conf)


def sent_sequences(agent):
    return [call.args[1]['sequence']
            for call in agent.service_api.report.call_args_list]


def test_a_report_is_on_disk_before_it_is_sent(agent, conf):
    conf.set_override('report_confirm_delay', 3600, 'agent')

    def cast(context, report):
        assert agent.outbox.load(report['sequence']) == report
    agent.service_api.report.side_effect = cast
    agent.report()
    assert agent.service_api.report.call_count == 1


def test_confirmed_reports_are_dropped_the_others_sent_again(agent):
    agent.service_api.stored_reports.return_value = {'stored': [],
                                                     'rejected': []}
    agent.report()
    # Report 1 was asked about at once (no delay) and, not stored, sent
    # again.
    assert sent_sequences(agent) == [1, 1]
    agent.service_api.stored_reports.return_value = {'stored': [1],
                                                     'rejected': []}
    agent.report()
    asked = agent.service_api.stored_reports.call_args
    assert asked.args[1:] == (cases.HOST_UUID, [1, 2])
    assert sent_sequences(agent) == [1, 1, 2, 2]
    assert agent.outbox.sequences() == [2]
    # A rejected report would be rejected again: it is dropped too.
    agent.service_api.stored_reports.return_value = {'stored': [3],
                                                     'rejected': [2]}
    agent.report()
    assert agent.outbox.sequences() == []


def test_reports_wait_for_the_confirm_delay(agent, conf):
    conf.set_override('report_confirm_delay', 3600, 'agent')
    agent.report()
    agent.report()
    agent.service_api.stored_reports.assert_not_called()
    assert sent_sequences(agent) == [1, 2]


def test_resends_are_bounded_per_interval(agent, conf):
    conf.set_override('max_resent_reports', 2, 'agent')
    agent.service_api.report.side_effect = messaging.MessageDeliveryFailure
    for _ in range(4):
        agent.report()
    # No broker: kept, and no question asked that would fail too.
    assert agent.outbox.sequences() == [1, 2, 3, 4]
    agent.service_api.stored_reports.assert_not_called()
    agent.service_api.report.side_effect = None
    agent.service_api.report.reset_mock()
    agent.report()
    # Report 5, then the two oldest not stored.
    assert sent_sequences(agent) == [5, 1, 2]


def test_without_an_answer_nothing_is_dropped(agent):
    agent.service_api.stored_reports.side_effect = messaging.RemoteError(
        'DBConnectionError')
    agent.report()
    agent.report()
    assert agent.outbox.sequences() == [1, 2]
    assert sent_sequences(agent) == [1, 2]


def test_a_restarted_agent_sends_what_its_outbox_holds(agent, conf):
    conf.set_override('report_confirm_delay', 3600, 'agent')
    agent.service_api.report.side_effect = messaging.MessageDeliveryFailure
    agent.report()
    agent.report()
    restarted = cases.make_agent(conf, agent.driver)
    restarted.service_api.stored_reports.return_value = {'stored': [1],
                                                         'rejected': []}
    restarted.report()
    assert sent_sequences(restarted) == [3, 2]
    assert restarted.outbox.sequences() == [2, 3]


def test_the_outbox_is_bounded(agent, conf):
    conf.set_override('max_unconfirmed_reports', 2, 'agent')
    conf.set_override('report_confirm_delay', 3600, 'agent')
    bounded = cases.make_agent(conf, agent.driver)
    for _ in range(3):
        bounded.report()
    assert bounded.outbox.sequences() == [2, 3]


# -- actions ------------------------------------------------------------


def resizes(agent):
    """Count the driver's resizes, which still happen."""
    calls = []
    real = agent.driver.apply_memory_target

    def resize(uuid, target_bytes, mechanism='balloon', stores=(),
               lease_tokens=None):
        calls.append((uuid, target_bytes))
        return real(uuid, target_bytes, mechanism)
    agent.driver.apply_memory_target = resize
    return calls


def test_killed_after_the_resize_answers_without_resizing_again(agent,
                                                                conf):
    actions = cases.actions(agent, 32, 48)
    # The agent died after resizing VM 0, before recording the outcome:
    # its intent is in the journal and the VM has the target.
    agent.journal.intend(actions[0], 64 * MIB)
    agent.driver.apply_memory_target(actions[0]['instance_uuid'],
                                     32 * MIB, 'hotplug')
    restarted = cases.make_agent(conf, agent.driver)
    done = resizes(restarted)
    results = restarted._carry_out('d', actions)
    assert done == [(actions[1]['instance_uuid'], 48 * MIB)]
    assert {r['uuid']: r['state'] for r in results} == {
        'action-0': 'applied', 'action-1': 'applied'}
    [first] = [r for r in results if r['uuid'] == 'action-0']
    assert first['result']['previous_bytes'] == 64 * MIB
    assert first['result']['target_bytes'] == 32 * MIB
    # Redelivered again: answered from the journal.
    again = restarted._carry_out('d', actions)
    assert sorted(again, key=str) == sorted(results, key=str)
    assert len(done) == 1


def test_killed_before_the_resize_resizes_after_a_restart(agent, conf):
    actions = cases.actions(agent, 32)
    agent.journal.intend(actions[0], 64 * MIB)
    restarted = cases.make_agent(conf, agent.driver)
    done = resizes(restarted)
    [result] = restarted._carry_out('d', actions)
    assert result['state'] == 'applied'
    assert done == [(actions[0]['instance_uuid'], 32 * MIB)]
    assert restarted.journal.get('action-0')['result'] == result


def test_a_redelivery_during_the_apply_waits_for_it(agent):
    actions = cases.actions(agent, 32, 48)
    done = resizes(agent)
    slow = agent.driver.apply_memory_target
    started = threading.Event()

    def resize(*args):
        started.set()
        time.sleep(0.2)
        return slow(*args)
    agent.driver.apply_memory_target = resize
    first = []
    thread = threading.Thread(target=lambda: first.append(
        agent._carry_out('d', actions)))
    thread.start()
    started.wait(5)
    again = agent._carry_out('d', actions)
    thread.join(5)
    assert len(done) == 2
    assert sorted(again, key=str) == sorted(first[0], key=str)


def test_the_simulated_host_keeps_its_vms_sizes_in_its_resize_log(
        conf, tmp_path):
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('resize_log', str(tmp_path / 'resizes'), 'simulated')
    hypervisor = driver.load('simulated', conf, 'compute-1')
    vm = hypervisor.list_instances()[1]
    hypervisor.apply_memory_target(vm.uuid, 512 * MIB, 'hotplug')
    # A restarted agent finds the VM as it left it, as on a real host.
    again = driver.load('simulated', conf, 'compute-1')
    assert [i.target_bytes for i in again.list_instances()] == [
        None, 512 * MIB]
    assert (tmp_path / 'resizes').read_text().count('\n') == 1
