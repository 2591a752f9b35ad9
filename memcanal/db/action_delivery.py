"""Database API of a decision's actions on their way: the batches the
dispatcher sends their executors, and what those answer.

The actions of decisions being carried out (memcanal.db.decisions
IN_FLIGHT) go out as one batch per decision: those not yet sent, and
again those sent that no executor answered (at least once: the agent's
journal applies each once); those still unanswered after a timeout
fail. An answer records what the action did to what it acted on (a VM's
target, the host a VM is on, a host's ratio, a VM's lease of a memory
server) and, once none of the phase's actions is left open, ends the
decision (memcanal.db.decisions tells its life).
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal import exception

OPEN_ACTION_STATES = ('pending', 'sent')


def _phase(state):
    """The condition on actions of the phase a decision in ``state``
    carries out: restores while rolling back, its forward ones else."""
    if state == 'rolling_back':
        return models.Action.kind == decisions_db.RESTORE
    return models.Action.kind != decisions_db.RESTORE


def _open_actions(session, decision):
    return session.execute(
        sa.select(models.Action).where(
            models.Action.decision_id == decision.id,
            _phase(decision.state),
            models.Action.state.in_(OPEN_ACTION_STATES))).scalars().all()


def _batches(session, *conditions):
    """Actions of decisions being carried out that match ``conditions``,
    as one batch per decision: dicts of decision_uuid, host (its name,
    the agent's RPC server) and actions."""
    rows = session.execute(
        sa.select(models.Decision.uuid, models.Decision.kind,
                  models.Host.name, models.Action, models.Instance.uuid)
        .join(models.Action, models.Action.decision_id == models.Decision.id)
        .join(models.Host, models.Decision.host_id == models.Host.id)
        .outerjoin(models.Instance,
                   models.Action.instance_id == models.Instance.id)
        .where(models.Decision.state.in_(list(decisions_db.IN_FLIGHT)),
               *conditions)
        .order_by(models.Decision.id, models.Action.id)).all()
    batches = {}
    for decision_uuid, kind, host_name, action, instance_uuid in rows:
        batches.setdefault(decision_uuid, {
            'decision_uuid': decision_uuid, 'kind': kind,
            'host': host_name, 'actions': []})['actions'].append(
                _batch_action(action, instance_uuid))
    return list(batches.values())


def _batch_action(action, instance_uuid):
    """What the executor of an action is sent: a memory target's size
    and mechanism (as agents have always been sent them, with the stores
    of a paging one and the bytes it may keep there, which its lease
    tokens carry: memcanal.service.actions), or the parameters of another
    kind."""
    sent = {'uuid': action.uuid, 'instance_uuid': instance_uuid}
    if 'target_bytes' in action.params:
        sent.update(target_bytes=action.params['target_bytes'],
                    mechanism=action.params['mechanism'])
        if 'stores' in action.params:
            sent.update(stores=action.params['stores'],
                        lent_bytes=action.params['lent_bytes'])
    else:
        sent.update(action.params, kind=action.kind)
    return sent


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
def claim(context, action_uuids):
    """Mark those of the actions still pending sent, now, for this
    process to send; returns the uuids it claimed.

    Several service processes send pending actions: their rows are
    locked and re-read here (SELECT ... FOR UPDATE reads what was last
    committed, whatever the isolation level), so of two processes
    claiming the same action one gets it and the other nothing, and an
    action is cast once. The sender unclaims what it then could not
    send; if it dies in between, the action is sent again as an
    unanswered one ([optimizer] action_resend_interval).

    The rows change through the ORM, so that memcanal.notifications
    sees a decision's first actions leave ``pending``
    (``memcanal.decision.apply.start``).
    """
    session = context.session
    claimed = session.execute(
        sa.select(models.Action)
        .where(models.Action.uuid.in_(action_uuids),
               models.Action.state == 'pending')
        .order_by(models.Action.id).with_for_update()).scalars().all()
    now = timeutils.utcnow()
    for action in claimed:
        action.state = 'sent'
        action.updated_at = now
    return {action.uuid for action in claimed}


@db_api.retry_on_conflict
@db_api.context_manager.writer
def unclaim(context, action_uuids):
    """Actions claimed but not sent (the broker was down) are pending
    again, for the next send."""
    context.session.execute(
        sa.update(models.Action)
        .where(models.Action.uuid.in_(action_uuids),
               models.Action.state == 'sent')
        .values(state='pending'))


def _finish_if_done(session, decision):
    success, failure = decisions_db.IN_FLIGHT[decision.state]
    if _open_actions(session, decision):
        return
    states = session.execute(
        sa.select(models.Action.state).where(
            models.Action.decision_id == decision.id,
            _phase(decision.state))).scalars().all()
    if all(state == 'applied' for state in states):
        decisions_db.move(session, decision, success)
    else:
        decisions_db.move(
            session, decision, failure,
            reason='%d of %d actions were not applied.' % (
                sum(state != 'applied' for state in states), len(states)))


def _apply_result(session, action, result, now):
    """Record an action's outcome; an applied one changes what it acted
    on: a VM's target, the host a VM is on, a host's ratio."""
    action.state = result['state']
    action.error = result.get('error')
    action.result = result.get('result')
    if action.state != 'applied':
        return
    params = action.params
    if 'allocation_ratio' in params:
        session.get(models.Host, action.host_id).allocation_ratio = (
            params['allocation_ratio'])
        return
    instance = session.get(models.Instance, action.instance_id)
    if 'destination_host_uuid' in params:
        instance.host_id = session.execute(
            sa.select(models.Host.id).where(
                models.Host.uuid == params['destination_host_uuid'])
        ).scalar_one()
        # A live migration keeps its memory; its hold begins anew.
    elif 'memory_server_id' in params:
        instance.resident_target_bytes = decisions_db.resident_target(
            instance, params['target_bytes'])
        pooling_db.set_lease(
            session, instance, params['memory_server_id'],
            params['lent_bytes'], session.get(
                models.Decision, action.decision_id).uuid)
    else:
        instance.target_bytes = params['target_bytes']
        instance.reached_bytes = reached_bytes(action.result)
    instance.target_changed_at = now


def reached_bytes(result):
    """What an applied memory target's guest reached, as its agent read
    it back (RPC 1.8: ``reached_bytes`` in the result); None from older
    agents, or when the agent could not read it."""
    reached = (result or {}).get('reached_bytes')
    if isinstance(reached, bool) or not isinstance(reached, int) or (
            reached < 0):
        return None
    return reached


def _check_answerer(session, decision, results, agent):
    """DecisionOfAnotherHost unless every action ``results`` name was
    cast to ``agent``: a migration's to the host it moves the VM from,
    every other to the decision's host."""
    host = session.get(models.Host, decision.host_id)
    uuids = [result['uuid'] for result in results]
    for action in session.execute(sa.select(models.Action).where(
            models.Action.decision_id == decision.id,
            models.Action.uuid.in_(uuids))).scalars():
        if action.params.get('source_host', host.name) != agent:
            raise exception.DecisionOfAnotherHost(uuid=decision.uuid,
                                                  host=agent)


@db_api.retry_on_conflict
@db_api.context_manager.writer
def record_results(context, decision_uuid, results, agent=None):
    """Store what the agent did with a decision's actions and move the
    decision on once none is left open.

    ``results`` are dicts of uuid, state (applied, failed or skipped),
    error and result. Results of actions no longer open (a redelivered
    message) are ignored, so recording twice changes nothing. ``agent``
    is the name of the host whose agent answers (None: the service
    itself, for what it carried out); an agent answers only for actions
    cast to it (DecisionOfAnotherHost, recording nothing).
    """
    session = context.session
    decision, host_uuid = decisions_db.decision_and_host(
        session, decision_uuid, for_update=True)
    if agent is not None:
        _check_answerer(session, decision, results, agent)
    if decision.state not in decisions_db.IN_FLIGHT:
        return decisions_db.decision_dict(session, decision, host_uuid)
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
    return decisions_db.decision_dict(session, decision, host_uuid)


@db_api.retry_on_conflict
@db_api.context_manager.writer
def fail_unanswered(context, cutoff,
                    kinds=tuple(decisions_db.FORWARD_ACTIONS)):
    """Actions of decisions of ``kinds`` sent before ``cutoff`` that no
    executor answered fail (the host may be down); returns the uuids of
    the decisions concerned."""
    session = context.session
    stale = session.execute(
        sa.select(models.Action)
        .join(models.Decision, models.Action.decision_id == models.Decision.id)
        .where(models.Action.state == 'sent',
               models.Action.updated_at < cutoff,
               models.Decision.kind.in_(kinds))).scalars().all()
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
        if decision.state in decisions_db.IN_FLIGHT:
            _finish_if_done(session, decision)
    return [decision.uuid for decision in decisions]
