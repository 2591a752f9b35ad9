"""Migrations and allocation ratios from plan to executor: the planners
record decisions, the dispatcher sends each action to what carries it
out (agent, nova, placement) and records the outcome."""

from unittest import mock


from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal.policy import guardrails
from memcanal.service import actions
from memcanal.service import migrations
from memcanal.service import nova_migration
from memcanal.service import overcommit
from memcanal.service import placement
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_cross_host_decisions as cross
from memcanal.tests.unit.db.test_decisions import ctx  # noqa: F401
from memcanal.tests.unit.db.test_decisions import host  # noqa: F401

other = cross.other
MIB = 2 ** 20
GIB = 2 ** 30


def dispatcher(conf, executor='nova', **kwargs):
    conf.set_override('executor', executor, 'migration')
    sender = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY,
                                      **kwargs)
    sender._agent_api = mock.Mock()
    return sender


def state(ctx, decision):
    return decisions_db.get_decision(ctx, decision['uuid'])['state']


def test_nova_migrates_and_the_dispatcher_follows_it(conf, ctx, host, other):
    migrator = mock.Mock()
    migrator.poll.return_value = (nova_migration.IN_PROGRESS, None)
    sender = dispatcher(conf, migrator=migrator)
    decision = cross.migrate(ctx, other, mode='auto')
    assert sender.send(ctx) == 1
    migrator.start.assert_called_once_with(stored.VM_1, 'host-2')
    sender._agent_api.apply_decision.assert_not_called()
    assert state(ctx, decision) == 'approved'
    # Still migrating: sent, not sent again.
    sender.send(ctx)
    migrator.start.assert_called_once()
    migrator.poll.return_value = (nova_migration.APPLIED, None)
    sender.send(ctx)
    assert state(ctx, decision) == 'applied'
    assert cross.host_of(ctx, stored.VM_1) == other


def test_a_migration_nova_refuses_fails(conf, ctx, host, other):
    migrator = mock.Mock()
    migrator.start.side_effect = RuntimeError('No valid host')
    sender = dispatcher(conf, migrator=migrator)
    decision = cross.migrate(ctx, other, mode='auto')
    sender.send(ctx)
    failed = decisions_db.get_decision(ctx, decision['uuid'])
    assert failed['state'] == 'failed'
    assert 'No valid host' in failed['actions'][0]['error']
    assert cross.host_of(ctx, stored.VM_1) == host


def test_simulated_hosts_get_the_migration_from_the_agent_the_vm_is_on(
        conf, ctx, host, other):
    sender = dispatcher(conf, executor='agent')
    decision = cross.migrate(ctx, other, mode='auto')
    sender.send(ctx)
    name, uuid, sent = sender._agent_api.apply_decision.call_args.args[1:]
    assert (name, uuid) == ('compute-1', decision['uuid'])
    assert sent[0]['destination_host'] == 'host-2'
    cross.answer(ctx, decision)
    transitions.request_transition(cross.flow.operator(), decision['uuid'],
                                   'rollback')
    sender.send(ctx)
    # Back from where the VM is now.
    name, _uuid, sent = sender._agent_api.apply_decision.call_args.args[1:]
    assert (name, sent[0]['destination_host']) == ('host-2', 'compute-1')


def test_ratios_are_set_in_placement_at_once(conf, ctx, host):
    updater = mock.Mock()
    updater.apply.return_value = {'changed': True}
    sender = dispatcher(conf, updater=updater)
    decision = decisions_db.create_ratio_decision(ctx, host, 1.3, 'overcommit',
                                                  'auto', {}, {})
    sender.send(ctx)
    updater.apply.assert_called_once_with('compute-1', 1.3)
    assert state(ctx, decision) == 'applied'
    assert db_api.get_host(ctx, host)['allocation_ratio'] == 1.3
    updater.apply.side_effect = placement.ConcurrentUpdate(
        method='PUT', url='/x', reason=None, uuid='u', attempts=5,
        resource_class='MEMORY_MB')
    lower = decisions_db.create_ratio_decision(ctx, host, 1.2, 'overcommit',
                                               'auto', {}, {})
    sender.send(ctx)
    assert state(ctx, lower) == 'failed'
    assert db_api.get_host(ctx, host)['allocation_ratio'] == 1.3


def test_a_nova_migration_fails_after_the_migration_timeout(conf, ctx, host,
                                                            other):
    migrator = mock.Mock()
    migrator.poll.return_value = (nova_migration.IN_PROGRESS, None)
    sender = dispatcher(conf, migrator=migrator)
    decision = cross.migrate(ctx, other, mode='auto')
    sender.send(ctx)
    conf.set_override('action_timeout', 1, 'optimizer')
    conf.set_override('migration_timeout', 3600, 'migration')
    later = db_api.timeutils.utcnow() + db_api.datetime.timedelta(seconds=60)
    with mock.patch.object(actions.timeutils, 'utcnow', return_value=later):
        assert sender.fail_unanswered(ctx) == []
    much_later = later + db_api.datetime.timedelta(seconds=3600)
    with mock.patch.object(actions.timeutils, 'utcnow',
                           return_value=much_later):
        assert sender.fail_unanswered(ctx) == [decision['uuid']]


def hot_cloud(ctx, host, other):
    """host (compute-1: 64 GiB less 1 GiB reserved) holding more than 90 %
    of its capacity in measured demand, ``other`` nearly empty."""
    big = [dict(stored.sample(uuid, 2), allocated_bytes=32 * GIB,
                wss={'prl': 30 * GIB}) for uuid in (stored.VM_1,
                                                    stored.VM_2)]
    db_api.store_report(ctx, stored.report(host, 2, *big))
    db_api.register_host(ctx, 'host-2', 64 * GIB, 0, 60.0)


def test_the_planner_waits_the_hold_time_then_records_a_migration(
        conf, ctx, host, other):
    hot_cloud(ctx, host, other)
    conf.set_override('enabled', True, 'migration')
    conf.set_override('hold_seconds', 100, 'migration')
    conf.set_override('mode', 'auto', 'optimizer')
    now = [1000.0]
    planner = migrations.MigrationPlanner(conf, guardrails.Rails(),
                                          clock=lambda: now[0])
    assert planner.run(ctx) == []
    now[0] += 101
    [decision] = planner.run(ctx)
    assert (decision['kind'], decision['state']) == ('migration', 'approved')
    assert decision['peer_host_uuid'] == other
    assert decision['outputs']['move']['source'] == 'compute-1'
    # Both hosts busy: the next run plans nothing new.
    assert planner.run(ctx) == []


def test_the_planner_does_nothing_unless_enabled(conf, ctx, host, other):
    hot_cloud(ctx, host, other)
    conf.set_override('hold_seconds', 0, 'migration')
    assert migrations.MigrationPlanner(conf, guardrails.Rails()).run(
        ctx) == []


def test_ratio_planner_records_what_placement_should_hold(conf, ctx, host):
    conf.set_override('enabled', True, 'placement')
    updater = mock.Mock()
    updater.proposal.return_value = mock.Mock(ratio=1.4, **{
        'as_json.return_value': {'ratio': 1.4}})
    planner = overcommit.RatioPlanner(conf, guardrails.Rails(), updater)
    [decision] = planner.run(ctx)
    assert (decision['kind'], decision['policy'], decision['state']) == (
        'allocation_ratio', 'overcommit', 'recommended')
    name, guests = updater.proposal.call_args.args
    assert name == 'compute-1' and len(guests) == 2
    updater.proposal.side_effect = placement.ProviderNotFound(name='x')
    assert planner.run(ctx) == []


def test_ratio_planner_off_by_default(conf, ctx, host):
    updater = mock.Mock()
    assert overcommit.RatioPlanner(conf, guardrails.Rails(),
                                   updater).run(ctx) == []
    updater.proposal.assert_not_called()


def test_the_planner_keeps_a_vm_away_from_its_anti_affinity_group(
        conf, ctx, host, other):
    hot_cloud(ctx, host, other)
    neighbour = '30000000-0000-4000-8000-000000000003'
    # A small VM whose misses end at its working set.
    db_api.store_report(ctx, stored.report(other, 1, dict(
        stored.sample(neighbour, 1), mrc={'exact': [[4096, 1.0],
                                                    [2 * MIB, 0.0]]})))
    conf.set_override('enabled', True, 'migration')
    conf.set_override('hold_seconds', 0, 'migration')
    groups = {'g': ('anti-affinity', (stored.VM_1, stored.VM_2, neighbour))}
    planner = migrations.MigrationPlanner(conf, guardrails.Rails(),
                                          server_groups=lambda: groups)
    # host-2, the only other host, holds a member of both VMs' group.
    assert planner.run(ctx) == []
    groups['g'] = ('anti-affinity', (stored.VM_1, stored.VM_2))
    assert len(planner.run(ctx)) == 1


def test_the_planner_sends_no_vm_where_placement_would_refuse_it(
        conf, ctx, host, other):
    """``other`` (host-2) at the allocation ratio memcanal set in
    placement, 0.4 of 64 GiB (25.6 GiB), cannot take a 32 GiB flavor
    whatever its measured room: the migration the planner makes without
    that ratio (test_the_planner_waits_the_hold_time_then_records_a_
    migration) is not planned."""
    hot_cloud(ctx, host, other)
    updater = mock.Mock()
    updater.apply.return_value = {'changed': True}
    decisions_db.create_ratio_decision(ctx, other, 0.4, 'overcommit',
                                       'auto', {}, {})
    dispatcher(conf, updater=updater).send(ctx)
    assert db_api.get_host(ctx, other)['allocation_ratio'] == 0.4
    conf.set_override('enabled', True, 'migration')
    conf.set_override('hold_seconds', 0, 'migration')
    conf.set_override('mode', 'auto', 'optimizer')
    planner = migrations.MigrationPlanner(conf, guardrails.Rails())
    assert planner.run(ctx) == []
