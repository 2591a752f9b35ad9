"""``memcanal.decision.*``: a notification for every change of a
decision's state, sent once the change is committed.

Every change of state is a DecisionEvent row (memcanal.db.decisions'
audit trail), whoever makes it: the optimizer and planners creating
decisions, an operator through the API, the service recording the
agents' results or failing what nobody answered. So notifications are
taken from those rows, in one place, rather than from each of the
places that move decisions: after a flush the new DecisionEvents of the
session are turned into notifications, with the decision they move read
on the same connection; after the commit they are sent; after a
rollback they are dropped. A change is notified by the process that
made it, exactly when it is made, and never one that did not happen.

Event types, by the state entered (EVENTS): recommended
``memcanal.decision.create``, approved ``.approve``, rejected
``.reject``, superseded ``.supersede``, applied ``.apply.end``, failed
``.apply.error`` (priority error), rolling_back ``.rollback.start``,
rolled_back ``.rollback.end``, rollback_failed ``.rollback.error``
(error). A migration is a decision of kind ``migration``: its host is
the VM's source, its peer host the destination.
"""

from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import orm

from memcanal.db import models
from memcanal.notifications import notifier
from memcanal.notifications import objects

LOG = logging.getLogger(__name__)
_PENDING = 'memcanal_notifications'

# State entered -> (action, phase, priority).
EVENTS = {
    'recommended': ('create', None, 'info'),
    'approved': ('approve', None, 'info'),
    'rejected': ('reject', None, 'info'),
    'superseded': ('supersede', None, 'info'),
    'applied': ('apply', 'end', 'info'),
    'failed': ('apply', 'error', 'error'),
    'rolling_back': ('rollback', 'start', 'info'),
    'rolled_back': ('rollback', 'end', 'info'),
    'rollback_failed': ('rollback', 'error', 'error'),
}


def _decision(connection, decision_id):
    """The decision's row with its host's and peer's uuid and name."""
    host, peer = (sa.orm.aliased(models.Host), sa.orm.aliased(models.Host))
    return connection.execute(
        sa.select(models.Decision.uuid, models.Decision.kind,
                  models.Decision.policy, models.Decision.mode,
                  host.uuid.label('host_uuid'), host.name.label('host_name'),
                  peer.uuid.label('peer_uuid'), peer.name.label('peer_name'))
        .join(host, host.id == models.Decision.host_id)
        .outerjoin(peer, peer.id == models.Decision.peer_host_id)
        .where(models.Decision.id == decision_id)).one()


def _instance_uuids(connection, decision_id):
    return list(connection.execute(
        sa.select(models.Instance.uuid).distinct()
        .join(models.Action, models.Action.instance_id == models.Instance.id)
        .where(models.Action.decision_id == decision_id)
        .order_by(models.Instance.uuid)).scalars())


def payload(connection, event):
    """The DecisionPayload of a flushed DecisionEvent."""
    row = _decision(connection, event.decision_id)
    return objects.DecisionPayload(
        uuid=row.uuid, kind=row.kind, policy=row.policy, mode=row.mode,
        state=event.to_state, previous_state=event.from_state,
        host_uuid=row.host_uuid, host_name=row.host_name,
        peer_host_uuid=row.peer_uuid, peer_host_name=row.peer_name,
        instance_uuids=_instance_uuids(connection, event.decision_id),
        user_id=event.user_id, project_id=event.project_id,
        reason=event.reason)


def _collect(session, _flush_context):
    if notifier.NOTIFIER is None:
        return
    events = sorted((obj for obj in session.new
                     if isinstance(obj, models.DecisionEvent)),
                    key=lambda event: event.id)
    if not events:
        return
    # Core statements on the session's connection: no autoflush inside
    # the flush, and they see the rows it wrote.
    connection = session.connection()
    pending = session.info.setdefault(_PENDING, [])
    for event in events:
        try:
            action, phase, priority = EVENTS[event.to_state]
            pending.append((objects.EventType(
                object='decision', action=action, phase=phase),
                payload(connection, event), priority))
        except Exception:
            # Raised here, it would fail the change itself.
            LOG.exception('No notification of decision %s entering %s',
                          event.decision_id, event.to_state)


def _send(session):
    for event_type, decision, priority in session.info.pop(_PENDING, []):
        try:
            notifier.emit(objects.DecisionNotification, event_type,
                               decision, priority)
        except Exception:
            # The change is committed; a lost notification must not
            # look like a failed change to whoever made it.
            LOG.exception('Could not notify %s of decision %s',
                          event_type.to_event_type(), decision.uuid)


def _drop(session):
    session.info.pop(_PENDING, None)


def install():
    """Listen to every session of the process (idempotent)."""
    for name, listener in (('after_flush', _collect),
                           ('after_commit', _send),
                           ('after_rollback', _drop)):
        if not sa.event.contains(orm.Session, name, listener):
            sa.event.listen(orm.Session, name, listener)


def uninstall():
    for name, listener in (('after_flush', _collect),
                           ('after_commit', _send),
                           ('after_rollback', _drop)):
        if sa.event.contains(orm.Session, name, listener):
            sa.event.remove(orm.Session, name, listener)
