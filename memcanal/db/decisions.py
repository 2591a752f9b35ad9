"""Database API of decisions, their actions and their history.

A decision is the optimizer's proposal for one host: new memory targets
for some of its VMs, with the policy, inputs and predictions behind them.
Its life:

    recommended --approve--> approved --(agent results)--> applied | failed
    recommended --reject--> rejected
    recommended --(a newer decision for the host)--> superseded
    applied | failed --rollback--> rolling_back --> rolled_back
                                                  | rollback_failed

Every change of state is a DecisionEvent with who made it (None: the
service itself) and when, so an operator can audit what happened.

What decides the host's VMs happens under the host's row lock (SELECT
... FOR UPDATE on hosts), taken first by every function that creates,
approves or rolls back a decision: of two optimizers, or an approval
racing the optimizer, one waits for the other and then sees what it did,
so at most one decision of a host is ever being carried out.
"""

from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models
from memcanal import exception
from memcanal.policy import guardrails

# What a user may ask of a decision: (states it may be in, state it goes to).
DECISION_TRANSITIONS = {
    'approve': (('recommended',), 'approved'),
    'reject': (('recommended',), 'rejected'),
    'rollback': (('applied', 'failed'), 'rolling_back'),
}
# States whose actions are being carried out, with the kind of those
# actions and the states the decision ends in (all applied, otherwise).
IN_FLIGHT = {
    'approved': ('set_target', 'applied', 'failed'),
    'rolling_back': ('restore', 'rolled_back', 'rollback_failed'),
}
OPEN_ACTION_STATES = ('pending', 'sent')
# Decisions whose actions changed, or are changing, some VM's target: a
# decision older than one of these may no longer be rolled back.
CHANGED_TARGETS = ('approved', 'applied', 'failed', 'rolling_back',
                   'rollback_failed')


def _event_dict(event):
    return {
        'from_state': event.from_state,
        'to_state': event.to_state,
        'user_id': event.user_id,
        'project_id': event.project_id,
        'reason': event.reason,
        'created_at': event.created_at,
    }


def _action_dict(action, instance_uuid):
    return {
        'uuid': action.uuid,
        'kind': action.kind,
        'instance_uuid': instance_uuid,
        'target_bytes': action.params['target_bytes'],
        'previous_bytes': action.params['previous_bytes'],
        'mechanism': action.params['mechanism'],
        'state': action.state,
        'error': action.error,
        'result': action.result,
        'updated_at': action.updated_at,
    }


def _decision_dict(session, decision, host_uuid, with_details=True):
    result = {
        'uuid': decision.uuid,
        'host_uuid': host_uuid,
        'kind': decision.kind,
        'policy': decision.policy,
        'mode': decision.mode,
        'state': decision.state,
        'outputs': decision.outputs,
        'created_at': decision.created_at,
        'updated_at': decision.updated_at,
    }
    if with_details:
        result['inputs'] = decision.inputs
        result['actions'] = [
            _action_dict(action, instance_uuid)
            for action, instance_uuid in session.execute(
                sa.select(models.Action, models.Instance.uuid)
                .join(models.Instance,
                      models.Action.instance_id == models.Instance.id)
                .where(models.Action.decision_id == decision.id)
                .order_by(models.Action.id)).all()]
        result['events'] = [_event_dict(e) for e in session.execute(
            sa.select(models.DecisionEvent)
            .where(models.DecisionEvent.decision_id == decision.id)
            .order_by(models.DecisionEvent.id)).scalars()]
    return result


def _move(session, decision, to_state, user_id=None, project_id=None,
          reason=None):
    session.add(models.DecisionEvent(
        decision_id=decision.id, from_state=decision.state,
        to_state=to_state, user_id=user_id, project_id=project_id,
        reason=reason))
    decision.state = to_state


def _lock_host(session, host_uuid=None, host_id=None):
    """The host's row, locked until the transaction ends (a no-op on
    SQLite, where BEGIN IMMEDIATE already serialises writers)."""
    query = sa.select(models.Host).with_for_update()
    query = query.where(models.Host.uuid == host_uuid if host_id is None
                        else models.Host.id == host_id)
    host = session.execute(query).scalar_one_or_none()
    if host is None:
        raise exception.HostNotFound(host=host_uuid or host_id)
    return host


def _check_not_busy(session, host, decision_id=None):
    """HostBusy if a decision of the host (other than ``decision_id``) is
    being carried out."""
    busy = session.execute(
        sa.select(models.Decision.uuid).where(
            models.Decision.host_id == host.id,
            models.Decision.id != (decision_id or 0),
            models.Decision.state.in_(list(IN_FLIGHT)))
        .limit(1)).scalar_one_or_none()
    if busy is not None:
        raise exception.HostBusy(busy=busy, host=host.name)


def _current_bytes(instance):
    return instance.target_bytes or instance.allocated_bytes


@db_api.retry_on_conflict
@db_api.context_manager.writer
def create_decision(context, host_uuid, kind, policy, mode, inputs, outputs,
                    changes):
    """Record a decision for a host and an action per VM it changes;
    returns it, or None when no VM would change.

    ``changes`` are dicts of instance_uuid, target_bytes, previous_bytes
    and mechanism. Under the host's lock, each change's previous size is
    taken from the instance as decisions left it (not from what the
    caller read before), and a change to the size a VM already has is
    dropped: a decision identical to the state applied is not recorded.
    HostBusy while another decision of the host is being carried out.
    Older decisions of the host still waiting for an operator are
    superseded: only the newest reflects the VMs as they are. In
    ``auto`` mode the decision is approved at once.
    """
    session = context.session
    host = _lock_host(session, host_uuid)
    _check_not_busy(session, host)
    instances = {instance.uuid: instance for instance in session.execute(
        sa.select(models.Instance).where(
            models.Instance.uuid.in_(
                [change['instance_uuid'] for change in changes]),
            models.Instance.host_id == host.id,
            models.Instance.deleted_at.is_(None))).scalars()}
    changes = [dict(change, previous_bytes=_current_bytes(
        instances[change['instance_uuid']])) for change in changes
        if change['instance_uuid'] in instances
        and change['target_bytes'] != _current_bytes(
            instances[change['instance_uuid']])]
    if not changes:
        return None
    for waiting in session.execute(
            sa.select(models.Decision).where(
                models.Decision.host_id == host.id,
                models.Decision.state == 'recommended')).scalars():
        _move(session, waiting, 'superseded', reason='A newer decision '
              'was made for the host.')
    decision = models.Decision(
        uuid=uuidutils.generate_uuid(), host_id=host.id, kind=kind,
        policy=policy, mode=mode, inputs=inputs, outputs=outputs,
        state='recommended')
    session.add(decision)
    session.flush()
    session.add(models.DecisionEvent(decision_id=decision.id,
                                     to_state='recommended'))
    for change in changes:
        session.add(models.Action(
            uuid=uuidutils.generate_uuid(), decision_id=decision.id,
            host_id=host.id,
            instance_id=instances[change['instance_uuid']].id,
            kind='set_target',
            state='pending', params={
                'target_bytes': change['target_bytes'],
                'previous_bytes': change['previous_bytes'],
                'mechanism': change['mechanism']}))
    if mode == 'auto':
        _move(session, decision, 'approved', reason='Auto mode.')
    session.flush()
    return _decision_dict(session, decision, host_uuid)


def _decision_query():
    return (sa.select(models.Decision, models.Host.uuid)
            .outerjoin(models.Host, models.Decision.host_id == models.Host.id))


def _get(session, decision_uuid, for_update=False):
    query = _decision_query().where(models.Decision.uuid == decision_uuid)
    if for_update:
        query = query.with_for_update(of=models.Decision)
    row = session.execute(query).first()
    if row is None:
        raise exception.DecisionNotFound(uuid=decision_uuid)
    return row


@db_api.context_manager.reader
def get_decision(context, decision_uuid):
    """One decision with its inputs, actions and events."""
    decision, host_uuid = _get(context.session, decision_uuid)
    return _decision_dict(context.session, decision, host_uuid)


@db_api.context_manager.reader
def list_decisions(context, host_uuid=None, state=None, limit=None,
                   marker=None):
    """Decisions newest first, without inputs, actions or events;
    ``marker`` is the uuid of the last decision of the previous page."""
    session = context.session
    query = _decision_query().order_by(models.Decision.id.desc())
    if host_uuid is not None:
        query = query.where(models.Host.uuid == host_uuid)
    if state is not None:
        query = query.where(models.Decision.state == state)
    if marker is not None:
        marker_id = session.execute(
            sa.select(models.Decision.id).where(
                models.Decision.uuid == marker)).scalar_one_or_none()
        if marker_id is None:
            raise exception.MarkerNotFound(marker=marker)
        query = query.where(models.Decision.id < marker_id)
    if limit is not None:
        query = query.limit(limit)
    return [_decision_dict(session, decision, h_uuid, with_details=False)
            for decision, h_uuid in session.execute(query).all()]


def _open_actions(session, decision_id, kind):
    return session.execute(
        sa.select(models.Action).where(
            models.Action.decision_id == decision_id,
            models.Action.kind == kind,
            models.Action.state.in_(OPEN_ACTION_STATES))).scalars().all()


def _check_not_superseded(session, decision):
    """DecisionSuperseded if a newer decision of the host changed (or is
    changing) VMs since ``decision``."""
    newer = session.execute(
        sa.select(models.Decision).where(
            models.Decision.host_id == decision.host_id,
            models.Decision.id > decision.id,
            models.Decision.state.in_(CHANGED_TARGETS))
        .order_by(models.Decision.id.desc()).limit(1)).scalar_one_or_none()
    if newer is not None:
        raise exception.DecisionSuperseded(
            uuid=decision.uuid, newer=newer.uuid, newer_state=newer.state)


def _floor(session, instance, rails):
    """The VM's floor now (guardrails.floor_of): its latest measured
    working set plus the kernel, or the operator's floor."""
    latest = session.execute(
        sa.select(models.InstanceReport.id)
        .where(models.InstanceReport.instance_id == instance.id)
        .order_by(models.InstanceReport.id.desc()).limit(1)
    ).scalar_one_or_none()
    wss = dict(session.execute(
        sa.select(models.WssEstimate.estimator, models.WssEstimate.wss_bytes)
        .where(models.WssEstimate.instance_report_id == latest)).all()
    ) if latest is not None else {}
    return guardrails.floor_of(guardrails.Limits(
        memory_bytes=_current_bytes(instance),
        wss_bytes=guardrails.preferred_wss(wss),
        floor_bytes=instance.floor_bytes,
        ceiling_bytes=instance.ceiling_bytes), rails)


def _add_restores(session, decision, rails):
    """A restore action for every target the decision applied, back to
    the size before it but never below the VM's floor now; returns how
    many. A VM deleted since, or already at that size, needs none."""
    applied = session.execute(
        sa.select(models.Action, models.Instance)
        .join(models.Instance,
              models.Action.instance_id == models.Instance.id)
        .where(models.Action.decision_id == decision.id,
               models.Action.kind == 'set_target',
               models.Action.state == 'applied',
               models.Instance.deleted_at.is_(None))).all()
    restores = 0
    for action, instance in applied:
        target = max(action.params['previous_bytes'],
                     _floor(session, instance, rails))
        if target == _current_bytes(instance):
            continue
        session.add(models.Action(
            uuid=uuidutils.generate_uuid(), decision_id=decision.id,
            host_id=action.host_id, instance_id=action.instance_id,
            kind='restore', state='pending', params={
                'target_bytes': target,
                'previous_bytes': _current_bytes(instance),
                'mechanism': action.params['mechanism']}))
        restores += 1
    return restores


@db_api.retry_on_conflict
@db_api.context_manager.writer
def request_transition(context, decision_uuid, request, reason=None,
                       rails=None):
    """Approve, reject or roll back a decision on behalf of the context's
    user, under its host's lock.

    DecisionStateConflict when its state does not allow it; HostBusy to
    approve or roll back while another decision of the host is being
    carried out; DecisionSuperseded to roll back a decision a newer one
    changed since. A rollback restores every VM the decision changed to
    the target it had before, never below its floor (``rails``, a
    guardrails.Rails, gives the kernel's footprint); one with nothing to
    restore is rolled back at once.
    """
    session = context.session
    # The host's lock first, as create_decision takes it, so the two
    # never wait for each other in opposite orders.
    host_id = session.execute(
        sa.select(models.Decision.host_id).where(
            models.Decision.uuid == decision_uuid)).scalar_one_or_none()
    if host_id is not None:
        host = _lock_host(session, host_id=host_id)
    decision, host_uuid = _get(session, decision_uuid, for_update=True)
    allowed_from, to_state = DECISION_TRANSITIONS[request]
    if decision.state not in allowed_from:
        raise exception.DecisionStateConflict(
            uuid=decision_uuid, state=decision.state,
            requested={'approve': 'approved', 'reject': 'rejected',
                       'rollback': 'rolled back'}[request])
    if request != 'reject' and decision.host_id is not None:
        _check_not_busy(session, host, decision.id)
    if request == 'rollback':
        _check_not_superseded(session, decision)
    _move(session, decision, to_state, context.user_id, context.project_id,
          reason)
    if request == 'rollback' and not _add_restores(
            session, decision, rails or guardrails.Rails()):
        _move(session, decision, 'rolled_back',
              reason='The decision left nothing to restore.')
    session.flush()
    return _decision_dict(session, decision, host_uuid)


def _batches(session, *conditions):
    """Actions of decisions being carried out that match ``conditions``,
    as one batch per decision: dicts of decision_uuid, host (its name,
    the agent's RPC server) and actions."""
    rows = session.execute(
        sa.select(models.Decision.uuid, models.Host.name, models.Action,
                  models.Instance.uuid)
        .join(models.Action, models.Action.decision_id == models.Decision.id)
        .join(models.Host, models.Decision.host_id == models.Host.id)
        .join(models.Instance,
              models.Action.instance_id == models.Instance.id)
        .where(models.Decision.state.in_(list(IN_FLIGHT)), *conditions)
        .order_by(models.Decision.id, models.Action.id)).all()
    batches = {}
    for decision_uuid, host_name, action, instance_uuid in rows:
        batches.setdefault(decision_uuid, {
            'decision_uuid': decision_uuid, 'host': host_name,
            'actions': []})['actions'].append({
                'uuid': action.uuid, 'instance_uuid': instance_uuid,
                'target_bytes': action.params['target_bytes'],
                'mechanism': action.params['mechanism']})
    return list(batches.values())


@db_api.context_manager.reader
def actions_to_send(context):
    """Batches (see _batches) of the actions not yet sent."""
    return _batches(context.session, models.Action.state == 'pending')


@db_api.context_manager.reader
def unanswered_actions(context, sent_before):
    """Batches (see _batches) of the actions sent before ``sent_before``
    that no agent answered: the dispatcher sends them again (at least
    once; the agent's journal applies each once)."""
    return _batches(context.session, models.Action.state == 'sent',
                    models.Action.updated_at < sent_before)


@db_api.retry_on_conflict
@db_api.context_manager.writer
def mark_sent(context, action_uuids):
    context.session.execute(
        sa.update(models.Action)
        .where(models.Action.uuid.in_(action_uuids),
               models.Action.state == 'pending')
        .values(state='sent', updated_at=timeutils.utcnow()))


def _finish_if_done(session, decision):
    kind, success, failure = IN_FLIGHT[decision.state]
    if _open_actions(session, decision.id, kind):
        return
    states = session.execute(
        sa.select(models.Action.state).where(
            models.Action.decision_id == decision.id,
            models.Action.kind == kind)).scalars().all()
    if all(state == 'applied' for state in states):
        _move(session, decision, success)
    else:
        _move(session, decision, failure,
              reason='%d of %d actions were not applied.' % (
                  sum(state != 'applied' for state in states), len(states)))


def _apply_result(session, action, result, now):
    action.state = result['state']
    action.error = result.get('error')
    action.result = result.get('result')
    if action.state == 'applied':
        instance = session.get(models.Instance, action.instance_id)
        instance.target_bytes = action.params['target_bytes']
        instance.target_changed_at = now


@db_api.retry_on_conflict
@db_api.context_manager.writer
def record_results(context, decision_uuid, results):
    """Store what the agent did with a decision's actions and move the
    decision on once none is left open.

    ``results`` are dicts of uuid, state (applied, failed or skipped),
    error and result. Results of actions no longer open (a redelivered
    message) are ignored, so recording twice changes nothing.
    """
    session = context.session
    decision, host_uuid = _get(session, decision_uuid, for_update=True)
    if decision.state not in IN_FLIGHT:
        return _decision_dict(session, decision, host_uuid)
    by_uuid = {result['uuid']: result for result in results}
    now = timeutils.utcnow()
    for action in session.execute(
            sa.select(models.Action).where(
                models.Action.decision_id == decision.id,
                models.Action.uuid.in_(list(by_uuid)),
                models.Action.state.in_(OPEN_ACTION_STATES))).scalars():
        _apply_result(session, action, by_uuid[action.uuid], now)
    session.flush()
    _finish_if_done(session, decision)
    session.flush()
    return _decision_dict(session, decision, host_uuid)


@db_api.retry_on_conflict
@db_api.context_manager.writer
def fail_unanswered(context, cutoff):
    """Actions sent before ``cutoff`` that no agent answered fail (the
    host may be down); returns the uuids of the decisions concerned."""
    session = context.session
    stale = session.execute(
        sa.select(models.Action).where(
            models.Action.state == 'sent',
            models.Action.updated_at < cutoff)).scalars().all()
    decision_ids = set()
    for action in stale:
        action.state = 'failed'
        action.error = 'The agent did not answer in time.'
        decision_ids.add(action.decision_id)
    session.flush()
    decisions = session.execute(
        sa.select(models.Decision).where(
            models.Decision.id.in_(decision_ids))).scalars().all()
    for decision in decisions:
        if decision.state in IN_FLIGHT:
            _finish_if_done(session, decision)
    return [decision.uuid for decision in decisions]


@db_api.context_manager.reader
def host_busy(context, host_uuid):
    """Whether a decision of the host is being carried out: the optimizer
    waits for it before deciding again."""
    return context.session.execute(
        sa.select(sa.func.count(models.Decision.id))
        .join(models.Host, models.Decision.host_id == models.Host.id)
        .where(models.Host.uuid == host_uuid,
               models.Decision.state.in_(list(IN_FLIGHT)))).scalar_one() > 0
