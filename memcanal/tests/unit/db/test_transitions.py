"""memcanal.db.transitions on SQLite: approving, rejecting and rolling
back a decision."""

import pytest

from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal import exception
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions as flow

ctx = flow.ctx
host = flow.host
MIB = flow.MIB
GIB = flow.GIB
decide = flow.decide
operator = flow.operator
results = flow.results
apply_all = flow.apply_all


def test_reject_and_state_conflicts(ctx, host):
    decision = decide(ctx, host)
    with pytest.raises(exception.DecisionStateConflict):
        transitions.request_transition(operator(), decision['uuid'],
                                       'rollback')
    rejected = transitions.request_transition(operator(), decision['uuid'],
                                              'reject')
    assert rejected['state'] == 'rejected'
    for request in ('approve', 'reject', 'rollback'):
        with pytest.raises(exception.DecisionStateConflict):
            transitions.request_transition(operator(), decision['uuid'],
                                           request)
    with pytest.raises(exception.DecisionNotFound):
        transitions.request_transition(operator(), stored.VM_1, 'approve')


def test_rollback_restores_only_what_was_applied(ctx, host):
    decision = decide(ctx, host, mode='auto')
    action_delivery.record_results(ctx, decision['uuid'], results(
        decision, 'applied', 'failed'))
    rolling = transitions.request_transition(operator(), decision['uuid'],
                                             'rollback')
    assert rolling['state'] == 'rolling_back'
    [restore] = [a for a in rolling['actions'] if a['kind'] == 'restore']
    # The VMs had their 8 GiB before the decision.
    assert (restore['instance_uuid'], restore['target_bytes'],
            restore['previous_bytes']) == (stored.VM_1, 8 * GIB, 512 * MIB)
    [batch] = action_delivery.actions_to_send(ctx)
    assert [a['uuid'] for a in batch['actions']] == [restore['uuid']]
    done = action_delivery.record_results(ctx, decision['uuid'], [{
        'uuid': restore['uuid'], 'state': 'applied', 'error': None,
        'result': None}])
    assert done['state'] == 'rolled_back'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] == (
        8 * GIB)
    assert [e['to_state'] for e in done['events']] == [
        'recommended', 'approved', 'failed', 'rolling_back', 'rolled_back']


def test_rollback_of_nothing_applied_ends_at_once(ctx, host):
    decision = decide(ctx, host, mode='auto')
    action_delivery.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'skipped'))
    done = transitions.request_transition(operator(), decision['uuid'],
                                          'rollback')
    assert done['state'] == 'rolled_back'


def test_rolling_back_a_superseded_decision_names_the_newer(ctx, host):
    first = apply_all(ctx, decide(ctx, host, mode='auto'))
    second = apply_all(ctx, decide(ctx, host, mode='auto',
                                   targets=(480, 1056)))
    with pytest.raises(exception.DecisionSuperseded) as superseded:
        transitions.request_transition(operator(), first['uuid'],
                                       'rollback')
    assert superseded.value.kwargs['newer'] == second['uuid']
    assert decisions_db.get_decision(ctx, first['uuid'])['state'] == (
        'applied')
    # Newest first: the second goes back to the first's sizes, in one
    # step no larger than the second's own; then the first may go.
    rolling = transitions.request_transition(operator(), second['uuid'],
                                             'rollback')
    restores = [a for a in rolling['actions'] if a['kind'] == 'restore']
    assert [(a['previous_bytes'], a['target_bytes']) for a in restores] == [
        (480 * MIB, 512 * MIB), (1056 * MIB, 1024 * MIB)]
    action_delivery.record_results(ctx, second['uuid'], [
        {'uuid': a['uuid'], 'state': 'applied', 'error': None,
         'result': None} for a in restores])
    assert transitions.request_transition(
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
    rolling = transitions.request_transition(operator(), first['uuid'],
                                             'rollback')
    assert rolling['state'] == 'rolling_back'


def test_a_rollback_never_goes_below_the_vms_floor(ctx, host):
    decision = apply_all(ctx, decide(ctx, host, mode='auto',
                                     targets=(9216, 6144)))
    db_api.update_instance_settings(ctx, stored.VM_1,
                                    {'floor_bytes': 8704 * MIB})
    rolling = transitions.request_transition(operator(), decision['uuid'],
                                             'rollback')
    restores = {a['instance_uuid']: a['target_bytes']
                for a in rolling['actions'] if a['kind'] == 'restore'}
    # VM_1 grew from 8 GiB to 9; its working set (2 MiB PRL) plus the
    # kernel is far below 8 GiB, but its operator floor of 8.5 GiB holds.
    assert restores == {stored.VM_1: 8704 * MIB, stored.VM_2: 8 * GIB}
