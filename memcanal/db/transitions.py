"""Database API of what an operator asks of a decision: approve, reject
or roll back (memcanal.db.decisions tells their life).

A rollback adds a ``restore`` action per action the decision applied,
each putting back what its kind changed (a VM's target, never below
the VM's floor now; the host a migration took the VM from; a host's
allocation ratio; a VM's resident size and memory server lease); the
dispatcher carries them out like forward ones
(memcanal.db.action_delivery). A decision a newer one changed since may
not be rolled back: the newer one goes first.
"""

from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal import exception
from memcanal.policy import guardrails

# What a user may ask of a decision: (states it may be in, state it goes to).
DECISION_TRANSITIONS = {
    'approve': (('recommended',), 'approved'),
    'reject': (('recommended',), 'rejected'),
    'rollback': (('applied', 'failed'), 'rolling_back'),
}
# Decisions whose actions changed, or are changing, some VM's target: a
# decision older than one of these may no longer be rolled back.
CHANGED_TARGETS = ('approved', 'applied', 'failed', 'rolling_back',
                   'rollback_failed')


def _check_not_superseded(session, decision):
    """DecisionSuperseded if a newer decision of the host changed (or is
    changing) VMs since ``decision``."""
    newer = session.execute(
        sa.select(models.Decision).where(
            sa.or_(decisions_db.of_host(decision.host_id),
                   decisions_db.of_host(decision.peer_host_id)),
            models.Decision.id > decision.id,
            models.Decision.state.in_(CHANGED_TARGETS))
        .order_by(models.Decision.id.desc()).limit(1)).scalar_one_or_none()
    if newer is not None:
        raise exception.DecisionSuperseded(
            uuid=decision.uuid, newer=newer.uuid, newer_state=newer.state)


def _floor(session, instance, rails):
    """The VM's floor now (guardrails.floor_of): its latest measured
    working set plus the kernel, or the operator's floor."""
    wss = session.execute(
        sa.select(models.InstanceReport.wss)
        .where(models.InstanceReport.instance_id == instance.id)
        .order_by(models.InstanceReport.id.desc()).limit(1)
    ).scalar_one_or_none() or {}
    return guardrails.floor_of(guardrails.Limits(
        memory_bytes=decisions_db.current_bytes(instance),
        wss_bytes=guardrails.preferred_wss(wss),
        floor_bytes=instance.floor_bytes,
        ceiling_bytes=instance.ceiling_bytes), rails)


def _restore_target(session, decision, action, instance, rails):
    """A memory target's restore: the size before, never below the VM's
    floor now; None when the VM is there already."""
    target = max(action.params['previous_bytes'],
                 _floor(session, instance, rails))
    if target == decisions_db.current_bytes(instance):
        return None
    return {'target_bytes': target,
            'previous_bytes': decisions_db.current_bytes(instance),
            'mechanism': action.params['mechanism']}


def _restore_migration(session, decision, action, instance, rails):
    """A migration's restore: back to its source, if the VM is still on
    the destination the migration took it to."""
    if instance.host_id != decision.peer_host_id:
        return None
    return {'source_host': action.params['destination_host'],
            'source_host_uuid': action.params['destination_host_uuid'],
            'destination_host': action.params['source_host'],
            'destination_host_uuid': action.params['source_host_uuid']}


def _restore_ratio(session, decision, action, instance, rails):
    """A ratio's restore: the ratio before, unless the host had none
    (memcanal never set one: placement keeps the last it was given)."""
    host = session.get(models.Host, decision.host_id)
    previous = action.params['previous_ratio']
    if previous is None or host.allocation_ratio == previous:
        return None
    return {'allocation_ratio': previous,
            'previous_ratio': host.allocation_ratio}


def _restore_paging(session, decision, action, instance, rails):
    """A pooling decision's restore: the resident size, memory server and
    lease the VM had before; None when it has them."""
    params = action.params
    lease = pooling_db.lease_of(session, instance.uuid)
    resident = db_api.resident_of(decisions_db.current_bytes(instance),
                                  instance.resident_target_bytes)
    server_id = lease.memory_server_id if lease else None
    if (resident == params['previous_bytes']
            and server_id == params['previous_memory_server_id']):
        return None
    return {'target_bytes': params['previous_bytes'],
            'previous_bytes': resident, 'mechanism': 'paging',
            'stores': params['previous_stores'],
            'memory_server_id': params['previous_memory_server_id'],
            'lent_bytes': params['previous_lent_bytes'],
            'previous_stores': params['stores'],
            'previous_memory_server_id': server_id,
            'previous_lent_bytes': lease.lent_bytes if lease else 0}


_RESTORES = {
    'memory_targets': _restore_target,
    'pooling': _restore_paging,
    'migration': _restore_migration,
    'allocation_ratio': _restore_ratio,
}


def _add_restores(session, decision, rails):
    """A restore action undoing every action the decision applied;
    returns how many. A VM deleted since, or one already as it was,
    needs none."""
    applied = session.execute(
        sa.select(models.Action, models.Instance)
        .outerjoin(models.Instance,
                   models.Action.instance_id == models.Instance.id)
        .where(models.Action.decision_id == decision.id,
               models.Action.kind == decisions_db.FORWARD_ACTIONS[
                   decision.kind],
               models.Action.state == 'applied')).all()
    restores = 0
    for action, instance in applied:
        if instance is not None and instance.deleted_at is not None:
            continue
        params = _RESTORES[decision.kind](session, decision, action,
                                          instance, rails)
        if params is None:
            continue
        session.add(models.Action(
            uuid=uuidutils.generate_uuid(), decision_id=decision.id,
            host_id=action.host_id, instance_id=action.instance_id,
            kind=decisions_db.RESTORE, state='pending', params=params))
        restores += 1
    return restores


@db_api.retry_on_conflict
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
    return _transition(context, _hosts_of(context, decision_uuid),
                       decision_uuid, request, reason, rails)


@db_api.context_manager.reader
def _hosts_of(context, decision_uuid):
    """The ids of the decision's host and peer, read in a transaction of
    their own (memcanal.db.decisions._host_ids says why); they never
    change."""
    row = context.session.execute(
        sa.select(models.Decision.host_id, models.Decision.peer_host_id)
        .where(models.Decision.uuid == decision_uuid)).first() or ()
    return [host_id for host_id in row if host_id is not None]


@db_api.context_manager.writer
def _transition(context, host_ids, decision_uuid, request, reason, rails):
    session = context.session
    # The hosts' locks first, before any other read (under REPEATABLE
    # READ, what is read after them is then what the last holder
    # committed), as create_decision takes them, so the two never wait
    # for each other in opposite orders.
    hosts = decisions_db.lock_hosts(session, host_ids)
    decision, host_uuid = decisions_db.decision_and_host(
        session, decision_uuid, for_update=True)
    allowed_from, to_state = DECISION_TRANSITIONS[request]
    if decision.state not in allowed_from:
        raise exception.DecisionStateConflict(
            uuid=decision_uuid, state=decision.state,
            requested={'approve': 'approved', 'reject': 'rejected',
                       'rollback': 'rolled back'}[request])
    if request != 'reject':
        for host in hosts.values():
            decisions_db.check_not_busy(session, host, decision.id)
    if request == 'rollback':
        _check_not_superseded(session, decision)
    decisions_db.move(session, decision, to_state, context.user_id,
                      context.project_id, reason)
    if request == 'rollback' and not _add_restores(
            session, decision, rails or guardrails.Rails()):
        decisions_db.move(session, decision, 'rolled_back',
                          reason='The decision left nothing to restore.')
    session.flush()
    return decisions_db.decision_dict(session, decision, host_uuid)
