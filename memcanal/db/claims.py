"""Which of a report's instances its host may describe.

An agent speaks for its own host alone. Its report creates the instances
it is the first to name and updates those already on its host; an
instance memcanal has on another host moves to the reporting one only
once that host has let it go: its newest stored report omits it (and
it has reported since the instance was given to it with a report made
after: a migration memcanal applied gives a VM to its destination
before that host reports it, while the source's reports still list it,
and the report the destination was sending then may be one made before
the VM arrived), or it is down, or nova says the VM runs
on the reporting host (a live migration shows the VM on both hosts until
it ends; nova knows which runs it). A report never changes an
instance's project: nova never does. A report names no new instance
whose owner id (memcanal.owners.owner_of: 63 bits of its uuid, the key
of its pages on memory servers) another instance memcanal has, or one
named before it in the batch, holds: whoever names an id first keeps
it, so a lease token for it names one VM (doc/pooling.md). Entries that
break these rules are left out of the stored report, each with one of
the stable codes below; the rest of it is stored.
"""

import sqlalchemy as sa

from memcanal.db import models
from memcanal import owners

# The instance is on another host, which still lists it and is up.
ELSEWHERE = 'report.instance_elsewhere'
# The report names another project than the instance's.
PROJECT_CHANGED = 'report.project_changed'
# A new instance whose owner id another instance holds.
OWNER_COLLISION = 'report.owner_collision'

_INSTANCES = models.Instance.__table__
_HOSTS = models.Host.__table__
_HOST_REPORTS = models.HostReport.__table__
_INSTANCE_REPORTS = models.InstanceReport.__table__
# Uuids per IN (...) list, as memcanal.db.report_rows sends them.
_IN_CHUNK = 1000


def _known(connection, uuids):
    """The instances of ``uuids`` memcanal has, by uuid."""
    known = {}
    uuids = sorted(uuids)
    for start in range(0, len(uuids), _IN_CHUNK):
        for row in connection.execute(
                sa.select(_INSTANCES.c.id, _INSTANCES.c.uuid,
                          _INSTANCES.c.host_id, _INSTANCES.c.project_id,
                          _INSTANCES.c.deleted_at,
                          _INSTANCES.c.target_changed_at)
                .where(_INSTANCES.c.uuid.in_(uuids[start:start
                                                   + _IN_CHUNK]))):
            known[row.uuid] = row
    return known


def _owner_holders(connection, owner_ids):
    """{owner id: uuid} of the instances memcanal has holding
    ``owner_ids`` (one of them, should two from before 0015 share
    one)."""
    holders = {}
    owner_ids = sorted(owner_ids)
    for start in range(0, len(owner_ids), _IN_CHUNK):
        for row in connection.execute(
                sa.select(_INSTANCES.c.owner_id, _INSTANCES.c.uuid)
                .where(_INSTANCES.c.owner_id.in_(
                    owner_ids[start:start + _IN_CHUNK]))):
            holders.setdefault(row.owner_id, row.uuid)
    return holders


def _collisions(connection, reports, known):
    """{(host id, uuid): OWNER_COLLISION} of the new instances of
    ``reports`` whose owner id is held: by an instance memcanal has, or
    by one named before in the batch."""
    new = {sample['uuid'] for _host, report in reports
           for sample in report['instances']
           if sample['uuid'] not in known}
    if not new:
        return {}
    holders = _owner_holders(connection,
                             {owners.owner_of(uuid) for uuid in new})
    codes = {}
    for host_id, report in reports:
        for sample in report['instances']:
            uuid = sample['uuid']
            if uuid not in new:
                continue
            holder = holders.setdefault(owners.owner_of(uuid), uuid)
            if holder != uuid:
                codes[(host_id, uuid)] = OWNER_COLLISION
    return codes


def _still_listed(connection, instance_ids):
    """Of ``instance_ids``, those their host's newest report lists."""
    listed = set()
    instance_ids = sorted(instance_ids)
    for start in range(0, len(instance_ids), _IN_CHUNK):
        listed.update(connection.execute(
            sa.select(_INSTANCE_REPORTS.c.instance_id)
            .join(_HOST_REPORTS, _HOST_REPORTS.c.id
                  == _INSTANCE_REPORTS.c.host_report_id)
            .join(_HOSTS, sa.and_(
                _HOSTS.c.id == _HOST_REPORTS.c.host_id,
                _HOSTS.c.last_sequence == _HOST_REPORTS.c.sequence))
            .join(_INSTANCES, sa.and_(
                _INSTANCES.c.id == _INSTANCE_REPORTS.c.instance_id,
                _INSTANCES.c.host_id == _HOSTS.c.id))
            .where(_INSTANCE_REPORTS.c.instance_id.in_(
                instance_ids[start:start + _IN_CHUNK]))).scalars())
    return listed


def _holders(connection, host_ids, host_state):
    """Those of ``host_ids`` that are up."""
    return {row.id for row in connection.execute(
        sa.select(_HOSTS.c.id, _HOSTS.c.last_heartbeat_at,
                  _HOSTS.c.report_interval)
        .where(_HOSTS.c.id.in_(sorted(host_ids))))
        if host_state(row.last_heartbeat_at, row.report_interval) != 'down'}


# Reports of a migration's destination that may have been made before
# the VM arrived though stored after the migration was applied: the one
# an agent was sending then. The next is made with the VM there.
REPORTS_MADE_BEFORE = 1


def _reports_since(connection, host_id, since):
    """How many reports of the host were stored after ``since``, counted
    up to one more than REPORTS_MADE_BEFORE."""
    return len(connection.execute(
        sa.select(_HOST_REPORTS.c.id)
        .where(_HOST_REPORTS.c.host_id == host_id,
               _HOST_REPORTS.c.received_at > since)
        .limit(REPORTS_MADE_BEFORE + 1)).all())


def _held(connection, row, listed, holders):
    """Whether the up host holding ``row``'s instance keeps it: its
    newest report lists it, or it has not reported since it got it with
    a report made after (REPORTS_MADE_BEFORE)."""
    if row.host_id not in holders:
        return False
    return row.id in listed or (
        row.target_changed_at is not None
        and _reports_since(connection, row.host_id, row.target_changed_at)
        <= REPORTS_MADE_BEFORE)


def left_out(connection, reports, host_state):
    """{(host id, instance uuid): code} of the entries of ``reports``
    ((host id, validated report) pairs) their host may not describe.

    A report's ``moved_here`` (a set of uuids the service put there, never
    an agent: the report schema has no such field) names the VMs nova
    says run on the reporting host. ``host_state`` is
    memcanal.db.api.host_state. One query for a batch whose instances
    are all on their own hosts, as nearly all are.
    """
    known = _known(connection, {sample['uuid'] for _host, report in reports
                                for sample in report['instances']})
    codes, contested = _collisions(connection, reports, known), {}
    for host_id, report in reports:
        moved_here = report.get('moved_here', ())
        for sample in report['instances']:
            row = known.get(sample['uuid'])
            if row is None:
                continue
            key = (host_id, sample['uuid'])
            if row.project_id != sample['project_id']:
                codes[key] = PROJECT_CHANGED
            elif (row.host_id not in (None, host_id)
                  and row.deleted_at is None
                  and sample['uuid'] not in moved_here):
                contested[key] = row
    if contested:
        listed = _still_listed(connection,
                               {row.id for row in contested.values()})
        holders = _holders(connection,
                           {row.host_id for row in contested.values()},
                           host_state)
        codes.update((key, ELSEWHERE) for key, row in contested.items()
                     if _held(connection, row, listed, holders))
    return codes
