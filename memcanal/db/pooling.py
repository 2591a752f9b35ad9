"""Database API of memory pooling: the memory servers hosts run, and the
memory each lends to the VMs of other hosts.

Agents register their host's memory server with every report
(memcanal.db.api stores it); leases are made and ended only by pooling
decisions (memcanal.db.decisions), under the locks of both hosts.
"""

import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models


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


@db_api.context_manager.reader
def list_memory_servers(context):
    """Every memory server with its host, its capacity, what it holds,
    what it lends (``lent_bytes``, ``free_bytes``: capacity less lent)
    and to whom (``leases``)."""
    session = context.session
    leases = _leases_by_server(session)
    servers = []
    for server, host in session.execute(
            sa.select(models.MemoryServer, models.Host)
            .join(models.Host, models.Host.id == models.MemoryServer.host_id)
            .order_by(models.Host.name)):
        lent = sum(lease['lent_bytes'] for lease in leases.get(server.id, []))
        servers.append({
            'id': server.id,
            'host_uuid': host.uuid,
            'host_name': host.name,
            'host_state': db_api.host_state(host.last_heartbeat_at,
                                            host.report_interval),
            'address': server.address,
            'capacity_bytes': server.capacity_bytes,
            'used_bytes': server.used_bytes,
            'lent_bytes': lent,
            'free_bytes': max(server.capacity_bytes - lent, 0),
            'leases': leases.get(server.id, []),
            'created_at': server.created_at,
            'updated_at': server.updated_at,
        })
    return servers


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


def set_lease(session, instance, server_id, lent_bytes, decision_uuid):
    """Lend ``lent_bytes`` of the server to the VM (replacing a lease it
    had); 0 bytes ends its lease."""
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
    """End the leases of VMs deleted since (their pages went with them);
    returns how many."""
    gone = sa.select(models.Instance.uuid).where(
        models.Instance.deleted_at.is_not(None))
    return context.session.execute(
        sa.delete(models.MemoryLease).where(
            models.MemoryLease.instance_uuid.in_(gone))).rowcount
