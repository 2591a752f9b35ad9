"""The rows a batch of reports becomes, written in a few statements.

memcanal.db.api.store_reports runs ``store`` inside its transaction: the
reports' hosts locked, the reports already stored told apart from fresh
ones, each fresh report's instances upserted (memcanal.db.claims leaving
out the entries its host may not describe), its instance reports
inserted many rows a statement with their JSON documents as text, and
the hosts' sequences, heartbeats and memory servers updated. Plain Core
statements built once per dialect: the ORM's unit of work took most of
a report's time.
"""

import functools
import json

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite

from memcanal.db import claims
from memcanal.db import models
from memcanal.db import replays
from memcanal import exception
from memcanal import owners
from memcanal.policy import guardrails

LOG = logging.getLogger(__name__)

_HOSTS = models.Host.__table__
_INSTANCES = models.Instance.__table__
_MEMORY_SERVERS = models.MemoryServer.__table__
_HOST_REPORTS = models.HostReport.__table__
_INSTANCE_REPORTS = models.InstanceReport.__table__
# What a report sets on each of its instances. Never target_bytes: only
# decisions set targets (memcanal.db.decisions), and a report collected
# before a resize may be stored after it.
_REPORTED_COLUMNS = ('host_id', 'project_id', 'allocated_bytes',
                     'observed_bytes', 'last_reported_at', 'deleted_at',
                     'flavor', 'wss_bytes', 'wss_low_bytes',
                     'wss_high_bytes', 'resident_bytes', 'paged_bytes')
# Uuids per IN (...) list: SQLite allows 32766 bound parameters in a
# statement, and a batch may describe more instances.
IN_CHUNK = 1000


def _lock_hosts(connection, host_uuids):
    """The reports' hosts by uuid, their rows locked for the transaction.

    Reports of one host then store one after the other, in this process
    or another: otherwise MariaDB deadlocks two of them, each holding the
    shared lock its host_reports foreign key took and waiting for the
    other's to update the host's last_sequence. One statement locks them
    all in the order of the index it walks, the same in every
    transaction, so two batches sharing hosts queue instead of
    deadlocking. MariaDB locks every row it reads, and reads them all when
    the uuids are many of a small table's unless told to use the index:
    every process's batches would then wait for each other. (PostgreSQL
    locks the rows it returns; SQLite has no row locks, BEGIN IMMEDIATE
    took the database's.)
    """
    statement = sa.select(
        _HOSTS.c.id, _HOSTS.c.uuid, _HOSTS.c.last_sequence,
        _HOSTS.c.folded_sequence).where(
            _HOSTS.c.uuid.in_(sorted(host_uuids))).with_for_update()
    for dialect in ('mysql', 'mariadb'):
        statement = statement.with_hint(
            _HOSTS, 'FORCE INDEX (uniq_hosts0uuid)', dialect)
    return {row.uuid: row for row in connection.execute(statement)}


def _already_stored(connection, host_ids, sequences):
    """(host id, sequence) pairs of these already stored (a superset
    query: exact pairs are filtered by the caller)."""
    return {tuple(row) for row in connection.execute(
        sa.select(_HOST_REPORTS.c.host_id, _HOST_REPORTS.c.sequence).where(
            _HOST_REPORTS.c.host_id.in_(host_ids),
            _HOST_REPORTS.c.sequence.in_(sequences)))}


def _kept_owner(new):
    """An updated instance's owner id: the one it has, or the new row's
    for one an older service inserted without (memcanal.owners; the
    same value either way, as it comes from the uuid)."""
    return sa.func.coalesce(_INSTANCES.c.owner_id, new.owner_id)


@functools.cache
def _upsert_statement(dialect, columns):
    """INSERT of instances that updates ``columns`` of those whose uuid
    exists: one statement for every instance of a batch, in the
    dialect's own upsert (SQLAlchemy builds each). An updated row's
    updated_at is the created_at the new row would have had (the batch's
    time): a bound value in ON DUPLICATE KEY UPDATE defeats PyMySQL's
    multi-row executemany.

    It returns (uuid, id) of every row, inserted or updated (all three
    databases do): no SELECT after it, and SQLAlchemy sends an upsert
    in multi-row INSERTs only when it returns rows (PostgreSQL's went
    one row per round trip without)."""
    if dialect in ('mysql', 'mariadb'):
        statement = mysql.insert(_INSTANCES)
        new = statement.inserted
        statement = statement.on_duplicate_key_update(
            [(column, new[column]) for column in columns]
            + [('owner_id', _kept_owner(new)),
               ('updated_at', new.created_at)])
    else:
        module = postgresql if dialect == 'postgresql' else sqlite
        statement = module.insert(_INSTANCES)
        new = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=['uuid'],
            set_=dict({column: new[column] for column in columns},
                      owner_id=_kept_owner(new), updated_at=new.created_at))
    return statement.returning(_INSTANCES.c.uuid, _INSTANCES.c.id)


def _upsert_instances(connection, rows, now):
    """Create or update the instances of ``rows`` (uuid: reported
    columns); returns their ids by uuid.

    A report describes: it sets what the agent observed, never the
    target, and lists the instance as present on its host, undeleting
    one that was thought gone. Rows go in uuid order, so concurrent
    batches take the uuid index's locks in one order.
    """
    return dict(connection.execute(
        _upsert_statement(connection.dialect.name, _REPORTED_COLUMNS),
        [dict(rows[uuid], uuid=uuid, owner_id=owners.owner_of(uuid),
              opt_out=False, created_at=now)
         for uuid in sorted(rows)]).all())


def _dumps(value):
    """JSON text of ``value``, None (SQL NULL) for None.

    orjson writes a report's curves several times faster than json.dumps,
    which SQLAlchemy's JSON type would use: a third of the time storing
    a report took. It has no 128-bit integers; json.dumps has.
    """
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


class _JSONText:
    """JSON text _dumps wrote, for PyMySQL to quote as _quote_json_text
    does rather than as any string.

    PyMySQL quotes a string with str.translate, which leaves its fast
    path at the first character it must escape: a JSON object's first
    double quote. A VM's curves then took 75 microseconds to quote
    instead of 2, more than everything else storing them on MariaDB.
    """

    __slots__ = ('text',)

    def __init__(self, text):
        self.text = text


def _quote_json_text(value, _mapping=None):
    # JSON text holds no control character (orjson and json.dumps escape
    # them all), so of what MySQL escapes only these two can occur.
    return "'%s'" % value.text.replace('\\', '\\\\').replace("'", "\\'")


@sa.event.listens_for(sa.engine.Engine, 'connect')
def _pymysql_quotes_json_text(dbapi_connection, _record):
    """Teach each PyMySQL connection to quote _JSONText."""
    if type(dbapi_connection).__module__.startswith('pymysql'):
        dbapi_connection.encoders[_JSONText] = _quote_json_text


class _MySQLJSONText(sa.types.TypeDecorator):
    """Text bound as _JSONText (MariaDB and MySQL through PyMySQL)."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else _JSONText(value)


def _insert(connection, table, json_columns=()):
    """INSERT into ``table`` whose ``json_columns`` take the text _dumps
    wrote rather than values for SQLAlchemy's JSON type to serialize
    (PostgreSQL is told that the text is JSON)."""
    return _insert_statement(connection.dialect.name,
                             connection.dialect.driver, table, json_columns)


@functools.cache
def _insert_statement(dialect, driver, table, json_columns):
    """_insert's statement, built once per dialect: built anew, its
    cache key took longer to compute than a batch's rows to send."""
    text_type = _MySQLJSONText() if driver == 'pymysql' else sa.Text()
    values = {}
    for name in json_columns:
        text = sa.bindparam(name, type_=text_type)
        values[name] = (sa.cast(text, postgresql.JSON)
                        if dialect == 'postgresql' else text)
    return sa.insert(table).values(values)


def _insert_returning_ids(connection, statement, rows, key):
    """Insert ``rows`` in multi-row INSERTs; their new ids, in order.

    Each row's id is found by ``key``, columns of a unique constraint,
    which RETURNING gives with it: asking for the ids in the rows' order
    instead (sort_by_parameter_order) made SQLAlchemy insert one row per
    statement on SQLite, which cannot promise that order.
    """
    table = statement.table
    ids = {tuple(row[1:]): row[0] for row in connection.execute(
        statement.returning(table.c.id, *[table.c[name] for name in key]),
        rows)}
    return [ids[tuple(row[name] for name in key)] for row in rows]


def _insert_reports(connection, fresh, now, host_state):
    """Every row of the reports in ``fresh`` ((host id, report) pairs)
    but their hosts', a few multi-row INSERTs per table for all; the
    entries left out (memcanal.db.claims), {(host id, uuid): code}."""
    left_out = claims.left_out(connection, fresh, host_state)
    if left_out:
        fresh = [(host_id, dict(report, instances=[
            sample for sample in report['instances']
            if (host_id, sample['uuid']) not in left_out]))
            for host_id, report in fresh]
    report_ids = _insert_returning_ids(connection, _insert(
        connection, _HOST_REPORTS), [
        {'host_id': host_id, 'sequence': report['sequence'],
         'collected_at': report['collected_at'], 'received_at': now}
        for host_id, report in fresh], ('host_id', 'sequence'))
    latest = {}  # A later report of the batch describes an instance last.
    for host_id, report in fresh:
        for sample in report['instances']:
            bounds = guardrails.preferred_bounds(
                sample.get('wss', {}), sample.get('wss_bounds')) or (None,
                                                                    None)
            latest[sample['uuid']] = {
                'host_id': host_id, 'project_id': sample['project_id'],
                'allocated_bytes': sample['allocated_bytes'],
                'observed_bytes': sample.get('observed_bytes'),
                'flavor': sample.get('flavor'),
                'wss_bytes': guardrails.preferred_wss(sample.get('wss', {})),
                'wss_low_bytes': bounds[0], 'wss_high_bytes': bounds[1],
                # A VM no pager holds is all resident: None for both.
                'resident_bytes': sample.get('paging', {}).get(
                    'resident_bytes'),
                'paged_bytes': sample.get('paging', {}).get('paged_bytes'),
                'last_reported_at': now, 'deleted_at': None}
    samples = [(report_id, report, sample)
               for report_id, (_host_id, report) in zip(report_ids, fresh)
               for sample in report['instances']]
    if not samples:  # Reports of hosts without VMs.
        return left_out
    instance_ids = _upsert_instances(connection, latest, now)
    connection.execute(_insert(
        connection, _INSTANCE_REPORTS,
        ('guest_stats', 'log_stats', 'wss', 'mrc', 'wss_bounds',
         'mrc_bands')), [
        {'host_report_id': report_id,
         'instance_id': instance_ids[sample['uuid']],
         'sequence': report['sequence'],
         'collected_at': report['collected_at'],
         'allocated_bytes': sample['allocated_bytes'],
         'guest_stats': _dumps(sample.get('guest_stats', {})),
         'log_stats': _dumps(sample.get('logs')),
         'wss': _dumps(sample.get('wss', {})),
         'mrc': _dumps(sample.get('mrc', {})),
         'wss_bounds': _dumps(sample.get('wss_bounds')),
         'mrc_bands': _dumps(sample.get('mrc_bands'))}
        for report_id, report, sample in samples])
    return left_out


def _update_hosts(connection, hosts, fresh, now):
    """Each host of ``fresh``: its highest stored sequence and a heartbeat.

    Its row is locked (_lock_hosts), so the last_sequence read with the
    lock is still the stored one.
    """
    last_sequences, zones = {}, {}
    for host_id, report in fresh:
        last_sequences[host_id] = max(
            last_sequences.get(host_id, hosts[host_id].last_sequence),
            report['sequence'])
        zones[host_id] = report.get('availability_zone') or zones.get(
            host_id)
    # A report without a zone (an older agent's) leaves the host's.
    connection.execute(
        sa.update(_HOSTS).where(_HOSTS.c.id == sa.bindparam('host'))
        .values(last_sequence=sa.bindparam('sequence'),
                last_heartbeat_at=now,
                availability_zone=sa.func.coalesce(
                    sa.bindparam('zone', type_=sa.String),
                    _HOSTS.c.availability_zone)),
        [{'host': host_id, 'sequence': sequence, 'zone': zones[host_id]}
         for host_id, sequence in sorted(last_sequences.items())])


def _register_memservers(connection, fresh, now):
    """Each memory server the reports of ``fresh`` register: created
    (disabled: it lends nothing until an operator enables it), or its
    address and capacity and what it holds updated; a host's latest
    report of the batch wins. A report without one changes nothing (a
    lease outlives a report that missed the server).

    Capacity is taken as reported: it is the host's own memory, and
    pooling never lends past it. A new address disables the server
    again: the operator enabled lending to the server there, which the
    pagers' TLS and lease tokens name; the address is logged.
    """
    latest = {host_id: report for host_id, report in fresh
              if report.get('memserver')}
    if not latest:
        return
    known = {row.host_id: row for row in connection.execute(
        sa.select(_MEMORY_SERVERS.c.host_id, _MEMORY_SERVERS.c.address,
                  _MEMORY_SERVERS.c.enabled)
        .where(_MEMORY_SERVERS.c.host_id.in_(sorted(latest))))}
    for host_id, report in sorted(latest.items()):
        server = report['memserver']
        values = {'address': server['address'],
                  'capacity_bytes': server['capacity_bytes'],
                  'used_bytes': server.get('used_bytes', 0)}
        row = known.get(host_id)
        if row is None:
            connection.execute(sa.insert(_MEMORY_SERVERS).values(
                host_id=host_id, uuid=uuidutils.generate_uuid(),
                enabled=False, created_at=now, **values))
            LOG.info('Memory server %s of host %s registered, disabled '
                     'until an operator enables it', server['address'],
                     report['host_uuid'])
            continue
        if row.address != server['address'] and row.enabled:
            values['enabled'] = False
            LOG.warning('Memory server of host %s moved from %s to %s; '
                        'disabled until an operator enables it again',
                        report['host_uuid'], row.address, server['address'])
        connection.execute(
            sa.update(_MEMORY_SERVERS)
            .where(_MEMORY_SERVERS.c.host_id == host_id)
            .values(updated_at=now, **values))


def store(connection, reports, host_state):
    """memcanal.db.api.store_reports' work, inside its transaction;
    ``host_state`` is memcanal.db.api.host_state (claims asks which
    hosts are down). A report not stored but at or below what retention
    folded of its host is refused (memcanal.db.replays)."""
    hosts = _lock_hosts(connection, {r['host_uuid'] for r in reports})
    stored = _already_stored(
        connection, [host.id for host in hosts.values()],
        {r['sequence'] for r in reports}) if hosts else set()
    outcomes, fresh = [], []
    for report in reports:
        host = hosts.get(report['host_uuid'])
        if host is None:
            outcomes.append(exception.HostNotFound(host=report['host_uuid']))
            continue
        key = (host.id, report['sequence'])
        replayed = key not in stored and replays.replayed_report(host,
                                                                 report)
        if replayed:
            outcomes.append(replayed)
            continue
        outcomes.append(key not in stored)
        if key not in stored:
            stored.add(key)
            fresh.append((host.id, report))
    if fresh:
        now = timeutils.utcnow()
        left_out = _insert_reports(connection, fresh, now, host_state)
        _update_hosts(connection, {host.id: host for host in hosts.values()},
                      fresh, now)
        _register_memservers(connection, fresh, now)
        for index, report in enumerate(reports):
            if outcomes[index] is not True:
                continue
            host_id = hosts[report['host_uuid']].id
            ours = {sample['uuid']: left_out[host_id, sample['uuid']]
                    for sample in report['instances']
                    if (host_id, sample['uuid']) in left_out}
            if ours:
                outcomes[index] = ours
    return outcomes
