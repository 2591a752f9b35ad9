"""Database API of memory pooling: the memory servers hosts run, and the
memory each lends to the VMs of other hosts.

Agents register their host's memory server with every report
(memcanal.db.api stores it), disabled until an operator enables it;
leases are made and ended only by pooling decisions
(memcanal.db.action_delivery applies them), under the locks of both
hosts, only on enabled servers, and only between hosts an operator
admitted to pooling (set_admitted): a host registers on first use with
a key of its own, so its name proves nothing an operator vouched for.
"""

import calendar

from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models
from memcanal import exception


def _lease_dict(lease, borrower_uuid, borrower_name):
    return {
        'instance_uuid': lease.instance_uuid,
        'borrower_host_uuid': borrower_uuid,
        'borrower_host_name': borrower_name,
        'lent_bytes': lease.lent_bytes,
        'decision_uuid': lease.decision_uuid,
        'created_at': lease.created_at,
    }


def _leases_by_server(session):
    borrower = sa.orm.aliased(models.Host)
    leases = {}
    for lease, uuid, name in session.execute(
            sa.select(models.MemoryLease, borrower.uuid, borrower.name)
            .join(borrower, borrower.id == models.MemoryLease.borrower_host_id)
            .order_by(models.MemoryLease.id)):
        leases.setdefault(lease.memory_server_id, []).append(
            _lease_dict(lease, uuid, name))
    return leases


def _server_dict(server, host, leases):
    lent = sum(lease['lent_bytes'] for lease in leases)
    return {
        'id': server.id,
        'uuid': server.uuid,
        'host_uuid': host.uuid,
        'host_name': host.name,
        'host_state': db_api.host_state(host.last_heartbeat_at,
                                        host.report_interval),
        'address': server.address,
        'enabled': server.enabled,
        'capacity_bytes': server.capacity_bytes,
        'used_bytes': server.used_bytes,
        'lent_bytes': lent,
        # What pooling may still lend from it: nothing while disabled.
        'free_bytes': max(server.capacity_bytes - lent, 0)
        if server.enabled else 0,
        'leases': leases,
        'created_at': server.created_at,
        'updated_at': server.updated_at,
    }


def _servers(session, *conditions):
    leases = _leases_by_server(session)
    return [_server_dict(server, host, leases.get(server.id, []))
            for server, host in session.execute(
                sa.select(models.MemoryServer, models.Host)
                .join(models.Host,
                      models.Host.id == models.MemoryServer.host_id)
                .where(*conditions).order_by(models.Host.name))]


@db_api.context_manager.reader
def list_memory_servers(context):
    """Every memory server with its host, whether an operator enabled
    it, its capacity, what it holds, what it lends (``lent_bytes``,
    ``free_bytes``: what it may still lend, its capacity less what it
    lends, 0 while disabled) and to whom (``leases``)."""
    return _servers(context.session)


@db_api.retry_on_conflict
@db_api.context_manager.writer
def set_enabled(context, server_uuid, enabled):
    """Let pooling lend from the memory server, or stop it (its leases
    stay until their VMs are taken back); returns the server as
    list_memory_servers shows it."""
    updated = context.session.execute(
        sa.update(models.MemoryServer)
        .where(models.MemoryServer.uuid == server_uuid)
        .values(enabled=enabled)).rowcount
    if not updated:
        raise exception.MemoryServerNotFound(uuid=server_uuid)
    [server] = _servers(context.session,
                        models.MemoryServer.uuid == server_uuid)
    return server


@db_api.retry_on_conflict
@db_api.context_manager.writer
def set_admitted(context, host_uuid, admitted):
    """Admit the host to memory pooling (its VMs may borrow, its memory
    server may lend once enabled), or stop it (what it lends or borrows
    stays until its VMs are taken back, as a disabled server's leases).

    Whether a host is admitted decides pooling decisions, which read it
    under the host's row lock (memcanal.db.decisions): so this takes
    that lock first, before reading anything, and a decision being
    recorded for the host either sees the change or is recorded before
    it. HostNotFound for an unknown host."""
    host = context.session.execute(
        sa.select(models.Host).where(models.Host.uuid == host_uuid)
        .with_for_update()).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=host_uuid)
    host.pooling_admitted = admitted


def owner_is_alone(session, instance):
    """Whether no other instance memcanal has holds the VM's owner id
    (memcanal.owners): only then may a lease token name it. Two VMs
    from before 0015 may share one; memcanal.db.claims keeps any new
    VM from taking a held one."""
    if instance.owner_id is None:
        return False
    return session.execute(
        sa.select(models.Instance.id).where(
            models.Instance.owner_id == instance.owner_id,
            models.Instance.id != instance.id).limit(1)
    ).scalar_one_or_none() is None


def lease_of(session, instance_uuid):
    """The VM's lease, or None."""
    return session.execute(
        sa.select(models.MemoryLease).where(
            models.MemoryLease.instance_uuid == instance_uuid)
    ).scalar_one_or_none()


def server_on(session, host_id):
    """The memory server of the host, or None."""
    return session.execute(
        sa.select(models.MemoryServer).where(
            models.MemoryServer.host_id == host_id)).scalar_one_or_none()


def lent_by(session, server_id):
    """What the memory server lends now."""
    return session.execute(
        sa.select(sa.func.coalesce(sa.func.sum(
            models.MemoryLease.lent_bytes), 0))
        .where(models.MemoryLease.memory_server_id == server_id)
    ).scalar_one()


def _revoke(session, leases):
    """Record that ``leases`` (MemoryLease rows) ended now: each
    lender's agent is told to revoke it (memcanal.service.lease_upkeep)."""
    now = timeutils.utcnow()
    for lease in leases:
        server = session.get(models.MemoryServer, lease.memory_server_id)
        session.add(models.LeaseRevocation(
            lender_host_id=server.host_id,
            instance_uuid=lease.instance_uuid, revoked_at=now))


def set_lease(session, instance, server_id, lent_bytes, decision_uuid):
    """Lend ``lent_bytes`` of the server to the VM (replacing a lease it
    had); 0 bytes ends its lease. A lease that ends, or moves to another
    server, is revoked on its server; one the same server lends anew
    keeps its pages there (its tokens expire on their own)."""
    old = lease_of(session, instance.uuid)
    if old is not None and (lent_bytes <= 0
                            or old.memory_server_id != server_id):
        _revoke(session, [old])
    session.execute(sa.delete(models.MemoryLease).where(
        models.MemoryLease.instance_uuid == instance.uuid))
    if lent_bytes > 0:
        session.add(models.MemoryLease(
            memory_server_id=server_id, borrower_host_id=instance.host_id,
            instance_uuid=instance.uuid, decision_uuid=decision_uuid,
            lent_bytes=lent_bytes))


@db_api.retry_on_conflict
@db_api.context_manager.writer
def end_leases_of_gone(context):
    """End the leases of VMs deleted since (their pages went with them,
    and their lenders revoke them); returns how many."""
    gone = sa.select(models.Instance.uuid).where(
        models.Instance.deleted_at.is_not(None))
    ended = context.session.execute(
        sa.select(models.MemoryLease).where(
            models.MemoryLease.instance_uuid.in_(gone))).scalars().all()
    _revoke(context.session, ended)
    for lease in ended:
        context.session.delete(lease)
    return len(ended)


@db_api.context_manager.reader
def live_leases(context):
    """The leases whose borrower is up, to renew their tokens: dicts of
    lease_uuid (the action that made the lease: its tokens' uuid, so
    the server keeps one account for it), instance_uuid, lent_bytes,
    borrower (host name) and address (the memory server's)."""
    borrower = sa.orm.aliased(models.Host)
    rows = context.session.execute(
        sa.select(models.Action.uuid, models.MemoryLease.instance_uuid,
                  models.MemoryLease.lent_bytes, borrower.name,
                  borrower.last_heartbeat_at, borrower.report_interval,
                  models.MemoryServer.address)
        .join(models.MemoryServer,
              models.MemoryServer.id == models.MemoryLease.memory_server_id)
        .join(borrower, borrower.id == models.MemoryLease.borrower_host_id)
        .join(models.Decision,
              models.Decision.uuid == models.MemoryLease.decision_uuid)
        .join(models.Instance,
              models.Instance.uuid == models.MemoryLease.instance_uuid)
        .join(models.Action, sa.and_(
            models.Action.decision_id == models.Decision.id,
            models.Action.instance_id == models.Instance.id))
        .order_by(models.MemoryLease.id))
    return [{'lease_uuid': lease_uuid, 'instance_uuid': instance_uuid,
             'lent_bytes': lent, 'borrower': name, 'address': address}
            for (lease_uuid, instance_uuid, lent, name, heartbeat,
                 interval, address) in rows
            if db_api.host_state(heartbeat, interval) == 'up']


@db_api.retry_on_conflict
@db_api.context_manager.writer
def revocations(context, forget_before):
    """{lender host name: [{instance_uuid, revoked_at (unix seconds)}]}
    of the leases ended since ``forget_before`` (a datetime); those
    ended before are forgotten (their tokens have expired)."""
    context.session.execute(sa.delete(models.LeaseRevocation).where(
        models.LeaseRevocation.revoked_at < forget_before))
    ended = {}
    for instance_uuid, revoked_at, name in context.session.execute(
            sa.select(models.LeaseRevocation.instance_uuid,
                      models.LeaseRevocation.revoked_at, models.Host.name)
            .join(models.Host,
                  models.Host.id == models.LeaseRevocation.lender_host_id)
            .order_by(models.LeaseRevocation.id)):
        ended.setdefault(name, []).append({
            'instance_uuid': instance_uuid,
            'revoked_at': int(calendar.timegm(revoked_at.timetuple()))})
    return ended
