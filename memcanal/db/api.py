"""Database API: every read and write memcanal makes, one transaction each.

Functions take a ``memcanal.context.RequestContext`` first and return plain
dicts, so callers never hold ORM objects past their transaction.
"""

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal import conf as memcanal_conf
from memcanal import exception
from memcanal.db import models

context_manager = enginefacade.transaction_context()


@sa.event.listens_for(sa.engine.Engine, 'begin', insert=True)
def _sqlite_begin_immediate(connection):
    """Take SQLite's write lock when a transaction begins, not later.

    oslo.db begins SQLite transactions DEFERRED: a transaction that has
    read and then writes while another connection holds the write lock
    fails at once ("database is locked"), where waiting would do; with
    the service's many RPC threads storing reports, retries alone lose
    that race again and again. BEGIN IMMEDIATE makes them queue on
    SQLite's busy timeout instead. SQLite allows one writer at a time in
    any case; the embedded default is for one machine's worth of load.
    Runs before oslo.db's own listener, which then sees the transaction
    begun (its ``in_transaction`` marker) and emits no second BEGIN.
    """
    if (connection.dialect.name == 'sqlite'
            and 'in_transaction' not in connection.info):
        connection.exec_driver_sql('BEGIN IMMEDIATE')
        connection.info['in_transaction'] = True


def _is_sqlite_busy(error):
    # SQLite refuses, without waiting, a transaction that read and now
    # wants to write while another connection writes; oslo.db passes
    # such OperationalErrors through unwrapped.
    return (isinstance(error, sa.exc.OperationalError)
            and 'database is locked' in str(error))


# Writes retried on deadlocks (MariaDB, PostgreSQL) and a busy SQLite.
retry_on_conflict = oslo_db_api.wrap_db_retry(
    max_retries=20, retry_interval=0.02, inc_retry_interval=True,
    max_retry_interval=0.5, retry_on_deadlock=True,
    exception_checker=_is_sqlite_busy)


# The interval of hosts whose agent registered none (older agents): the
# agent's default.
DEFAULT_REPORT_INTERVAL = 60.0


def host_state(last_heartbeat_at, report_interval, now=None):
    """'up' until the host has missed [service] missed_heartbeats of its
    own report intervals (plus [service] heartbeat_grace for delivery),
    then 'down'.

    Derived on every read rather than stored, so it is never stale when
    the service that would have marked a host down is itself stopped,
    and a host reporting every second is judged by its own interval.
    """
    if last_heartbeat_at is None:
        return 'down'
    options = memcanal_conf.CONF.service
    silence = ((now or timeutils.utcnow()) - last_heartbeat_at
               ).total_seconds()
    allowed = (options.missed_heartbeats
               * (report_interval or DEFAULT_REPORT_INTERVAL)
               + options.heartbeat_grace)
    return 'up' if silence <= allowed else 'down'


def _host_dict(host, instance_count, rejected_count):
    return {
        'id': host.id,
        'uuid': host.uuid,
        'name': host.name,
        'memory_total_bytes': host.memory_total_bytes,
        'memory_reserved_bytes': host.memory_reserved_bytes,
        'state': host_state(host.last_heartbeat_at, host.report_interval),
        'report_interval': host.report_interval,
        'last_heartbeat_at': host.last_heartbeat_at,
        'last_sequence': host.last_sequence,
        'instance_count': instance_count,
        'reports_rejected': rejected_count,
        'created_at': host.created_at,
        'updated_at': host.updated_at,
    }


def _instance_dict(instance, host_uuid):
    return {
        'id': instance.id,
        'uuid': instance.uuid,
        'host_uuid': host_uuid,
        'project_id': instance.project_id,
        'allocated_bytes': instance.allocated_bytes,
        'target_bytes': instance.target_bytes,
        'observed_bytes': instance.observed_bytes,
        'floor_bytes': instance.floor_bytes,
        'ceiling_bytes': instance.ceiling_bytes,
        'opt_out': instance.opt_out,
        'mechanism': instance.mechanism,
        'target_changed_at': instance.target_changed_at,
        'last_reported_at': instance.last_reported_at,
        'deleted_at': instance.deleted_at,
        'created_at': instance.created_at,
        'updated_at': instance.updated_at,
    }


def _report_dict(report):
    return {
        'id': report.id,
        'sequence': report.sequence,
        'collected_at': report.collected_at,
        'allocated_bytes': report.allocated_bytes,
        'wss': {w.estimator: w.wss_bytes for w in report.wss_estimates},
        'mrc': {m.method: m.points for m in report.mrc_curves},
        'guest_stats': report.guest_stats,
        'log_stats': report.log_stats,
    }


@retry_on_conflict
@context_manager.writer
def register_host(context, name, memory_total_bytes, memory_reserved_bytes,
                  report_interval=None):
    """Create or refresh the host called ``name``; its registration is a
    heartbeat.

    Returns the host's uuid and the highest report sequence stored for it,
    so a restarted agent continues numbering after what was stored.
    """
    now = timeutils.utcnow()
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.name == name)
    ).scalar_one_or_none()
    if host is None:
        host = models.Host(uuid=uuidutils.generate_uuid(), name=name,
                           last_sequence=0)
        context.session.add(host)
    host.memory_total_bytes = memory_total_bytes
    host.memory_reserved_bytes = memory_reserved_bytes
    host.report_interval = report_interval
    host.last_heartbeat_at = now
    context.session.flush()
    return {'uuid': host.uuid, 'last_sequence': host.last_sequence}


def _upsert_instances(session, host, samples, now):
    """The report's instances, created or updated, by uuid; one query.

    A report describes: it sets what the agent observed, never the
    target (only decisions do, memcanal.db.decisions), and lists the
    instance as present on the host, undeleting one that was thought
    gone.
    """
    by_uuid = {instance.uuid: instance for instance in session.execute(
        sa.select(models.Instance).where(
            models.Instance.uuid.in_([s['uuid'] for s in samples]))
    ).scalars()}
    for sample in samples:
        instance = by_uuid.get(sample['uuid'])
        if instance is None:
            instance = models.Instance(uuid=sample['uuid'], opt_out=False)
            session.add(instance)
            by_uuid[sample['uuid']] = instance
        instance.host_id = host.id
        instance.project_id = sample['project_id']
        instance.allocated_bytes = sample['allocated_bytes']
        instance.observed_bytes = sample.get('observed_bytes')
        instance.last_reported_at = now
        instance.deleted_at = None
    return by_uuid


def _store_report(context, report):
    session = context.session
    # Lock the host row first: reports of one host then store one after
    # the other. Otherwise MariaDB deadlocks two of them, each holding the
    # shared lock its host_reports foreign key took and waiting for the
    # other's to update the host's last_sequence.
    host = session.execute(
        sa.select(models.Host).where(models.Host.uuid == report['host_uuid'])
        .with_for_update()
    ).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=report['host_uuid'])
    already = session.execute(
        sa.select(models.HostReport.id).where(
            models.HostReport.host_id == host.id,
            models.HostReport.sequence == report['sequence'])
    ).first()
    if already is not None:
        return False
    collected_at = report['collected_at']
    host_report = models.HostReport(host_id=host.id,
                                    sequence=report['sequence'],
                                    collected_at=collected_at)
    session.add(host_report)
    now = timeutils.utcnow()
    instances = _upsert_instances(session, host, report['instances'], now)
    # One flush gives the new rows their ids; the per-instance rows then
    # go in with the commit, in a few multi-row INSERTs.
    session.flush()
    for sample in report['instances']:
        session.add(models.InstanceReport(
            host_report_id=host_report.id,
            instance_id=instances[sample['uuid']].id,
            sequence=report['sequence'], collected_at=collected_at,
            allocated_bytes=sample['allocated_bytes'],
            guest_stats=sample.get('guest_stats', {}),
            log_stats=sample.get('logs'),
            wss_estimates=[
                models.WssEstimate(estimator=estimator, wss_bytes=wss_bytes)
                for estimator, wss_bytes in sample.get('wss', {}).items()],
            mrc_curves=[
                models.MrcCurve(method=method, points=points)
                for method, points in sample.get('mrc', {}).items()]))
    host.last_sequence = max(host.last_sequence, report['sequence'])
    host.last_heartbeat_at = now
    return True


@retry_on_conflict
def store_report(context, report):
    """Store a validated report whole, or not at all.

    Returns False when (host, sequence) is already stored, which is how a
    redelivered message is told apart from a new one; raises HostNotFound
    for a host that never registered.
    """
    try:
        with context_manager.writer.using(context):
            return _store_report(context, report)
    except db_exc.DBDuplicateEntry:
        # Another worker stored the same redelivered report first.
        return False


@retry_on_conflict
@context_manager.writer
def record_rejection(context, host_uuid, sequence, code, detail):
    context.session.add(models.ReportRejection(
        host_uuid=host_uuid, sequence=sequence, code=code, detail=detail))


@context_manager.reader
def count_rejections(context, host_uuid=None):
    query = sa.select(sa.func.count(models.ReportRejection.id))
    if host_uuid is not None:
        query = query.where(models.ReportRejection.host_uuid == host_uuid)
    return context.session.execute(query).scalar_one()


@retry_on_conflict
@context_manager.writer
def mark_gone_instances(context, gone_after):
    """Mark deleted every instance its host's reports have left out for
    more than ``gone_after`` seconds; returns their uuids.

    Judged against the host's own last report, not the clock: the VMs of
    a host whose agent stopped are not known to be gone.
    """
    session = context.session
    rows = session.execute(
        sa.select(models.Instance, models.Host.last_heartbeat_at)
        .join(models.Host, models.Instance.host_id == models.Host.id)
        .where(models.Instance.deleted_at.is_(None))).all()
    now = timeutils.utcnow()
    gone = []
    for instance, heartbeat in rows:
        last = instance.last_reported_at or instance.created_at
        if heartbeat is not None and (
                heartbeat - last).total_seconds() > gone_after:
            instance.deleted_at = now
            gone.append(instance.uuid)
    return gone


def _host_counts(session):
    instances = dict(session.execute(
        sa.select(models.Instance.host_id, sa.func.count(models.Instance.id))
        .where(models.Instance.deleted_at.is_(None))
        .group_by(models.Instance.host_id)).all())
    rejected = dict(session.execute(
        sa.select(models.ReportRejection.host_uuid,
                  sa.func.count(models.ReportRejection.id))
        .group_by(models.ReportRejection.host_uuid)).all())
    return instances, rejected


@context_manager.reader
def list_hosts(context):
    hosts = context.session.execute(
        sa.select(models.Host).order_by(models.Host.name)).scalars().all()
    instances, rejected = _host_counts(context.session)
    return [_host_dict(h, instances.get(h.id, 0), rejected.get(h.uuid, 0))
            for h in hosts]


@context_manager.reader
def get_host(context, host_uuid):
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.uuid == host_uuid)
    ).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=host_uuid)
    instances, rejected = _host_counts(context.session)
    return _host_dict(host, instances.get(host.id, 0),
                      rejected.get(host.uuid, 0))


def _instance_query():
    return (sa.select(models.Instance, models.Host.uuid)
            .outerjoin(models.Host, models.Instance.host_id == models.Host.id))


@context_manager.reader
def list_instances(context, project_id=None, host_uuid=None, limit=None,
                   marker=None, deleted=False):
    """Instances ordered by uuid; ``marker`` is the last uuid of a page.

    Deleted instances (gone from their host's reports) only when
    ``deleted`` is true: then only those.
    """
    query = _instance_query().order_by(models.Instance.uuid).where(
        models.Instance.deleted_at.is_not(None) if deleted
        else models.Instance.deleted_at.is_(None))
    if project_id is not None:
        query = query.where(models.Instance.project_id == project_id)
    if host_uuid is not None:
        query = query.where(models.Host.uuid == host_uuid)
    if marker is not None:
        query = query.where(models.Instance.uuid > marker)
    if limit is not None:
        query = query.limit(limit)
    return [_instance_dict(inst, h_uuid)
            for inst, h_uuid in context.session.execute(query).all()]


def _latest_report(session, instance_id):
    return session.execute(
        sa.select(models.InstanceReport)
        .where(models.InstanceReport.instance_id == instance_id)
        .order_by(models.InstanceReport.id.desc()).limit(1)
    ).scalar_one_or_none()


@context_manager.reader
def get_instance(context, instance_uuid):
    """One instance with its latest report (or None) under 'latest_report'."""
    row = context.session.execute(
        _instance_query().where(models.Instance.uuid == instance_uuid)
    ).first()
    if row is None:
        raise exception.InstanceNotFound(uuid=instance_uuid)
    instance, host_uuid = row
    result = _instance_dict(instance, host_uuid)
    latest = _latest_report(context.session, instance.id)
    result['latest_report'] = _report_dict(latest) if latest else None
    return result


@context_manager.reader
def list_instance_reports(context, instance_uuid, limit=None, marker=None):
    """Reports of one instance, newest first; ``marker`` is a report id."""
    instance_id = context.session.execute(
        sa.select(models.Instance.id).where(
            models.Instance.uuid == instance_uuid)).scalar_one_or_none()
    if instance_id is None:
        raise exception.InstanceNotFound(uuid=instance_uuid)
    query = (sa.select(models.InstanceReport)
             .where(models.InstanceReport.instance_id == instance_id)
             .order_by(models.InstanceReport.id.desc()))
    if marker is not None:
        query = query.where(models.InstanceReport.id < marker)
    if limit is not None:
        query = query.limit(limit)
    return [_report_dict(r)
            for r in context.session.execute(query).scalars().all()]


@context_manager.reader
def count_reports(context):
    """Host reports and instance reports stored, for summaries."""
    session = context.session
    return {
        'host_reports': session.execute(
            sa.select(sa.func.count(models.HostReport.id))).scalar_one(),
        'instance_reports': session.execute(
            sa.select(sa.func.count(models.InstanceReport.id))).scalar_one(),
    }


# Settings an operator may change on an instance (PATCH /instances/{uuid}).
INSTANCE_SETTINGS = ('opt_out', 'floor_bytes', 'ceiling_bytes', 'mechanism')


@retry_on_conflict
@context_manager.writer
def update_instance_settings(context, instance_uuid, values):
    """Set some of INSTANCE_SETTINGS of an instance; returns it."""
    row = context.session.execute(
        _instance_query().where(models.Instance.uuid == instance_uuid)
    ).first()
    if row is None:
        raise exception.InstanceNotFound(uuid=instance_uuid)
    instance, host_uuid = row
    for name in INSTANCE_SETTINGS:
        if name in values:
            setattr(instance, name, values[name])
    context.session.flush()
    return _instance_dict(instance, host_uuid)


@context_manager.reader
def host_policy_inputs(context, host_uuid):
    """Every instance still on a host (not deleted) with its last
    ``reports`` (newest first, at most two: U-tube compares a VM's use
    with the report before)."""
    session = context.session
    host_id = session.execute(
        sa.select(models.Host.id).where(models.Host.uuid == host_uuid)
    ).scalar_one_or_none()
    if host_id is None:
        raise exception.HostNotFound(host=host_uuid)
    instances = session.execute(
        sa.select(models.Instance).where(
            models.Instance.host_id == host_id,
            models.Instance.deleted_at.is_(None))
        .order_by(models.Instance.uuid)).scalars().all()
    result = []
    for instance in instances:
        reports = session.execute(
            sa.select(models.InstanceReport)
            .where(models.InstanceReport.instance_id == instance.id)
            .order_by(models.InstanceReport.id.desc()).limit(2)
        ).scalars().all()
        result.append(dict(_instance_dict(instance, host_uuid),
                           reports=[_report_dict(r) for r in reports]))
    return result


@context_manager.reader
def stored_sequences(context, host_uuid, sequences):
    """Which of a host's report ``sequences`` are settled: a dict of the
    'stored' ones and the 'rejected' ones, each sorted.

    Read in its own transaction, so only what is committed counts: the
    agent sends the others again (memcanal.agent.outbox). An unknown
    host has stored nothing.
    """
    session = context.session
    stored, rejected = set(), set()
    # A few hundred bound parameters per statement, well below SQLite's
    # limit, however many the agent asks about.
    for start in range(0, len(sequences), 500):
        chunk = sequences[start:start + 500]
        stored.update(session.execute(
            sa.select(models.HostReport.sequence)
            .join(models.Host, models.HostReport.host_id == models.Host.id)
            .where(models.Host.uuid == host_uuid,
                   models.HostReport.sequence.in_(chunk))).scalars())
        rejected.update(session.execute(
            sa.select(models.ReportRejection.sequence)
            .where(models.ReportRejection.host_uuid == host_uuid,
                   models.ReportRejection.sequence.in_(chunk))).scalars())
    return {'stored': sorted(stored), 'rejected': sorted(rejected - stored)}
