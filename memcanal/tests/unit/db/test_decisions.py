"""memcanal.db.decisions on SQLite: a decision's life and its history."""

import datetime

import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal import exception
from memcanal.tests.unit.db import test_api as stored

MIB = 2 ** 20
GIB = 2 ** 30


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


@pytest.fixture
def host(ctx):
    host = stored.register(ctx)
    db_api.store_report(ctx, stored.report(
        host, 1, stored.sample(stored.VM_1, 1),
        stored.sample(stored.VM_2, 1)))
    return host


def operator():
    return memcanal_context.RequestContext(
        user_id='alice', project_id='ops', roles=['admin'], is_admin=True)


def decide(ctx, host, mode='recommend', targets=(512, 1024)):
    changes = [{'instance_uuid': uuid, 'target_bytes': target * MIB,
                'previous_bytes': 768 * MIB, 'mechanism': 'balloon'}
               for uuid, target in zip((stored.VM_1, stored.VM_2), targets)]
    return decisions_db.create_decision(
        ctx, host, 'memory_targets', 'isolated_sharing', mode,
        {'free_bytes': 0}, {'instances': {}}, changes)


def results(decision, *states):
    return [{'uuid': action['uuid'], 'state': state,
             'error': None if state == 'applied' else 'no',
             'result': {'seconds': 0.1}}
            for action, state in zip(decision['actions'], states)]


def test_recommended_waits_with_an_action_per_vm(ctx, host):
    decision = decide(ctx, host)
    assert decision['state'] == 'recommended'
    assert [(a['instance_uuid'], a['target_bytes'], a['state'])
            for a in decision['actions']] == [
        (stored.VM_1, 512 * MIB, 'pending'),
        (stored.VM_2, 1024 * MIB, 'pending')]
    assert [e['to_state'] for e in decision['events']] == ['recommended']
    # Nothing goes to the agent before approval.
    assert decisions_db.actions_to_send(ctx) == []
    assert not decisions_db.host_busy(ctx, host)


def test_approve_records_who_then_results_apply(ctx, host):
    decision = decide(ctx, host)
    approved = decisions_db.request_transition(
        operator(), decision['uuid'], 'approve', reason='looks right')
    event = approved['events'][-1]
    assert (event['from_state'], event['to_state'], event['user_id'],
            event['project_id'], event['reason']) == (
        'recommended', 'approved', 'alice', 'ops', 'looks right')
    assert decisions_db.host_busy(ctx, host)
    [batch] = decisions_db.actions_to_send(ctx)
    assert batch['host'] == 'compute-1'
    assert [a['target_bytes'] for a in batch['actions']] == [
        512 * MIB, 1024 * MIB]
    decisions_db.mark_sent(ctx, [a['uuid'] for a in batch['actions']])
    assert decisions_db.actions_to_send(ctx) == []
    done = decisions_db.record_results(ctx, decision['uuid'],
                                       results(decision, 'applied',
                                               'applied'))
    assert done['state'] == 'applied'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] == (
        512 * MIB)
    assert db_api.get_instance(ctx, stored.VM_1)['target_changed_at']
    # A redelivered result changes nothing.
    again = decisions_db.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'failed'))
    assert again['state'] == 'applied'
    assert not decisions_db.host_busy(ctx, host)


def test_auto_mode_approves_at_once(ctx, host):
    decision = decide(ctx, host, mode='auto')
    assert decision['state'] == 'approved'
    assert [e['to_state'] for e in decision['events']] == [
        'recommended', 'approved']
    assert decision['events'][-1]['user_id'] is None


def test_a_failure_fails_the_decision_and_keeps_the_old_target(ctx, host):
    decision = decide(ctx, host, mode='auto')
    done = decisions_db.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'skipped'))
    assert done['state'] == 'failed'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] is None
    assert '2 of 2' in done['events'][-1]['reason']


def test_reject_and_state_conflicts(ctx, host):
    decision = decide(ctx, host)
    with pytest.raises(exception.DecisionStateConflict):
        decisions_db.request_transition(operator(), decision['uuid'],
                                        'rollback')
    rejected = decisions_db.request_transition(operator(), decision['uuid'],
                                               'reject')
    assert rejected['state'] == 'rejected'
    for request in ('approve', 'reject', 'rollback'):
        with pytest.raises(exception.DecisionStateConflict):
            decisions_db.request_transition(operator(), decision['uuid'],
                                            request)
    with pytest.raises(exception.DecisionNotFound):
        decisions_db.request_transition(operator(), stored.VM_1, 'approve')


def test_newer_decision_supersedes_waiting_one(ctx, host):
    first = decide(ctx, host)
    second = decide(ctx, host, targets=(640, 896))
    assert decisions_db.get_decision(ctx, first['uuid'])['state'] == (
        'superseded')
    assert [d['uuid'] for d in decisions_db.list_decisions(ctx)] == [
        second['uuid'], first['uuid']]
    assert [d['uuid'] for d in decisions_db.list_decisions(
        ctx, state='superseded')] == [first['uuid']]
    assert [d['uuid'] for d in decisions_db.list_decisions(
        ctx, limit=1, marker=second['uuid'])] == [first['uuid']]


def test_rollback_restores_only_what_was_applied(ctx, host):
    decision = decide(ctx, host, mode='auto')
    decisions_db.record_results(ctx, decision['uuid'], results(
        decision, 'applied', 'failed'))
    rolling = decisions_db.request_transition(operator(), decision['uuid'],
                                              'rollback')
    assert rolling['state'] == 'rolling_back'
    [restore] = [a for a in rolling['actions'] if a['kind'] == 'restore']
    # The VMs had their 8 GiB before the decision.
    assert (restore['instance_uuid'], restore['target_bytes'],
            restore['previous_bytes']) == (stored.VM_1, 8 * GIB, 512 * MIB)
    [batch] = decisions_db.actions_to_send(ctx)
    assert [a['uuid'] for a in batch['actions']] == [restore['uuid']]
    done = decisions_db.record_results(ctx, decision['uuid'], [{
        'uuid': restore['uuid'], 'state': 'applied', 'error': None,
        'result': None}])
    assert done['state'] == 'rolled_back'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] == (
        8 * GIB)
    assert [e['to_state'] for e in done['events']] == [
        'recommended', 'approved', 'failed', 'rolling_back', 'rolled_back']


def test_rollback_of_nothing_applied_ends_at_once(ctx, host):
    decision = decide(ctx, host, mode='auto')
    decisions_db.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'skipped'))
    done = decisions_db.request_transition(operator(), decision['uuid'],
                                           'rollback')
    assert done['state'] == 'rolled_back'


def test_unanswered_actions_fail(ctx, host):
    decision = decide(ctx, host, mode='auto')
    decisions_db.mark_sent(ctx, [a['uuid'] for a in decision['actions']])
    past = datetime.datetime(2000, 1, 1)
    assert decisions_db.fail_unanswered(ctx, past) == []
    future = datetime.datetime(2100, 1, 1)
    assert decisions_db.fail_unanswered(ctx, future) == [decision['uuid']]
    found = decisions_db.get_decision(ctx, decision['uuid'])
    assert found['state'] == 'failed'
    assert all(a['error'] for a in found['actions'])


def test_instance_settings(ctx, host):
    updated = db_api.update_instance_settings(
        ctx, stored.VM_1, {'opt_out': True, 'mechanism': 'hotplug'})
    assert (updated['opt_out'], updated['mechanism']) == (True, 'hotplug')
    with pytest.raises(exception.InstanceNotFound):
        db_api.update_instance_settings(ctx, stored.VM_1[::-1], {})
    [first, second] = db_api.host_policy_inputs(ctx, host)
    assert first['uuid'] == stored.VM_1 and first['opt_out']
    assert [r['sequence'] for r in first['reports']] == [1]


def apply_all(ctx, decision):
    """Approve (unless auto) and record every action applied."""
    if decision['state'] == 'recommended':
        decisions_db.request_transition(operator(), decision['uuid'],
                                        'approve')
    return decisions_db.record_results(ctx, decision['uuid'], results(
        decision, *['applied'] * len(decision['actions'])))


def test_previous_sizes_come_from_the_instances_not_the_caller(ctx, host):
    """The caller said 768 MiB; the VMs have their 8 GiB."""
    decision = decide(ctx, host)
    assert [a['previous_bytes'] for a in decision['actions']] == [
        8 * GIB, 8 * GIB]


def test_a_decision_identical_to_the_applied_state_is_not_recorded(ctx,
                                                                   host):
    apply_all(ctx, decide(ctx, host, mode='auto'))
    assert decide(ctx, host, mode='auto') is None
    # Only the VM that would change is in the next decision.
    again = decide(ctx, host, targets=(512, 2048))
    assert [(a['instance_uuid'], a['previous_bytes'], a['target_bytes'])
            for a in again['actions']] == [
        (stored.VM_2, 1024 * MIB, 2048 * MIB)]
    assert len(decisions_db.list_decisions(ctx)) == 2


def test_no_decision_is_made_or_approved_while_another_is_in_flight(ctx,
                                                                    host):
    waiting = decide(ctx, host)
    flying = decide(ctx, host, mode='auto', targets=(256, 1024))
    with pytest.raises(exception.HostBusy) as busy:
        decide(ctx, host, targets=(128, 1024))
    assert busy.value.kwargs['busy'] == flying['uuid']
    # The waiting one was superseded by the auto one; a new recommended
    # one made after the flight cannot be approved during another.
    assert decisions_db.get_decision(ctx, waiting['uuid'])['state'] == (
        'superseded')
    apply_all(ctx, flying)
    recommended = decide(ctx, host, targets=(128, 1024))
    other = decide(ctx, host, targets=(256, 2048))
    decisions_db.request_transition(operator(), other['uuid'], 'approve')
    with pytest.raises(exception.DecisionStateConflict):
        decisions_db.request_transition(operator(), recommended['uuid'],
                                        'approve')


def test_rolling_back_a_superseded_decision_names_the_newer(ctx, host):
    first = apply_all(ctx, decide(ctx, host, mode='auto'))
    second = apply_all(ctx, decide(ctx, host, mode='auto',
                                   targets=(480, 1056)))
    with pytest.raises(exception.DecisionSuperseded) as superseded:
        decisions_db.request_transition(operator(), first['uuid'],
                                        'rollback')
    assert superseded.value.kwargs['newer'] == second['uuid']
    assert decisions_db.get_decision(ctx, first['uuid'])['state'] == (
        'applied')
    # Newest first: the second goes back to the first's sizes, in one
    # step no larger than the second's own; then the first may go.
    rolling = decisions_db.request_transition(operator(), second['uuid'],
                                              'rollback')
    restores = [a for a in rolling['actions'] if a['kind'] == 'restore']
    assert [(a['previous_bytes'], a['target_bytes']) for a in restores] == [
        (480 * MIB, 512 * MIB), (1056 * MIB, 1024 * MIB)]
    decisions_db.record_results(ctx, second['uuid'], [
        {'uuid': a['uuid'], 'state': 'applied', 'error': None,
         'result': None} for a in restores])
    assert decisions_db.request_transition(
        operator(), first['uuid'], 'rollback')['state'] == 'rolling_back'


VM_3 = '30000000-0000-4000-8000-000000000003'


def test_another_hosts_newer_decision_does_not_supersede(ctx, host):
    first = apply_all(ctx, decide(ctx, host, mode='auto'))
    other_host = stored.register(ctx, name='compute-2')
    db_api.store_report(ctx, stored.report(
        other_host, 1, stored.sample(VM_3, 1)))
    other = decisions_db.create_decision(
        ctx, other_host, 'memory_targets', 'isolated_sharing', 'auto',
        {'free_bytes': 0}, {'instances': {}}, [{
            'instance_uuid': VM_3, 'target_bytes': 512 * MIB,
            'previous_bytes': 768 * MIB, 'mechanism': 'balloon'}])
    assert other['state'] == 'approved'
    rolling = decisions_db.request_transition(operator(), first['uuid'],
                                              'rollback')
    assert rolling['state'] == 'rolling_back'


def test_a_rollback_never_goes_below_the_vms_floor(ctx, host):
    decision = apply_all(ctx, decide(ctx, host, mode='auto',
                                     targets=(9216, 6144)))
    db_api.update_instance_settings(ctx, stored.VM_1,
                                    {'floor_bytes': 8704 * MIB})
    rolling = decisions_db.request_transition(operator(), decision['uuid'],
                                              'rollback')
    restores = {a['instance_uuid']: a['target_bytes']
                for a in rolling['actions'] if a['kind'] == 'restore'}
    # VM_1 grew from 8 GiB to 9; its working set (2 MiB PRL) plus the
    # kernel is far below 8 GiB, but its operator floor of 8.5 GiB holds.
    assert restores == {stored.VM_1: 8704 * MIB, stored.VM_2: 8 * GIB}
