"""Migration and allocation-ratio decisions: two hosts locked, moved VMs,
ratios recorded, and rolling either back."""

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


@pytest.fixture
def other(ctx):
    return db_api.register_host(ctx, 'host-2', 64 * flow.GIB, 0,
                                60.0)['uuid']


def migrate(ctx, destination, mode='recommend', instance=stored.VM_1):
    return decisions_db.create_migration(
        ctx, instance, destination, 'migration', mode, {'hot': True},
        {'moves': []})


def answer(ctx, decision, state='applied'):
    fresh = decisions_db.get_decision(ctx, decision['uuid'])
    open_actions = [a for a in fresh['actions']
                    if a['state'] in ('pending', 'sent')]
    return action_delivery.record_results(ctx, decision['uuid'], [
        {'uuid': a['uuid'], 'state': state, 'error': None, 'result': None}
        for a in open_actions])


def host_of(ctx, instance):
    return db_api.get_instance(ctx, instance)['host_uuid']


def test_a_migration_concerns_both_hosts_and_moves_the_vm(ctx, host, other):
    decision = migrate(ctx, other, mode='auto')
    assert (decision['kind'], decision['state']) == ('migration', 'approved')
    assert (decision['host_uuid'], decision['peer_host_uuid']) == (host,
                                                                   other)
    [action] = decision['actions']
    assert (action['kind'], action['source_host'],
            action['destination_host']) == ('migrate', 'compute-1', 'host-2')
    # Both hosts are busy: nothing else is decided for either meanwhile.
    assert decisions_db.host_busy(ctx, host)
    assert decisions_db.host_busy(ctx, other)
    with pytest.raises(exception.HostBusy):
        decisions_db.create_ratio_decision(ctx, other, 1.5, 'overcommit',
                                           'auto', {}, {})
    [batch] = action_delivery.actions_to_send(ctx)
    assert (batch['kind'], batch['host']) == ('migration', 'compute-1')
    assert batch['actions'][0]['destination_host_uuid'] == other
    assert answer(ctx, decision)['state'] == 'applied'
    assert host_of(ctx, stored.VM_1) == other
    assert not decisions_db.host_busy(ctx, other)


def test_a_failed_migration_leaves_the_vm_where_it_was(ctx, host, other):
    decision = migrate(ctx, other, mode='auto')
    assert answer(ctx, decision, 'failed')['state'] == 'failed'
    assert host_of(ctx, stored.VM_1) == host


def test_no_migration_to_where_the_vm_is_or_of_a_vm_gone(ctx, host, other):
    assert migrate(ctx, host) is None
    assert migrate(ctx, other,
                   instance='99999999-0000-4000-8000-000000000099') is None
    with pytest.raises(exception.HostNotFound):
        migrate(ctx, '99999999-0000-4000-8000-000000000098')


def test_a_newer_migration_of_the_vm_supersedes_the_waiting_one(ctx, host,
                                                                other):
    first = migrate(ctx, other)
    # The same migration again is not recorded: the waiting one stays.
    assert migrate(ctx, other) is None
    elsewhere = db_api.register_host(ctx, 'host-3', 64 * flow.GIB, 0,
                                     60.0)['uuid']
    second = migrate(ctx, elsewhere)
    assert decisions_db.get_decision(ctx, first['uuid'])['state'] == (
        'superseded')
    # Another VM's waiting migration stays.
    third = migrate(ctx, other, instance=stored.VM_2)
    assert decisions_db.get_decision(ctx, second['uuid'])['state'] == (
        'recommended')
    assert third['state'] == 'recommended'


def test_rolling_back_a_migration_moves_the_vm_back(ctx, host, other):
    decision = migrate(ctx, other, mode='auto')
    answer(ctx, decision)
    rolling = transitions.request_transition(flow.operator(),
                                             decision['uuid'], 'rollback')
    assert rolling['state'] == 'rolling_back'
    restore = [a for a in rolling['actions'] if a['kind'] == 'restore'][0]
    assert (restore['source_host'], restore['destination_host']) == (
        'host-2', 'compute-1')
    [batch] = action_delivery.actions_to_send(ctx)
    assert batch['actions'][0]['kind'] == 'restore'
    assert answer(ctx, decision)['state'] == 'rolled_back'
    assert host_of(ctx, stored.VM_1) == host


def test_a_memory_decision_on_the_destination_supersedes_rollback(
        ctx, host, other):
    decision = migrate(ctx, other, mode='auto')
    answer(ctx, decision)
    newer = flow.decide(ctx, host, mode='auto')
    flow.apply_all(ctx, newer)
    with pytest.raises(exception.DecisionSuperseded):
        transitions.request_transition(flow.operator(), decision['uuid'],
                                       'rollback')


def test_a_ratio_decision_sets_and_restores_the_hosts_ratio(ctx, host):
    decision = decisions_db.create_ratio_decision(
        ctx, host, 1.5, 'overcommit', 'auto', {'demand': 1}, {'ratio': 1.5})
    [action] = decision['actions']
    assert (action['kind'], action['allocation_ratio'],
            action['previous_ratio'], action['instance_uuid']) == (
        'set_allocation_ratio', 1.5, None, None)
    answer(ctx, decision)
    assert db_api.get_host(ctx, host)['allocation_ratio'] == 1.5
    # The same ratio again is no decision.
    assert decisions_db.create_ratio_decision(
        ctx, host, 1.5, 'overcommit', 'auto', {}, {}) is None
    lower = decisions_db.create_ratio_decision(
        ctx, host, 1.2, 'overcommit', 'auto', {}, {})
    answer(ctx, lower)
    rolling = transitions.request_transition(flow.operator(),
                                             lower['uuid'], 'rollback')
    restore = [a for a in rolling['actions'] if a['kind'] == 'restore'][0]
    assert (restore['allocation_ratio'], restore['previous_ratio']) == (
        1.5, 1.2)
    answer(ctx, lower)
    assert db_api.get_host(ctx, host)['allocation_ratio'] == 1.5


def test_rolling_back_the_first_ratio_leaves_placement_as_it_is(ctx, host):
    decision = decisions_db.create_ratio_decision(
        ctx, host, 1.5, 'overcommit', 'auto', {}, {})
    answer(ctx, decision)
    rolled = transitions.request_transition(flow.operator(),
                                            decision['uuid'], 'rollback')
    assert rolled['state'] == 'rolled_back'
