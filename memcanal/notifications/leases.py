"""``memcanal.lease.create`` and ``memcanal.lease.end``: a memory server
starts or stops lending memory to a VM of another host.

Leases are rows of memory_leases, written by memcanal.db.pooling as a
pooling decision's page action ends (and ended when their VM is gone):
added as ORM objects, so a flush shows the new ones; deleted by DELETE
statements, so the rows such a statement is about to delete are read
just before it runs. Changing a VM's lease replaces its row: an end,
then a create. Sent once the transaction commits
(memcanal.notifications.transactional).
"""

import sqlalchemy as sa

from memcanal.db import models
from memcanal.notifications import objects
from memcanal.notifications import transactional


def _leases(connection, *conditions):
    """LeasePayloads of the leases matching ``conditions``."""
    lender = sa.orm.aliased(models.Host)
    borrower = sa.orm.aliased(models.Host)
    rows = connection.execute(
        sa.select(models.MemoryLease.instance_uuid,
                  models.MemoryLease.decision_uuid,
                  models.MemoryLease.lent_bytes,
                  models.MemoryServer.uuid.label('server_uuid'),
                  lender.uuid.label('lender_uuid'),
                  lender.name.label('lender_name'),
                  borrower.uuid.label('borrower_uuid'),
                  borrower.name.label('borrower_name'))
        .join(models.MemoryServer, models.MemoryServer.id
              == models.MemoryLease.memory_server_id)
        .join(lender, lender.id == models.MemoryServer.host_id)
        .join(borrower, borrower.id == models.MemoryLease.borrower_host_id)
        .where(*conditions).order_by(models.MemoryLease.id))
    return [objects.LeasePayload(
        instance_uuid=row.instance_uuid, decision_uuid=row.decision_uuid,
        lent_bytes=row.lent_bytes, memory_server_uuid=row.server_uuid,
        lender_host_uuid=row.lender_uuid, lender_host_name=row.lender_name,
        borrower_host_uuid=row.borrower_uuid,
        borrower_host_name=row.borrower_name) for row in rows]


def _queue(session, action, leases):
    for lease in leases:
        transactional.queue(
            session, objects.LeaseNotification,
            objects.EventType(object='lease', action=action), lease, 'info')


def _created(session, _flush_context):
    if not transactional.enabled():
        return
    ids = [obj.id for obj in session.new
           if isinstance(obj, models.MemoryLease)]
    if ids:
        with transactional.logged('leases made'):
            _queue(session, 'create', _leases(
                session.connection(), models.MemoryLease.id.in_(ids)))


def _ending(execute_state):
    """Before a DELETE of memory_leases: the leases it ends."""
    if not (transactional.enabled() and execute_state.is_delete):
        return
    statement = execute_state.statement
    if getattr(statement.table, 'name', None) != (
            models.MemoryLease.__tablename__):
        return
    with transactional.logged('leases ending'):
        where = statement.whereclause
        _queue(execute_state.session, 'end', _leases(
            execute_state.session.connection(),
            *([] if where is None else [where])))


LISTENERS = [('after_flush', _created), ('do_orm_execute', _ending)]
