"""``memcanal.decision.*``: a notification for every change of a
decision's state, sent once the change is committed.

Every change of state is a DecisionEvent row (memcanal.db.decisions'
audit trail), whoever makes it: the optimizer and planners creating
decisions, an operator through the API, the service recording the
agents' results or failing what nobody answered. So notifications are
taken from those rows, in one place, rather than from each of the
places that move decisions: after a flush, the session's new
DecisionEvents are queued (memcanal.notifications.transactional) with
the decision they move, read on the same connection.

Event types, by the state entered (EVENTS): recommended
``memcanal.decision.create``, approved ``.approve``, rejected
``.reject``, superseded ``.supersede``, applied ``.apply.end``, failed
``.apply.error`` (priority error), rolling_back ``.rollback.start``,
rolled_back ``.rollback.end``, rollback_failed ``.rollback.error``
(error). A migration is a decision of kind ``migration``: its host is
the VM's source, its peer host the destination.

One notification is no change of state: ``.apply.start`` (STARTED),
when an approved decision's first actions are claimed for sending
(memcanal.db.action_delivery.claim moves them from pending to sent),
none of its actions having left pending before. Its payload's state
and previous state are both ``approved``. Actions claimed but not sent
(the broker was down) go back to pending, so their decision's next
claim notifies it again.
"""

import sqlalchemy as sa

from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.notifications import objects
from memcanal.notifications import transactional

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
# An approved decision's first actions are claimed for sending.
STARTED = ('apply', 'start', 'info')


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


def _payload(connection, decision_id, state, previous_state,
             user_id=None, project_id=None, reason=None):
    row = _decision(connection, decision_id)
    return objects.DecisionPayload(
        uuid=row.uuid, kind=row.kind, policy=row.policy, mode=row.mode,
        state=state, previous_state=previous_state,
        host_uuid=row.host_uuid, host_name=row.host_name,
        peer_host_uuid=row.peer_uuid, peer_host_name=row.peer_name,
        instance_uuids=_instance_uuids(connection, decision_id),
        user_id=user_id, project_id=project_id, reason=reason)


def payload(connection, event):
    """The DecisionPayload of a flushed DecisionEvent."""
    return _payload(connection, event.decision_id, event.to_state,
                    event.from_state, event.user_id, event.project_id,
                    event.reason)


def _claimed(session):
    """{decision id: [action id]} of the actions the flush moved from
    pending to sent (their history is still there after the flush)."""
    claimed = {}
    for obj in session.dirty:
        if not isinstance(obj, models.Action):
            continue
        history = sa.inspect(obj).attrs.state.history
        if 'pending' in history.deleted and 'sent' in history.added:
            claimed.setdefault(obj.decision_id, []).append(obj.id)
    return claimed


def _starts(connection, decision_id, claimed_ids):
    """Whether claiming ``claimed_ids`` starts applying the decision:
    it is approved, and none of its forward actions but those had left
    pending."""
    state = connection.execute(
        sa.select(models.Decision.state)
        .where(models.Decision.id == decision_id)).scalar_one()
    if state != 'approved':
        return False
    return connection.execute(
        sa.select(models.Action.id).where(
            models.Action.decision_id == decision_id,
            models.Action.kind != decisions_db.RESTORE,
            models.Action.state != 'pending',
            models.Action.id.not_in(claimed_ids)).limit(1)).first() is None


def _collect_starts(session):
    action, phase, priority = STARTED
    for decision_id, claimed_ids in sorted(_claimed(session).items()):
        with transactional.logged('decision %s starting' % decision_id):
            connection = session.connection()
            if _starts(connection, decision_id, claimed_ids):
                transactional.queue(
                    session, objects.DecisionNotification,
                    objects.EventType(object='decision', action=action,
                                      phase=phase),
                    _payload(connection, decision_id, 'approved',
                             'approved'), priority)


def _collect(session, _flush_context):
    if not transactional.enabled():
        return
    _collect_starts(session)
    events = sorted((obj for obj in session.new
                     if isinstance(obj, models.DecisionEvent)),
                    key=lambda event: event.id)
    for event in events:
        with transactional.logged('decision %s entering %s' % (
                event.decision_id, event.to_state)):
            action, phase, priority = EVENTS[event.to_state]
            # Core statements on the session's connection: no autoflush
            # inside the flush, and they see the rows it wrote.
            transactional.queue(
                session, objects.DecisionNotification, objects.EventType(
                    object='decision', action=action, phase=phase),
                payload(session.connection(), event), priority)


LISTENERS = [('after_flush', _collect)]
