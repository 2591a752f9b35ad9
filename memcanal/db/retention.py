"""The data lifecycle: reports folded into a downsampled history, finished
decisions and deleted instances archived, archives purged.

Agents report every VM every interval (about 6 MB per VM per day at 60 s)
and every decision embeds the curves of its host's VMs. This module keeps
the database bounded (``[retention]``, doc/retention.md):

- ``fold_reports``: instance reports older than ``full_reports_days`` are
  summed up per VM and ``history_interval`` into
  ``instance_report_history`` and deleted with their WSS estimates,
  curves and host reports; the latest report of every instance is kept
  however old (the policies and GET /instances/{uuid} read it). Each
  host keeps the highest sequence deleted (memcanal.db.replays), so a
  deleted report sent again is refused, not stored again.
  ``expire_history`` deletes history older than ``history_days``.
- ``archive``: as ``nova-manage db archive_deleted_rows`` does, moves
  finished decisions (with their actions and events) and deleted
  instances into ``shadow_*`` tables; ``purge`` deletes from them.

Every step works in batches, each batch one transaction that does all of
its work or none: a run stopped anywhere has lost nothing, and the next
run continues where it stopped. The rows a batch works on are locked
first (SELECT ... FOR UPDATE, in one order), so two runs at once (the
service's periodic job and an operator's memcanal-manage) wait for each
other instead of folding a report twice.
"""

import datetime

from oslo_db import exception as db_exc
from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.db import replays

# Decisions that are over: nothing of theirs is pending or being sent.
FINISHED = ('applied', 'failed', 'rejected', 'superseded', 'rolled_back',
            'rollback_failed')
# The newest decision of each host in each of these states is never
# archived: a rollback may still need it.
KEPT_NEWEST = ('applied', 'failed')
# Shadow tables of a decision's rows, children first.
DECISION_TABLES = ('decision_events', 'actions', 'decisions')
# The key under which archive() counts reports it folded (and deleted)
# before archiving their instance; they are not moved to a shadow table.
FOLDED = 'instance_reports (folded)'

_EPOCH = datetime.datetime(1970, 1, 1)
_REPORT = models.InstanceReport
_HISTORY = models.InstanceReportHistory


def _is_conflict(error):
    # Two runs creating the same history row: the loser's batch is
    # redone, and then merges into the winner's row.
    return (db_api._is_sqlite_busy(error)
            or isinstance(error, db_exc.DBDuplicateEntry))


retry_on_conflict = db_api.retry_when(_is_conflict)


def days_ago(days, now=None):
    """The moment ``days`` days before ``now``; None for 0 (forever)."""
    if not days:
        return None
    return (now or timeutils.utcnow()) - datetime.timedelta(days=days)


def period_start(moment, interval):
    """The start of the ``interval``-second period holding ``moment``,
    aligned on the epoch so every run cuts the same periods."""
    seconds = int((moment - _EPOCH).total_seconds())
    return _EPOCH + datetime.timedelta(seconds=seconds - seconds % interval)


def _summary(value):
    return {'count': 1, 'min': value, 'mean': float(value), 'max': value}


def _merge(first, second):
    """One {count, min, mean, max} of two, over disjoint values."""
    if first is None or second is None:
        return first or second
    count = first['count'] + second['count']
    return {'count': count,
            'min': min(first['min'], second['min']),
            'mean': (first['mean'] * first['count']
                     + second['mean'] * second['count']) / count,
            'max': max(first['max'], second['max'])}


def _merge_named(first, second):
    merged = dict(first)
    for name, summary in second.items():
        merged[name] = _merge(merged.get(name), summary)
    return merged


def merge_stats(first, second):
    """Two history ``stats`` (models.InstanceReportHistory) as one."""
    return {
        'allocated_bytes': _merge(first.get('allocated_bytes'),
                                  second.get('allocated_bytes')),
        'wss': _merge_named(first.get('wss', {}), second.get('wss', {})),
        'guest_stats': _merge_named(first.get('guest_stats', {}),
                                    second.get('guest_stats', {})),
    }


def _report_stats(allocated_bytes, wss, guest_stats):
    return {
        'allocated_bytes': _summary(allocated_bytes),
        'wss': {name: _summary(value) for name, value in wss.items()},
        'guest_stats': {name: _summary(value)
                        for name, value in guest_stats.items()},
    }


def _has_newer_report():
    newer = sa.orm.aliased(_REPORT)
    return sa.exists().where(newer.instance_id == _REPORT.instance_id,
                             newer.id > _REPORT.id)


def _group_reports(session, rows, interval):
    """The batch's reports by (instance uuid, period): their stats and
    first and last times, and the id of the last report."""
    uuids = dict(session.execute(
        sa.select(models.Instance.id, models.Instance.uuid).where(
            models.Instance.id.in_({row.instance_id for row in rows}))
    ).all())
    groups = {}
    for row in rows:
        key = (uuids[row.instance_id],
               period_start(row.collected_at, interval))
        stats = _report_stats(row.allocated_bytes, row.wss or {},
                              row.guest_stats or {})
        group = groups.get(key)
        if group is None:
            groups[key] = {'stats': stats, 'count': 1,
                           'first': row.collected_at,
                           'last': row.collected_at, 'last_id': row.id}
            continue
        group['stats'] = merge_stats(group['stats'], stats)
        group['count'] += 1
        group['first'] = min(group['first'], row.collected_at)
        if (row.collected_at, row.id) >= (group['last'], group['last_id']):
            group['last'], group['last_id'] = row.collected_at, row.id
    return groups


def _curves(session, report_ids):
    return dict(session.execute(
        sa.select(_REPORT.id, _REPORT.mrc).where(_REPORT.id.in_(report_ids))
    ).all())


def _write_history(session, groups, interval):
    """Merge the groups into their history rows, creating those missing;
    returns how many were created."""
    curves = _curves(session, [g['last_id'] for g in groups.values()])
    existing = {(row.instance_uuid, row.period_start): row
                for row in session.execute(
                    sa.select(_HISTORY).where(
                        _HISTORY.instance_uuid.in_(
                            {uuid for uuid, _ in groups}),
                        _HISTORY.period_start.in_(
                            {start for _, start in groups}))
                    .with_for_update()).scalars()}
    created = 0
    for (uuid, start), group in sorted(groups.items()):
        mrc = curves.get(group['last_id']) or None
        row = existing.get((uuid, start))
        if row is None:
            session.add(_HISTORY(
                instance_uuid=uuid, period_start=start,
                period_seconds=interval, report_count=group['count'],
                first_collected_at=group['first'],
                last_collected_at=group['last'], stats=group['stats'],
                mrc=mrc))
            created += 1
            continue
        row.stats = merge_stats(row.stats, group['stats'])
        row.report_count += group['count']
        row.period_seconds = max(row.period_seconds, interval)
        row.first_collected_at = min(row.first_collected_at, group['first'])
        if group['last'] >= row.last_collected_at:
            row.last_collected_at = group['last']
            row.mrc = mrc
    return created


def _delete_reports(session, rows):
    """Delete the reports and the host reports left describing nothing;
    returns the host reports deleted."""
    ids = [row.id for row in rows]
    session.execute(sa.delete(_REPORT).where(_REPORT.id.in_(ids)))
    emptied = sa.and_(
        models.HostReport.id.in_({row.host_report_id for row in rows}),
        ~sa.exists().where(_REPORT.host_report_id == models.HostReport.id))
    replays.record_folded(session, emptied)
    return session.execute(sa.delete(models.HostReport).where(emptied)
                           ).rowcount


@retry_on_conflict
def _fold_batch(context, condition, limit, interval):
    with db_api.context_manager.writer.using(context):
        session = context.session
        rows = session.execute(
            sa.select(_REPORT.id, _REPORT.instance_id,
                      _REPORT.host_report_id, _REPORT.collected_at,
                      _REPORT.allocated_bytes, _REPORT.guest_stats,
                      _REPORT.wss)
            .where(condition)
            .order_by(_REPORT.collected_at, _REPORT.id)
            .limit(limit).with_for_update()).all()
        if not rows:
            return {}
        groups = _group_reports(session, rows, interval)
        created = _write_history(session, groups, interval)
        session.flush()
        host_reports = _delete_reports(session, rows)
        return {'instance_reports': len(rows), 'host_reports': host_reports,
                'history_created': created}


def _add(totals, counts):
    for name, count in counts.items():
        if count:
            totals[name] = totals.get(name, 0) + count
    return totals


def _until_done(batch, *args):
    """``batch(*args)``, each its own transaction, until it returns no
    counts; their sum by table."""
    totals = {}
    while True:
        counts = batch(*args)
        if not counts:
            return totals
        _add(totals, counts)


@retry_on_conflict
def _delete_batch(context, model, condition, order_by, limit):
    """Delete up to ``limit`` rows of ``model`` matching ``condition``,
    oldest first; returns how many, by table. Host reports deleted raise
    their hosts' folded_sequence (memcanal.db.replays)."""
    with db_api.context_manager.writer.using(context):
        ids = context.session.execute(
            sa.select(model.id).where(condition).order_by(order_by)
            .limit(limit).with_for_update()).scalars().all()
        if not ids:
            return {}
        if model is models.HostReport:
            replays.record_folded(context.session, model.id.in_(ids))
        context.session.execute(sa.delete(model).where(model.id.in_(ids)))
        return {model.__tablename__: len(ids)}


def fold_reports(context, before, interval, batch_size):
    """Fold every instance report collected before ``before`` (but the
    latest of each instance) into the history, and delete it with its
    estimates, curves and host report; then the host reports before
    ``before`` that describe no instance. Returns counts by table."""
    totals = _until_done(
        _fold_batch, context,
        sa.and_(_REPORT.collected_at < before, _has_newer_report()),
        batch_size, interval)
    host_report = models.HostReport
    return _add(totals, _until_done(
        _delete_batch, context, host_report,
        sa.and_(host_report.collected_at < before,
                ~sa.exists().where(_REPORT.host_report_id == host_report.id)),
        host_report.collected_at, batch_size))


def expire_history(context, before, batch_size):
    """Delete the history of periods that started before ``before``;
    returns how many rows."""
    return _until_done(_delete_batch, context, _HISTORY,
                       _HISTORY.period_start < before,
                       _HISTORY.period_start, batch_size).get(
                           _HISTORY.__tablename__, 0)


def _move_rows(session, table_name, condition):
    """Copy the rows of ``table_name`` matching ``condition`` into its
    shadow table and delete them; returns how many."""
    table = models.Base.metadata.tables[table_name]
    shadow = models.SHADOW_TABLES[table_name]
    names = [column.name for column in shadow.columns]
    session.execute(sa.insert(shadow).from_select(
        names, sa.select(*[table.c[name] for name in names])
        .where(condition)))
    return session.execute(sa.delete(table).where(condition)).rowcount


def _archivable_decisions(before, superseded_before):
    """Finished decisions whose last change was before ``before``, or
    superseded ones (never acted on) before ``superseded_before``; either
    may be None. Never the newest of a host in KEPT_NEWEST states."""
    decision = models.Decision
    ended = sa.func.coalesce(decision.updated_at, decision.created_at)
    which = []
    if before is not None:
        which.append(sa.and_(decision.state.in_(FINISHED), ended < before))
    if superseded_before is not None:
        which.append(sa.and_(decision.state == 'superseded',
                             ended < superseded_before))
    kept = (sa.select(sa.func.max(decision.id))
            .where(decision.state.in_(KEPT_NEWEST))
            .group_by(decision.host_id, decision.state))
    return sa.and_(sa.or_(*which), decision.id.not_in(kept))


def _children(session, decision_ids):
    """Actions and events of each decision, counted."""
    counts = dict.fromkeys(decision_ids, 0)
    for model in (models.Action, models.DecisionEvent):
        for decision_id, count in session.execute(
                sa.select(model.decision_id, sa.func.count(model.id))
                .where(model.decision_id.in_(decision_ids))
                .group_by(model.decision_id)):
            counts[decision_id] += count
    return counts


@retry_on_conflict
def _archive_decisions(context, before, superseded_before, max_rows):
    """Move the oldest archivable decisions with their actions and
    events, at most ``max_rows`` rows in all (but always a whole
    decision, so a large one still moves)."""
    with db_api.context_manager.writer.using(context):
        session = context.session
        candidates = session.execute(
            sa.select(models.Decision.id)
            .where(_archivable_decisions(before, superseded_before))
            .order_by(models.Decision.id).limit(max_rows)
            .with_for_update()).scalars().all()
        if not candidates:
            return {}
        children = _children(session, candidates)
        chosen, rows = [], 0
        for decision_id in candidates:
            size = 1 + children[decision_id]
            if chosen and rows + size > max_rows:
                break
            chosen.append(decision_id)
            rows += size
        return {
            'decision_events': _move_rows(
                session, 'decision_events',
                models.DecisionEvent.decision_id.in_(chosen)),
            'actions': _move_rows(session, 'actions',
                                  models.Action.decision_id.in_(chosen)),
            'decisions': _move_rows(session, 'decisions',
                                    models.Decision.id.in_(chosen)),
        }


def _archivable_instances(before):
    instance = models.Instance
    return sa.and_(
        instance.deleted_at.is_not(None), instance.deleted_at < before,
        ~sa.exists().where(models.Action.instance_id == instance.id))


@retry_on_conflict
def _archive_instances(context, before, max_rows):
    """Move up to ``max_rows`` archivable instances that have no report
    left."""
    with db_api.context_manager.writer.using(context):
        session = context.session
        ids = session.execute(
            sa.select(models.Instance.id)
            .where(_archivable_instances(before),
                   ~sa.exists().where(
                       _REPORT.instance_id == models.Instance.id))
            .order_by(models.Instance.id).limit(max_rows)
            .with_for_update()).scalars().all()
        if not ids:
            return {}
        return {'instances': _move_rows(session, 'instances',
                                        models.Instance.id.in_(ids))}


def archive(context, decisions_before=None, instances_before=None,
            max_rows=1000, interval=3600, superseded_before=None):
    """One batch of archiving, nova's ``archive_deleted_rows``: at most
    ``max_rows`` rows moved to the shadow tables; returns the rows moved
    (or folded) by table, empty once nothing is left to archive.

    Finished decisions whose last change is before ``decisions_before``
    (superseded ones: ``superseded_before``) move first, with their
    actions and events. Then instances deleted
    before ``instances_before`` that no remaining action names: their
    last reports are folded into the history (``interval``) and deleted,
    then the instances move. None skips that kind.
    """
    moved = {}
    if decisions_before is not None or superseded_before is not None:
        _add(moved, _archive_decisions(context, decisions_before,
                                       superseded_before, max_rows))
    left = max_rows - sum(moved.values())
    if instances_before is not None and left > 0:
        folded = _fold_batch(
            context, _REPORT.instance_id.in_(
                sa.select(models.Instance.id).where(
                    _archivable_instances(instances_before))),
            left, interval)
        if folded:
            _add(moved, {FOLDED: folded['instance_reports'],
                         'host_reports': folded['host_reports']})
        else:
            _add(moved, _archive_instances(context, instances_before, left))
    return moved


def archive_until_complete(context, decisions_before=None,
                           instances_before=None, max_rows=1000,
                           interval=3600, superseded_before=None):
    """``archive`` batch after batch until nothing is left; the total."""
    return _until_done(archive, context, decisions_before, instances_before,
                       max_rows, interval, superseded_before)


@retry_on_conflict
def _purge_decisions(context, before, limit):
    shadow = models.SHADOW_TABLES
    decisions = shadow['decisions']
    with db_api.context_manager.writer.using(context):
        session = context.session
        query = sa.select(decisions.c.id).order_by(decisions.c.id)
        if before is not None:
            query = query.where(sa.func.coalesce(
                decisions.c.updated_at, decisions.c.created_at) < before)
        ids = session.execute(query.limit(limit)).scalars().all()
        if not ids:
            return {}
        purged = {}
        for name in DECISION_TABLES:
            table = shadow[name]
            column = table.c.id if name == 'decisions' else \
                table.c.decision_id
            purged['shadow_' + name] = session.execute(
                sa.delete(table).where(column.in_(ids))).rowcount
        return purged


@retry_on_conflict
def _purge_instances(context, before, limit):
    instances = models.SHADOW_TABLES['instances']
    with db_api.context_manager.writer.using(context):
        session = context.session
        query = sa.select(instances.c.id).order_by(instances.c.id)
        if before is not None:
            query = query.where(instances.c.deleted_at < before)
        ids = session.execute(query.limit(limit)).scalars().all()
        if not ids:
            return {}
        session.execute(sa.delete(instances).where(instances.c.id.in_(ids)))
        return {'shadow_instances': len(ids)}


def purge(context, before=None, batch_size=1000):
    """Delete archived rows, nova's ``db purge``: decisions whose last
    change was before ``before`` with their actions and events, and
    instances deleted before ``before``; everything when ``before`` is
    None. Returns the rows deleted by shadow table."""
    return _add(_until_done(_purge_decisions, context, before, batch_size),
                _until_done(_purge_instances, context, before, batch_size))


def run(context, options, now=None):
    """Everything ``[retention]`` (``options``) asks for but purging,
    until done: the service's periodic job and ``memcanal-manage db
    retention``. Returns the rows folded, deleted and archived by
    table."""
    now = now or timeutils.utcnow()
    totals = {}
    reports_before = days_ago(options.full_reports_days, now)
    if reports_before is not None:
        _add(totals, fold_reports(context, reports_before,
                                  options.history_interval,
                                  options.batch_size))
    history_before = days_ago(options.history_days, now)
    if history_before is not None:
        _add(totals, {'instance_report_history (expired)': expire_history(
            context, history_before, options.batch_size)})
    _add(totals, archive_until_complete(
        context, days_ago(options.decisions_days, now),
        days_ago(options.deleted_instances_days, now), options.batch_size,
        options.history_interval,
        days_ago(options.superseded_decisions_days, now)))
    return totals


def _history_dict(row, with_curves):
    result = {
        'period_start': row.period_start,
        'period_seconds': row.period_seconds,
        'report_count': row.report_count,
        'first_collected_at': row.first_collected_at,
        'last_collected_at': row.last_collected_at,
        'allocated_bytes': row.stats.get('allocated_bytes'),
        'wss': row.stats.get('wss', {}),
        'guest_stats': row.stats.get('guest_stats', {}),
    }
    if with_curves:
        result['mrc'] = db_api.stored_curves(row.mrc)
    return result


@db_api.context_manager.reader
def list_history(context, instance_uuid, since=None, until=None,
                 limit=None, marker=None, with_curves=True):
    """An instance's downsampled history, newest period first.

    ``since`` and ``until`` bound the periods' starts (inclusive,
    exclusive); ``marker`` is the ``period_start`` of the last row of the
    previous page. The instance may be archived or gone: the history is
    kept by uuid until it ages out, so an unknown uuid has none.
    """
    query = (sa.select(_HISTORY)
             .where(_HISTORY.instance_uuid == instance_uuid)
             .order_by(_HISTORY.period_start.desc()))
    if since is not None:
        query = query.where(_HISTORY.period_start >= since)
    if until is not None:
        query = query.where(_HISTORY.period_start < until)
    if marker is not None:
        query = query.where(_HISTORY.period_start < marker)
    if limit is not None:
        query = query.limit(limit)
    return [_history_dict(row, with_curves)
            for row in context.session.execute(query).scalars()]
