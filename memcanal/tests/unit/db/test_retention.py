"""memcanal.db.retention on in-memory SQLite: folding reports into the
history, archiving and purging."""

import datetime
from unittest import mock

from oslo_utils import timeutils
from oslo_utils import uuidutils
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.db import retention
from memcanal import exception
from memcanal.estimation import packed_curve
from memcanal.rpc import reports

GIB = 2 ** 30
MIB = 2 ** 20
VM_1 = '10000000-0000-4000-8000-000000000001'
VM_2 = '20000000-0000-4000-8000-000000000002'
# Reports start at T0 (a period boundary for any interval dividing a day).
T0 = datetime.datetime(2026, 11, 1)
NOW = datetime.datetime(2026, 11, 20)


@pytest.fixture
def ctx(database):
    # The service's clock; tests move it with utcnow.return_value.
    with mock.patch.object(timeutils, 'utcnow', return_value=NOW):
        yield memcanal_context.get_admin_context()


def sample(uuid, minute, **extra):
    """VM ``uuid``'s sample at ``minute`` after T0: its WSS and use grow
    with the minute, so sums are easy to check."""
    return dict({
        'uuid': uuid, 'project_id': 'p1', 'allocated_bytes': 8 * GIB,
        'wss': {'prl': (100 + minute) * MIB, 'pml': 50 * MIB},
        'mrc': {'shards': [[MIB, 1.0], [(100 + minute) * MIB, 0.0]]},
        'guest_stats': {'used_bytes': float(minute), 'memory_bytes': 8.0}},
        **extra)


def store(ctx, host, minute, *uuids):
    """Report number ``minute + 1`` of ``host``, collected ``minute``
    minutes after T0, of ``uuids`` (default VM_1)."""
    moment = T0 + datetime.timedelta(minutes=minute)
    assert db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': minute + 1,
        'collected_at': moment.isoformat() + 'Z',
        'instances': [sample(uuid, minute) for uuid in uuids or [VM_1]],
    }, max_mrc_points=256, max_instances=10))


def register(ctx, name='compute-1'):
    return db_api.register_host(ctx, name, 64 * GIB, GIB)['uuid']


def count(ctx, table):
    with db_api.context_manager.reader.using(ctx):
        return ctx.session.execute(
            sa.select(sa.func.count()).select_from(table)).scalar_one()


def rows(ctx, table):
    with db_api.context_manager.reader.using(ctx):
        return [dict(row._mapping) for row in ctx.session.execute(
            sa.select(table).order_by(table.c.id))]


TABLES = models.Base.metadata.tables


def test_old_reports_fold_into_hourly_history_and_leave(ctx):
    host = register(ctx)
    for minute in range(150):    # 02:30 of reports, every minute
        store(ctx, host, minute, VM_1, VM_2)
    before = T0 + datetime.timedelta(hours=2)
    counts = retention.fold_reports(ctx, before, 3600, batch_size=1000)
    assert counts == {'instance_reports': 240, 'host_reports': 120,
                      'history_created': 4}
    history = retention.list_history(ctx, VM_1)
    assert [h['period_start'] for h in history] == [
        T0 + datetime.timedelta(hours=1), T0]
    first = history[1]
    assert first['report_count'] == 60
    assert (first['first_collected_at'], first['last_collected_at']) == (
        T0, T0 + datetime.timedelta(minutes=59))
    assert first['wss']['prl'] == {'count': 60, 'min': 100 * MIB,
                                   'mean': 129.5 * MIB, 'max': 159 * MIB}
    assert first['wss']['pml']['mean'] == 50 * MIB
    assert first['guest_stats']['used_bytes'] == {
        'count': 60, 'min': 0.0, 'mean': 29.5, 'max': 59.0}
    assert first['allocated_bytes']['max'] == 8 * GIB
    # The curves of the period's last report.
    assert first['mrc'] == sample(VM_1, 59)['mrc']
    # What is younger stays whole, and so do its host reports.
    assert count(ctx, TABLES['instance_reports']) == 60
    # Each with its estimates and curves, held in its own row.
    assert {(len(r['wss']), len(r['mrc']))
            for r in db_api.list_instance_reports(ctx, VM_1)} == {(2, 1)}
    assert count(ctx, TABLES['host_reports']) == 30
    assert [r['sequence'] for r in db_api.list_instance_reports(
        ctx, VM_1)][-1] == 121


def test_a_packed_curve_folds_into_history_and_reads_back_as_points(ctx):
    host = register(ctx)
    points = sample(VM_1, 0)['mrc']['shards']
    assert db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': 1,
        'collected_at': T0.isoformat() + 'Z',
        'instances': [sample(VM_1, 0, mrc={
            'shards': packed_curve.pack(points)})],
    }, max_mrc_points=256, max_instances=10))
    store(ctx, host, 90)  # the latest report stays; the first folds
    retention.fold_reports(ctx, T0 + datetime.timedelta(hours=1), 3600,
                           batch_size=1000)
    period, = retention.list_history(ctx, VM_1)
    assert period['mrc'] == {'shards': points}


def test_folding_in_small_batches_merges_to_whole_periods(ctx):
    host = register(ctx)
    for minute in range(91):
        store(ctx, host, minute, VM_1, VM_2)
    # Batches of 7 reports cut every 15-minute period somewhere.
    retention.fold_reports(ctx, NOW, 900, batch_size=7)
    for vm in (VM_1, VM_2):
        history = retention.list_history(ctx, vm)[::-1]
        assert len(history) == 6
        for number, period in enumerate(history):
            first = 15 * number
            assert period['period_start'] == T0 + datetime.timedelta(
                minutes=first)
            assert period['report_count'] == 15
            assert period['wss']['prl'] == {
                'count': 15, 'min': (100 + first) * MIB,
                'mean': pytest.approx((107 + first) * MIB),
                'max': (114 + first) * MIB}
            assert period['mrc'] == sample(vm, first + 14)['mrc']


def test_a_late_report_merges_into_its_period(ctx):
    host = register(ctx)
    for minute in (0, 1, 2, 30):
        store(ctx, host, minute)
    retention.fold_reports(ctx, T0 + datetime.timedelta(minutes=20), 3600,
                           1000)
    # A report of minute 10 arrives late, and minute 45 and 50 come.
    for minute in (10, 45, 50):
        store(ctx, host, minute)
    retention.fold_reports(ctx, T0 + datetime.timedelta(minutes=60), 3600,
                           1000)
    [period] = retention.list_history(ctx, VM_1)
    assert period['report_count'] == 6        # all but the latest, 50
    assert period['wss']['prl']['mean'] == pytest.approx(
        (100 + (0 + 1 + 2 + 30 + 10 + 45) / 6) * MIB)
    assert period['last_collected_at'] == T0 + datetime.timedelta(
        minutes=45)
    assert period['mrc'] == sample(VM_1, 45)['mrc']


def test_the_latest_report_of_every_instance_is_kept(ctx):
    host = register(ctx)
    store(ctx, host, 0, VM_1, VM_2)
    store(ctx, host, 1, VM_1)
    retention.fold_reports(ctx, NOW, 3600, 1000)
    # VM_2's only report and VM_1's latest stay, with their host reports.
    assert db_api.get_instance(ctx, VM_1)['latest_report']['sequence'] == 2
    assert db_api.get_instance(ctx, VM_2)['latest_report']['sequence'] == 1
    assert count(ctx, TABLES['host_reports']) == 2
    assert retention.list_history(ctx, VM_1)[0]['report_count'] == 1
    assert retention.list_history(ctx, VM_2) == []


def test_host_reports_of_no_instance_go_too(ctx):
    host = register(ctx)
    assert db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': 1,
        'collected_at': '2026-11-01T00:00:00Z', 'instances': []},
        max_mrc_points=256, max_instances=10))
    assert retention.fold_reports(ctx, NOW, 3600, 1000) == {
        'host_reports': 1}
    assert db_api.register_host(ctx, 'compute-1', GIB, 0)[
        'last_sequence'] == 1


def test_a_batch_that_fails_changes_nothing(ctx):
    host = register(ctx)
    for minute in range(10):
        store(ctx, host, minute)
    with mock.patch.object(retention, '_delete_reports',
                           side_effect=RuntimeError('crash')):
        with pytest.raises(RuntimeError):
            retention.fold_reports(ctx, NOW, 3600, 4)
    assert retention.list_history(ctx, VM_1) == []
    assert count(ctx, TABLES['instance_reports']) == 10
    # The next run does it all.
    retention.fold_reports(ctx, NOW, 3600, 4)
    assert retention.list_history(ctx, VM_1)[0]['report_count'] == 9


def test_history_expires_by_period_and_lists_by_page(ctx):
    host = register(ctx)
    for minute in range(0, 301, 60):
        store(ctx, host, minute)
    retention.fold_reports(ctx, NOW, 3600, 1000)
    starts = [h['period_start'] for h in retention.list_history(ctx, VM_1)]
    assert len(starts) == 5
    page = retention.list_history(ctx, VM_1, limit=2, marker=starts[1],
                                  with_curves=False)
    assert [h['period_start'] for h in page] == starts[2:4]
    assert 'mrc' not in page[0]
    assert [h['period_start'] for h in retention.list_history(
        ctx, VM_1, since=starts[3], until=starts[1])] == starts[2:4]
    assert retention.expire_history(ctx, starts[2], batch_size=1) == 2
    assert [h['period_start'] for h in retention.list_history(
        ctx, VM_1)] == starts[:3]


def add_decision(ctx, host_uuid, state, changed_at, instances=(),
                 events=2):
    """A decision of ``host_uuid`` last changed at ``changed_at``, with a
    set_target action per instance uuid and ``events`` events."""
    with db_api.context_manager.writer.using(ctx):
        session = ctx.session
        host_id = session.execute(sa.select(models.Host.id).where(
            models.Host.uuid == host_uuid)).scalar_one()
        decision = models.Decision(
            uuid=uuidutils.generate_uuid(), host_id=host_id,
            kind='memory_targets', policy='isolated_sharing',
            mode='recommend', state=state,
            inputs={'instances': {VM_1: {'mrc': [[MIB, 1.0]]}}},
            outputs={'instances': {}}, created_at=changed_at,
            updated_at=changed_at)
        session.add(decision)
        session.flush()
        for uuid in instances:
            session.add(models.Action(
                uuid=uuidutils.generate_uuid(), decision_id=decision.id,
                host_id=host_id, instance_id=session.execute(
                    sa.select(models.Instance.id).where(
                        models.Instance.uuid == uuid)).scalar_one(),
                kind='set_target', state='applied',
                params={'target_bytes': GIB, 'previous_bytes': 2 * GIB,
                        'mechanism': 'balloon'}))
        for number in range(events):
            session.add(models.DecisionEvent(
                decision_id=decision.id, to_state=state,
                reason='event %d' % number, created_at=changed_at))
        return decision.uuid


def states(ctx, table):
    return sorted(row['state'] for row in rows(ctx, table))


OLD = NOW - datetime.timedelta(days=100)


def test_archive_moves_finished_decisions_but_what_may_still_act(ctx):
    host = register(ctx)
    other = register(ctx, 'compute-2')
    store(ctx, host, 0)
    for state in ('applied', 'applied', 'failed', 'failed', 'rejected',
                  'superseded', 'rolled_back', 'rollback_failed',
                  'recommended', 'approved', 'rolling_back'):
        add_decision(ctx, host, state, OLD, [VM_1])
    add_decision(ctx, other, 'applied', OLD)
    add_decision(ctx, host, 'superseded', NOW)     # too young
    production = rows(ctx, TABLES['decisions'])
    moved = retention.archive_until_complete(
        ctx, decisions_before=NOW - datetime.timedelta(days=90))
    assert moved == {'decisions': 6, 'actions': 6, 'decision_events': 12}
    # Waiting, in flight, young, and the newest applied and failed of
    # each host stay.
    assert states(ctx, TABLES['decisions']) == [
        'applied', 'applied', 'approved', 'failed', 'recommended',
        'rolling_back', 'superseded']
    kept = {d['id'] for d in rows(ctx, TABLES['decisions'])}
    assert max(d['id'] for d in production if d['state'] == 'applied'
               and d['host_id'] == 1) in kept
    # The shadow rows are the production rows.
    shadow = rows(ctx, models.SHADOW_TABLES['decisions'])
    assert shadow == [d for d in production if d['id'] not in kept]
    assert {a['decision_id'] for a in rows(
        ctx, models.SHADOW_TABLES['actions'])} == {d['id'] for d in shadow}
    assert count(ctx, TABLES['actions']) == 5
    # Nothing left: a second run moves nothing.
    assert retention.archive(ctx, NOW, None) == {}


def test_superseded_decisions_may_go_sooner(ctx):
    host = register(ctx)
    ten_days_ago = NOW - datetime.timedelta(days=10)
    for state in ('superseded', 'rejected', 'superseded'):
        add_decision(ctx, host, state, ten_days_ago)
    add_decision(ctx, host, 'superseded', NOW)
    assert retention.archive(
        ctx, decisions_before=NOW - datetime.timedelta(days=90),
        superseded_before=NOW - datetime.timedelta(days=7)) == {
            'decisions': 2, 'decision_events': 4}
    assert states(ctx, TABLES['decisions']) == ['rejected', 'superseded']


def test_archive_batches_stay_under_max_rows_but_move_whole_decisions(ctx):
    host = register(ctx)
    store(ctx, host, 0)
    for _ in range(4):
        add_decision(ctx, host, 'superseded', OLD, [VM_1], events=2)
    # Four rows a decision: two fit in 9, and one alone exceeds 3.
    assert retention.archive(ctx, NOW, None, max_rows=9) == {
        'decisions': 2, 'actions': 2, 'decision_events': 4}
    assert retention.archive(ctx, NOW, None, max_rows=3) == {
        'decisions': 1, 'actions': 1, 'decision_events': 2}
    assert retention.archive_until_complete(ctx, NOW, None, max_rows=1) == {
        'decisions': 1, 'actions': 1, 'decision_events': 2}


def mark_deleted(ctx, uuid, when):
    with db_api.context_manager.writer.using(ctx):
        ctx.session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == uuid).values(deleted_at=when))


def test_archive_folds_then_moves_deleted_instances(ctx):
    host = register(ctx)
    for minute in range(3):
        store(ctx, host, minute, VM_1, VM_2)
    mark_deleted(ctx, VM_2, OLD)
    production = {i['uuid']: i for i in rows(ctx, TABLES['instances'])}
    moved = retention.archive_until_complete(
        ctx, instances_before=NOW - datetime.timedelta(days=30))
    assert moved == {retention.FOLDED: 3, 'instances': 1}
    assert rows(ctx, models.SHADOW_TABLES['instances']) == [
        production[VM_2]]
    assert [i['uuid'] for i in rows(ctx, TABLES['instances'])] == [VM_1]
    # Its reports live on in the history, by uuid.
    assert retention.list_history(ctx, VM_2)[0]['report_count'] == 3
    assert count(ctx, TABLES['instance_reports']) == 3


def test_an_instance_a_kept_decision_names_is_not_archived(ctx):
    host = register(ctx)
    store(ctx, host, 0, VM_1, VM_2)
    add_decision(ctx, host, 'applied', OLD, [VM_2])
    mark_deleted(ctx, VM_2, OLD)
    assert retention.archive_until_complete(ctx, NOW, NOW) == {}
    assert count(ctx, TABLES['instances']) == 2
    # Once a newer applied decision lets the old one go, it goes too.
    add_decision(ctx, host, 'applied', OLD, [VM_1])
    moved = retention.archive_until_complete(ctx, NOW, NOW)
    assert moved['instances'] == 1 and moved['decisions'] == 1


def test_purge_before_a_date_or_all(ctx):
    host = register(ctx)
    store(ctx, host, 0, VM_1, VM_2)
    store(ctx, host, 1, VM_1)
    add_decision(ctx, host, 'superseded', OLD, [VM_1])
    add_decision(ctx, host, 'rejected', OLD + datetime.timedelta(days=5))
    mark_deleted(ctx, VM_2, OLD)
    retention.archive_until_complete(ctx, NOW, NOW)
    assert retention.purge(ctx, OLD + datetime.timedelta(days=1)) == {
        'shadow_decisions': 1, 'shadow_actions': 1,
        'shadow_decision_events': 2, 'shadow_instances': 1}
    assert retention.purge(ctx, None, batch_size=1) == {
        'shadow_decisions': 1, 'shadow_decision_events': 2}
    for shadow in models.SHADOW_TABLES.values():
        assert count(ctx, shadow) == 0
    assert retention.purge(ctx, None) == {}


def test_run_does_what_the_options_say_and_zero_keeps(ctx, conf):
    host = register(ctx)
    for minute in range(3):
        store(ctx, host, minute, VM_1, VM_2)
    add_decision(ctx, host, 'superseded', OLD)
    mark_deleted(ctx, VM_2, OLD)
    for name in ('full_reports_days', 'history_days', 'decisions_days',
                 'superseded_decisions_days', 'deleted_instances_days'):
        conf.set_override(name, 0, 'retention')
    assert retention.run(ctx, conf.retention) == {}
    conf.clear_override('full_reports_days', 'retention')
    conf.clear_override('decisions_days', 'retention')
    assert retention.run(ctx, conf.retention) == {
        'instance_reports': 4, 'host_reports': 2, 'history_created': 2,
        'decisions': 1, 'decision_events': 2}
    conf.clear_override('history_days', 'retention')
    conf.clear_override('deleted_instances_days', 'retention')
    assert retention.run(ctx, conf.retention) == {
        retention.FOLDED: 1, 'instances': 1}
    timeutils.utcnow.return_value = NOW + datetime.timedelta(days=400)
    assert retention.run(ctx, conf.retention) == {
        'instance_report_history (expired)': 2}


def folded_sequence(ctx, host):
    with db_api.context_manager.reader.using(ctx):
        return ctx.session.execute(sa.select(models.Host.folded_sequence)
                                   .where(models.Host.uuid == host)
                                   ).scalar_one()


def test_folding_keeps_the_highest_sequence_it_deleted_so_no_replay(ctx):
    """Retention deletes host reports, the rows that told a report sent
    again from a new one: each host keeps the highest sequence it
    deleted, and a report at or below it not stored is refused
    (memcanal.db.replays)."""
    host = register(ctx)
    other = register(ctx, 'compute-2')
    for minute in range(4):
        store(ctx, host, minute)
    retention.fold_reports(ctx, T0 + datetime.timedelta(minutes=2), 3600,
                           batch_size=1)
    # Sequences 1 and 2 folded; 4 holds VM_1's latest, 3 is younger.
    assert (folded_sequence(ctx, host), folded_sequence(ctx, other)) == (
        2, 0)
    with pytest.raises(exception.InvalidReport) as refused:
        store(ctx, host, 1)
    assert refused.value.code == 'report.replayed'
    # Still stored: a duplicate, as before.
    assert db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': 3,
        'collected_at': T0.isoformat() + 'Z', 'instances': []},
        max_mrc_points=256, max_instances=10)) is False
