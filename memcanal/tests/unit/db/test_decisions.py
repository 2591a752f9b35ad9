"""memcanal.db.decisions on SQLite: recording decisions, and the helpers
the tests of a decision's life share (test_transitions,
test_action_delivery)."""

import pytest

from memcanal import context as memcanal_context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
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
    assert action_delivery.actions_to_send(ctx) == []
    assert not decisions_db.host_busy(ctx, host)


def test_auto_mode_approves_at_once(ctx, host):
    decision = decide(ctx, host, mode='auto')
    assert decision['state'] == 'approved'
    assert [e['to_state'] for e in decision['events']] == [
        'recommended', 'approved']
    assert decision['events'][-1]['user_id'] is None


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
        transitions.request_transition(operator(), decision['uuid'],
                                       'approve')
    return action_delivery.record_results(ctx, decision['uuid'], results(
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
    transitions.request_transition(operator(), other['uuid'], 'approve')
    with pytest.raises(exception.DecisionStateConflict):
        transitions.request_transition(operator(), recommended['uuid'],
                                       'approve')
