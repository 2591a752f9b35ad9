"""Database API: every read and write memcanal makes, one transaction each.

Functions take a ``memcanal.context.RequestContext`` first and return plain
dicts, so callers never hold ORM objects past their transaction.
"""

import collections
import datetime

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal import conf as memcanal_conf
from memcanal.db import claims
from memcanal.db import models
from memcanal.db import replays
from memcanal.db import report_rows
from memcanal import exception
from memcanal import hypervisors
from memcanal.estimation import packed_curve
from memcanal.policy import demand
from memcanal.policy import guardrails

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


@sa.event.listens_for(sa.engine.Engine, 'connect')
def _mysql_utf8mb4(dbapi_connection, connection_record):
    """Talk utf8mb4 to MariaDB and MySQL.

    oslo.db connects with charset=utf8 (MySQL's three-byte utf8mb3) when
    the URL names none: a project id or a reason with a character past
    the Basic Multilingual Plane (an emoji) failed as a 500 even where
    the tables hold utf8mb4. A URL's own charset is replaced too: utf8mb4
    is a superset of every utf8 the URL could name.
    """
    if (type(dbapi_connection).__module__.startswith('pymysql')
            and dbapi_connection.charset != 'utf8mb4'):
        dbapi_connection.set_character_set('utf8mb4')


def _is_sqlite_busy(error):
    # SQLite refuses, without waiting, a transaction that read and now
    # wants to write while another connection writes; oslo.db passes
    # such OperationalErrors through unwrapped.
    return (isinstance(error, sa.exc.OperationalError)
            and 'database is locked' in str(error))


def retry_when(exception_checker):
    """A decorator retrying a write on deadlocks and whatever else
    ``exception_checker`` says is worth another try."""
    return oslo_db_api.wrap_db_retry(
        max_retries=20, retry_interval=0.02, inc_retry_interval=True,
        max_retry_interval=0.5, retry_on_deadlock=True,
        exception_checker=exception_checker)


# Writes retried on deadlocks (MariaDB, PostgreSQL) and a busy SQLite.
retry_on_conflict = retry_when(_is_sqlite_busy)


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


class InstanceTotals(collections.namedtuple(
        'InstanceTotals', 'count demand allocated resident demand_low',
        defaults=(0,) * 5)):
    """What a host's live instances add up to: how many, their measured
    demand (from the upper bounds of sampled working sets), their
    memory, what of it they hold resident, and their demand from the
    lower bounds (the demand's 95 % interval is [demand_low, demand])."""


def _host_dict(host, load, rejected_count, lending=(0, 0)):
    """The host, with ``load`` (an InstanceTotals) of its live instances and
    ``lending`` (bytes its memory server lends, bytes its VMs
    borrow)."""
    capacity = host.memory_total_bytes - host.memory_reserved_bytes
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
        'instance_count': load.count,
        'reports_rejected': rejected_count,
        'availability_zone': host.availability_zone,
        'allocation_ratio': host.allocation_ratio,
        'hypervisor_type': host.hypervisor_type,
        'nova_managed': hypervisors.nova_managed(host.hypervisor_type),
        'capacity_bytes': capacity,
        'demand_bytes': load.demand,
        'demand_bounds_bytes': [load.demand_low, load.demand],
        'headroom_bytes': capacity - load.demand,
        'utilization': load.demand / capacity if capacity > 0 else None,
        'allocated_bytes': load.allocated,
        'resident_bytes': load.resident,
        'lent_bytes': lending[0],
        'borrowed_bytes': lending[1],
        'pooling_admitted': bool(host.pooling_admitted),
        'created_at': host.created_at,
        'updated_at': host.updated_at,
    }


def _bounds(instance):
    """The 95 % interval of an instance's working set, [low, high] bytes,
    or None (not sampled, or reported before RPC 1.7)."""
    if instance.wss_high_bytes is None:
        return None
    return [instance.wss_low_bytes, instance.wss_high_bytes]


def _instance_dict(instance, host_uuid):
    return {
        'id': instance.id,
        'uuid': instance.uuid,
        'host_uuid': host_uuid,
        'project_id': instance.project_id,
        'allocated_bytes': instance.allocated_bytes,
        'target_bytes': instance.target_bytes,
        'observed_bytes': instance.observed_bytes,
        'flavor': instance.flavor,
        'wss_bytes': instance.wss_bytes,
        'wss_bounds_bytes': _bounds(instance),
        # What its demand and floor count (guardrails.demand_wss).
        'demand_wss_bytes': guardrails.demand_wss(instance.wss_bytes,
                                                  _bounds(instance)),
        'resident_bytes': instance.resident_bytes,
        'paged_bytes': instance.paged_bytes,
        'resident_target_bytes': instance.resident_target_bytes,
        'reached_bytes': instance.reached_bytes,
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


def stored_curves(mrc):
    """A stored ``mrc`` column as {method: [[size bytes, miss ratio],
    ...]}: curves are stored as their report carried them, packed
    (memcanal.estimation.packed_curve) or, from older agents, lists."""
    return {method: packed_curve.unpack(curve)
            for method, curve in (mrc or {}).items()}


def stored_bands(mrc_bands):
    """A stored ``mrc_bands`` column as {method: {"low": points, "high":
    points}} (points as stored_curves gives them)."""
    return {method: {edge: packed_curve.unpack(curve)
                     for edge, curve in band.items()}
            for method, band in (mrc_bands or {}).items()}


def _report_dict(report):
    return {
        'id': report.id,
        'sequence': report.sequence,
        'collected_at': report.collected_at,
        'allocated_bytes': report.allocated_bytes,
        'wss': report.wss or {},
        'mrc': stored_curves(report.mrc),
        'wss_bounds': report.wss_bounds or {},
        'mrc_bands': stored_bands(report.mrc_bands),
        'guest_stats': report.guest_stats,
        'log_stats': report.log_stats,
    }


@retry_on_conflict
@context_manager.writer
def register_host(context, name, memory_total_bytes, memory_reserved_bytes,
                  report_interval=None, public_key=None,
                  hypervisor_type=None, agent_version=None, sent_at=None):
    """Create or refresh the host called ``name``; its registration is a
    heartbeat.

    ``public_key`` (memcanal.rpc.signing.public_text) is the key the
    agent signed the registration with: a new host, or one without a key
    yet, is pinned to it; a host pinned to another key raises
    HostKeyMismatch, and nothing of it changes. (Only callers inside the
    service, which speak for no agent, pass None.) ``hypervisor_type`` is
    what the agent registered the host as (memcanal.hypervisors); None
    keeps what the host had. ``agent_version`` is the agent API version
    its agent serves (memcanal.db.rpc_versions); None (an agent before
    service RPC 1.9) forgets the one it had, as that agent was replaced.
    ``sent_at`` is when the agent sent the registration (its clock,
    service RPC 1.10: memcanal.rpc.freshness): one sent no later than
    the host's newest raises StaleMessage (a replay), and so does one
    without (None) of a host whose agent stamps its messages; nothing
    of the host changes then.

    Returns the host's uuid and the highest report sequence stored for it,
    so a restarted agent continues numbering after what was stored, and
    whether this registration pinned its key.
    """
    now = timeutils.utcnow()
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.name == name)
        .with_for_update()).scalar_one_or_none()
    if host is None:
        host = models.Host(uuid=uuidutils.generate_uuid(), name=name,
                           last_sequence=0)
        context.session.add(host)
    if public_key is not None and host.public_key not in (None,
                                                          public_key):
        raise exception.HostKeyMismatch(host=name)
    replays.check_registration(host, sent_at)
    pinned = public_key is not None and host.public_key is None
    if pinned:
        host.public_key = public_key
    host.memory_total_bytes = memory_total_bytes
    host.memory_reserved_bytes = memory_reserved_bytes
    host.report_interval = report_interval
    if hypervisor_type is not None:
        host.hypervisor_type = hypervisor_type
    host.agent_version = agent_version
    if sent_at is not None:
        host.registered_sent_at = sent_at
    host.last_heartbeat_at = now
    context.session.flush()
    return {'uuid': host.uuid, 'last_sequence': host.last_sequence,
            'pinned': pinned}


@context_manager.reader
def host_identity(context, name):
    """The id, uuid, name, pinned public_key (None: none yet) and
    whether its agent stamps its messages fresh (``stamped``) of the
    host called ``name``, or None: what the service checks an agent's
    message with."""
    row = context.session.execute(
        sa.select(models.Host.id, models.Host.uuid, models.Host.name,
                  models.Host.public_key, models.Host.stamped)
        .where(models.Host.name == name)).first()
    return row._asdict() if row is not None else None


@retry_on_conflict
@context_manager.writer
def mark_stamped(context, host_id):
    """Record that the host's agent stamps its messages fresh: from now
    on the service refuses those of the host without (a replay of a
    message from before its agent's upgrade)."""
    context.session.execute(
        sa.update(models.Host).where(models.Host.id == host_id)
        .values(stamped=True))


@retry_on_conflict
@context_manager.writer
def forget_host_key(context, name):
    """Unpin the host's key, so that its next registration pins a new one
    (a rebuilt host); returns the key forgotten (None if it had none).
    What the host's old agent stamped is forgotten with it, so a rebuilt
    host may run an older release."""
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.name == name)
        .with_for_update()).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=name)
    forgotten, host.public_key = host.public_key, None
    host.stamped, host.registered_sent_at = False, None
    return forgotten


def held_elsewhere(context, host_id, report):
    """Uuids of the instances of ``report`` (validated, of the host
    ``host_id``) that another host still holds (claims.ELSEWHERE): the
    service may ask nova where they run before storing it."""
    with context_manager.reader.connection.using(context) as connection:
        return sorted(uuid for (_host, uuid), code in claims.left_out(
            connection, [(host_id, report)], host_state).items()
            if code == claims.ELSEWHERE)


@retry_on_conflict
def store_reports(context, reports):
    """Store validated reports in one transaction: all of them, or none.

    Returns, for each report in order, what store_report would: True
    (stored whole), {instance uuid: code} (stored but for the entries its
    host may not describe, memcanal.db.claims), False ((host, sequence)
    was stored before, or earlier in ``reports``: a redelivered message)
    or, instead of raising it, a HostNotFound (its host never registered;
    nothing of it is stored) or an InvalidReport ``report.replayed`` (not
    stored, at or below what retention folded: memcanal.db.replays).
    A database error stores none of them; the caller may then store them
    one by one, so one bad report does not sink the others. Plain Core
    statements carrying many reports' rows each: the ORM's unit of work
    took most of a report's time.
    """
    with context_manager.writer.connection.using(context) as connection:
        return report_rows.store(connection, reports, host_state)


def store_report(context, report):
    """Store a validated report whole, or not at all.

    Returns True, or {instance uuid: code} of the entries left out
    (memcanal.db.claims), once stored; False when (host, sequence) is
    already stored, which is how a redelivered message is told apart from
    a new one; raises HostNotFound for a host that never registered, and
    InvalidReport for a replay of one retention folded.
    """
    try:
        outcome, = store_reports(context, [report])
    except db_exc.DBDuplicateEntry:
        # Another worker stored the same redelivered report first.
        return False
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


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
    now = timeutils.utcnow()
    last_listed = sa.func.coalesce(models.Instance.last_reported_at,
                                   models.Instance.created_at)
    gone = []
    # A host's cutoff is its own last report less gone_after: one query
    # per host, never every instance read into Python.
    for host_id, heartbeat in session.execute(
            sa.select(models.Host.id, models.Host.last_heartbeat_at)
            .where(models.Host.last_heartbeat_at.is_not(None))).all():
        cutoff = heartbeat - datetime.timedelta(seconds=gone_after)
        left = session.execute(
            sa.select(models.Instance.id, models.Instance.uuid).where(
                models.Instance.host_id == host_id,
                models.Instance.deleted_at.is_(None),
                last_listed < cutoff)).all()
        if left:
            session.execute(
                sa.update(models.Instance)
                .where(models.Instance.id.in_([row.id for row in left]))
                .values(deleted_at=now))
            gone.extend(row.uuid for row in left)
    return sorted(gone)


def _rails():
    """The guardrails' kernel footprint, which a VM's demand counts."""
    return guardrails.Rails(
        kernel_bytes=memcanal_conf.CONF.optimizer.kernel_mb * 2 ** 20)


def _live_demands(session, *conditions):
    """(host id, flavor, project, flavor memory, demand) of every live
    instance matching ``conditions``: its measured demand, or all its
    memory when no working set was measured (demand.vm_demand)."""
    return [(row.host_id, row.flavor, row.project_id, row.allocated_bytes,
             need) for row, need, _low in _live_instances(session,
                                                          *conditions)]


def _live_instances(session, *conditions):
    """(row, measured demand, demand from the working set's lower bound)
    of every live instance matching ``conditions``; the demand counts
    the upper bound of a sampled working set (guardrails.demand_wss)."""
    rails = _rails()
    rows = session.execute(
        sa.select(models.Instance.host_id, models.Instance.flavor,
                  models.Instance.project_id,
                  models.Instance.allocated_bytes,
                  models.Instance.target_bytes, models.Instance.wss_bytes,
                  models.Instance.wss_low_bytes,
                  models.Instance.wss_high_bytes,
                  models.Instance.resident_target_bytes,
                  models.Instance.reached_bytes)
        .where(models.Instance.deleted_at.is_(None), *conditions)).all()
    return [(row, *demands_of(row, rails)[1:]) for row in rows]


def demands_of(row, rails=None):
    """(memory, measured demand, demand from the working set's lower
    bound) of an instance ``row`` (a models.Instance, or a row with the
    columns _live_instances reads): what it has (memory_of), and its
    working set's upper bound plus the kernel, no more than that memory
    (demand.vm_demand)."""
    rails = rails or _rails()
    memory = memory_of(row.target_bytes, row.allocated_bytes,
                       row.reached_bytes)
    bounds = _bounds(row)
    low = None if bounds is None else min(bounds[0], row.wss_bytes)
    return (memory,
            demand.vm_demand(memory, guardrails.demand_wss(row.wss_bytes,
                                                           bounds), rails),
            demand.vm_demand(memory, row.wss_bytes if low is None else low,
                             rails))


def memory_of(target_bytes, allocated_bytes, reached_bytes=None):
    """What a VM has: what its guest reached at memcanal's last memory
    target where its agent read that back, else the target, else all its
    memory. A guest that lagged its target is counted at what it got:
    memory it did not give back is still its host's, memory it did not
    take is not the VM's."""
    if reached_bytes is not None:
        return reached_bytes
    return target_bytes or allocated_bytes


def resident_of(memory_bytes, resident_target_bytes):
    """What a VM holds of its host's memory: its memory, less what
    memory pooling pages out."""
    if resident_target_bytes is None:
        return memory_bytes
    return min(memory_bytes, resident_target_bytes)


def _host_counts(session, host=None):
    """Per host id: InstanceTotals of its live instances; per host uuid:
    rejections; of every host, or of ``host`` (a Host) alone."""
    instances = {}
    for row, need, low in _live_instances(session, *(
            [models.Instance.host_id == host.id] if host else [])):
        load = instances.get(row.host_id, InstanceTotals())
        instances[row.host_id] = InstanceTotals(
            load.count + 1, load.demand + need,
            load.allocated + row.allocated_bytes,
            load.resident + resident_of(
                memory_of(row.target_bytes, row.allocated_bytes,
                          row.reached_bytes),
                row.resident_target_bytes),
            load.demand_low + low)
    rejected = sa.select(models.ReportRejection.host_uuid,
                         sa.func.count(models.ReportRejection.id))
    if host is not None:
        rejected = rejected.where(
            models.ReportRejection.host_uuid == host.uuid)
    return instances, dict(session.execute(
        rejected.group_by(models.ReportRejection.host_uuid)).all())


def _lending(session):
    """Per host id: (bytes its memory server lends, bytes its VMs
    borrow), of live leases."""
    lent, borrowed = {}, {}
    for server_host, borrower, amount in session.execute(
            sa.select(models.MemoryServer.host_id,
                      models.MemoryLease.borrower_host_id,
                      models.MemoryLease.lent_bytes)
            .join(models.MemoryServer, models.MemoryServer.id
                  == models.MemoryLease.memory_server_id)):
        lent[server_host] = lent.get(server_host, 0) + amount
        borrowed[borrower] = borrowed.get(borrower, 0) + amount
    return {host_id: (lent.get(host_id, 0), borrowed.get(host_id, 0))
            for host_id in set(lent) | set(borrowed)}


@context_manager.reader
def list_hosts(context):
    hosts = context.session.execute(
        sa.select(models.Host).order_by(models.Host.name)).scalars().all()
    instances, rejected = _host_counts(context.session)
    lending = _lending(context.session)
    return [_host_dict(h, instances.get(h.id, InstanceTotals()),
                       rejected.get(h.uuid, 0), lending.get(h.id, (0, 0)))
            for h in hosts]


@context_manager.reader
def get_host(context, host_uuid):
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.uuid == host_uuid)
    ).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=host_uuid)
    instances, rejected = _host_counts(context.session, host)
    return _host_dict(host, instances.get(host.id, InstanceTotals()),
                      rejected.get(host.uuid, 0),
                      _lending(context.session).get(host.id, (0, 0)))


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
    for start in range(0, len(sequences), report_rows.IN_CHUNK):
        chunk = sequences[start:start + report_rows.IN_CHUNK]
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


# The share of VMs whose demand a ratio covers: a new VM is estimated as
# needing what nine in ten of its flavor's (or project's) VMs need.
DEMAND_PERCENTILE = 90


def _percentile(values, percentile):
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * percentile // 100))
    return ordered[rank - 1]


@context_manager.reader
def demand_ratios(context):
    """Measured demand over flavor memory of the live VMs with a measured
    working set, by flavor name and by project: per key, the ratio
    (DEMAND_PERCENTILE-th percentile) and how many VMs it is taken over.
    The scheduler filter scales a new VM's flavor memory by it."""
    by_flavor, by_project = {}, {}
    for _h, flavor, project, allocated, measured in _live_demands(
            context.session, models.Instance.wss_bytes.is_not(None)):
        if allocated <= 0:
            continue
        ratio = measured / allocated
        if flavor is not None:
            by_flavor.setdefault(flavor, []).append(ratio)
        by_project.setdefault(project, []).append(ratio)
    return {
        name: {key: {'ratio': _percentile(ratios, DEMAND_PERCENTILE),
                     'instances': len(ratios)}
               for key, ratios in sorted(groups.items())}
        for name, groups in (('flavors', by_flavor),
                             ('projects', by_project))}
