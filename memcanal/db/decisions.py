"""Database API of decisions: recording them, and reading them with their
actions and history.

A decision is the optimizer's proposal for one host, with the policy,
inputs and predictions behind it, of one of four kinds:

- ``memory_targets``: new memory targets for some of its VMs (actions
  ``set_target``, carried out by the host's agent);
- ``migration``: a live migration of one of its VMs to another host, the
  decision's peer host (action ``migrate``; by nova, or by the agent of
  a simulated host);
- ``allocation_ratio``: the host's MEMORY_MB allocation ratio in
  placement (action ``set_allocation_ratio``, carried out by the
  service);
- ``pooling``: how much of one of its VMs stays resident while the rest
  is paged out to the memory server of the peer host, or taken back
  (action ``page``, carried out by the host's agent and its pager); the
  lease of the server's memory follows the action's outcome.

Rolling one back adds ``restore`` actions that undo its applied ones.
Its life:

    recommended --approve--> approved --(agent results)--> applied | failed
    recommended --reject--> rejected
    recommended --(a newer decision for the host)--> superseded
    applied | failed --rollback--> rolling_back --> rolled_back
                                                  | rollback_failed

This module records decisions (and supersedes the older ones waiting);
memcanal.db.transitions carries out what an operator asks of one
(approve, reject, roll back), and memcanal.db.action_delivery what the
executors of its actions are sent and what they answer. The helpers
they share on a session (locks, a decision's row and dict, its moves
from state to state) are here.

Every change of state is a DecisionEvent with who made it (None: the
service itself) and when, so an operator can audit what happened.

What decides the host's VMs happens under the host's row lock (SELECT
... FOR UPDATE on hosts), taken first by every function that creates,
approves or rolls back a decision, before its transaction reads anything
else (under MariaDB's REPEATABLE READ, a transaction's plain reads see
the database as its first one found it: a writer that read first would
check, once locked, a world from before the other writer committed; the
ids of the hosts to lock are read in a transaction of their own): of two
optimizers, or an approval racing the optimizer, one waits for the other
and then sees what it did, so at most one decision of a host is ever
being carried out. A
migration concerns two hosts: it locks both, in the order of their ids,
and neither may have another decision being carried out.
"""

from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal import exception

# States whose actions are being carried out, with the states the
# decision ends in (all its actions of the phase applied, otherwise).
# Approved decisions carry out their forward actions, rolling back ones
# their ``restore`` actions.
IN_FLIGHT = {
    'approved': ('applied', 'failed'),
    'rolling_back': ('rolled_back', 'rollback_failed'),
}
RESTORE = 'restore'
# Each kind of decision's forward action.
FORWARD_ACTIONS = {
    'memory_targets': 'set_target',
    'migration': 'migrate',
    'allocation_ratio': 'set_allocation_ratio',
    'pooling': 'page',
}
# A page action's store on a memory server: TLS, and a lease token for
# the server (memcanal.service.lease_tokens).
TLS_STORE = 'tls:'


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
    """An action with its parameters: a memory target's target_bytes,
    previous_bytes and mechanism (None for other kinds), a migration's
    source and destination hosts, a ratio's allocation_ratio and
    previous_ratio."""
    return {
        'target_bytes': None, 'previous_bytes': None, 'mechanism': None,
        **action.params,
        'uuid': action.uuid,
        'kind': action.kind,
        'instance_uuid': instance_uuid,
        'state': action.state,
        'error': action.error,
        'result': action.result,
        'updated_at': action.updated_at,
    }


def decision_dict(session, decision, host_uuid, with_details=True):
    """The decision as the API shows it; with its inputs, actions and
    events unless listed (``with_details`` False)."""
    result = {
        'uuid': decision.uuid,
        'host_uuid': host_uuid,
        'kind': decision.kind,
        'policy': decision.policy,
        'mode': decision.mode,
        'state': decision.state,
        'peer_host_uuid': _host_uuid(session, decision.peer_host_id),
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
                .outerjoin(models.Instance,
                           models.Action.instance_id == models.Instance.id)
                .where(models.Action.decision_id == decision.id)
                .order_by(models.Action.id)).all()]
        result['events'] = [_event_dict(e) for e in session.execute(
            sa.select(models.DecisionEvent)
            .where(models.DecisionEvent.decision_id == decision.id)
            .order_by(models.DecisionEvent.id)).scalars()]
    return result


def _host_uuid(session, host_id):
    if host_id is None:
        return None
    return session.execute(sa.select(models.Host.uuid).where(
        models.Host.id == host_id)).scalar_one_or_none()


def move(session, decision, to_state, user_id=None, project_id=None,
         reason=None):
    """The decision to ``to_state``, with the event that audits it."""
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


def lock_hosts(session, host_ids):
    """The hosts' rows by id, locked one after the other in the order of
    their ids, as every transaction locking two takes them."""
    return {host_id: _lock_host(session, host_id=host_id)
            for host_id in sorted(set(host_ids))}


def of_host(host_id):
    """Decisions concerning the host: its own, and migrations to it;
    none for no host (a decision's missing peer), where ``== None``
    would match every decision without a peer."""
    if host_id is None:
        return sa.false()
    return sa.or_(models.Decision.host_id == host_id,
                  models.Decision.peer_host_id == host_id)


def check_not_busy(session, host, decision_id=None):
    """HostBusy if a decision concerning the host (other than
    ``decision_id``) is being carried out."""
    busy = session.execute(
        sa.select(models.Decision.uuid).where(
            of_host(host.id),
            models.Decision.id != (decision_id or 0),
            models.Decision.state.in_(list(IN_FLIGHT)))
        .limit(1)).scalar_one_or_none()
    if busy is not None:
        raise exception.HostBusy(busy=busy, host=host.name)


def current_bytes(instance):
    """The VM's size as decisions left it: what its guest reached, its
    target, or all its memory while it has none (db_api.memory_of)."""
    return db_api.memory_of(instance.target_bytes, instance.allocated_bytes,
                            instance.reached_bytes)


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
    check_not_busy(session, host)
    instances = {instance.uuid: instance for instance in session.execute(
        sa.select(models.Instance).where(
            models.Instance.uuid.in_(
                [change['instance_uuid'] for change in changes]),
            models.Instance.host_id == host.id,
            models.Instance.deleted_at.is_(None))).scalars()}
    changes = [dict(change, previous_bytes=current_bytes(
        instances[change['instance_uuid']])) for change in changes
        if change['instance_uuid'] in instances
        and change['target_bytes'] != current_bytes(
            instances[change['instance_uuid']])]
    if not changes:
        return None
    return _record(session, host, kind, policy, mode, inputs, outputs, [
        (instances[change['instance_uuid']].id, {
            'target_bytes': change['target_bytes'],
            'previous_bytes': change['previous_bytes'],
            'mechanism': change['mechanism']}) for change in changes],
        supersede=(models.Decision.host_id == host.id,
                   models.Decision.kind == kind))


def _of_instance(kind, instance):
    """Conditions on the decisions of ``kind`` acting on the VM."""
    return (models.Decision.kind == kind,
            models.Decision.id.in_(
                sa.select(models.Action.decision_id).where(
                    models.Action.instance_id == instance.id)))


def _waiting(session, conditions):
    """Decisions matching ``conditions`` still waiting for an operator."""
    return session.execute(
        sa.select(models.Decision).where(
            models.Decision.state == 'recommended',
            *conditions)).scalars().all()


def _same_change(session, decision, host, peer, actions):
    """Whether ``decision`` makes exactly the change of ``actions``
    ((instance id, params) pairs) on ``host`` and ``peer``."""
    if (decision.host_id, decision.peer_host_id) != (
            host.id, peer.id if peer else None):
        return False
    recorded = session.execute(
        sa.select(models.Action.instance_id, models.Action.params)
        .where(models.Action.decision_id == decision.id,
               models.Action.kind == FORWARD_ACTIONS[decision.kind])).all()
    return sorted(map(_comparable, recorded)) == sorted(
        map(_comparable, actions))


def _comparable(action):
    instance_id, params = action
    return instance_id or 0, sorted(
        (key, repr(value)) for key, value in params.items())


def _record(session, host, kind, policy, mode, inputs, outputs, actions,
            peer=None, supersede=()):
    """A new decision of ``host`` (and ``peer``) with a forward action per
    (instance id or None, params) of ``actions``; approved at once in
    ``auto`` mode.

    Decisions matching ``supersede`` still waiting for an operator are
    superseded: only the newest reflects the cloud as it is. A
    recommendation identical to one waiting is not recorded (None): the
    waiting one stays, so that an operator approving it is not met by a
    new one each optimizer round.
    """
    waiting = _waiting(session, supersede)
    if mode == 'recommend' and any(
            _same_change(session, decision, host, peer, actions)
            for decision in waiting):
        return None
    for decision in waiting:
        move(session, decision, 'superseded', reason='A newer decision '
             'was made for the host.')
    decision = models.Decision(
        uuid=uuidutils.generate_uuid(), host_id=host.id, kind=kind,
        policy=policy, mode=mode, inputs=inputs, outputs=outputs,
        state='recommended', peer_host_id=peer.id if peer else None)
    session.add(decision)
    session.flush()
    session.add(models.DecisionEvent(decision_id=decision.id,
                                     to_state='recommended'))
    for instance_id, params in actions:
        session.add(models.Action(
            uuid=uuidutils.generate_uuid(), decision_id=decision.id,
            host_id=host.id, instance_id=instance_id,
            kind=FORWARD_ACTIONS[kind], state='pending', params=params))
    if mode == 'auto':
        move(session, decision, 'approved', reason='Auto mode.')
    session.flush()
    return decision_dict(session, decision, host.uuid)


@db_api.context_manager.reader
def _host_ids(context, instance_uuid, host_uuid):
    """The id of the host the VM is on (None when it is gone or on none)
    and that of ``host_uuid`` (None for None; HostNotFound for an
    unknown one).

    Read in a transaction of its own, before the writer's: under
    MariaDB's REPEATABLE READ a transaction sees the database as its
    first plain read found it, however long it then waits for a lock, so
    a writer's first statement must be the hosts' locks. Whatever these
    ids said may have changed by then; the writer reads again under the
    locks.
    """
    session = context.session
    host_id = None
    if host_uuid is not None:
        host_id = session.execute(sa.select(models.Host.id).where(
            models.Host.uuid == host_uuid)).scalar_one_or_none()
        if host_id is None:
            raise exception.HostNotFound(host=host_uuid)
    return _live_instance(session, instance_uuid, 'host_id'), host_id


def _live_instance(session, instance_uuid, column=None):
    """The VM (or only its ``column``), None once it is deleted."""
    query = sa.select(models.Instance if column is None
                      else getattr(models.Instance, column))
    return session.execute(query.where(
        models.Instance.uuid == instance_uuid,
        models.Instance.deleted_at.is_(None))).scalar_one_or_none()


def _lock_and_find(session, host_ids, instance_uuid, host_id):
    """Lock the hosts (before any other read: _host_ids), check that none
    is busy, and return the VM, still on ``host_id``; None when it is gone
    or moved since the ids were read (the caller decides again next
    round, from what the VM's host reports)."""
    hosts = lock_hosts(session, host_ids)
    for host in hosts.values():
        check_not_busy(session, host)
    instance = _live_instance(session, instance_uuid)
    if instance is None or instance.host_id != host_id:
        return hosts, None
    return hosts, instance


@db_api.retry_on_conflict
def create_migration(context, instance_uuid, destination_uuid, policy, mode,
                     inputs, outputs):
    """Record a decision to live-migrate a VM from the host it is on to
    ``destination_uuid``; returns it, or None when the VM is gone or
    already there.

    Both hosts are locked (in id order) before anything else is read, and
    HostBusy is raised while another decision concerning either is being
    carried out. A migration of the same VM still waiting for an operator
    is superseded.
    """
    source_id, destination_id = _host_ids(context, instance_uuid,
                                          destination_uuid)
    if source_id in (None, destination_id):
        return None
    return _record_migration(context, instance_uuid, source_id,
                             destination_id, policy, mode, inputs, outputs)


@db_api.context_manager.writer
def _record_migration(context, instance_uuid, source_id, destination_id,
                      policy, mode, inputs, outputs):
    session = context.session
    hosts, instance = _lock_and_find(session, (source_id, destination_id),
                                     instance_uuid, source_id)
    if instance is None:
        return None
    source, destination = hosts[source_id], hosts[destination_id]
    return _record(session, source, 'migration', policy, mode, inputs,
                   outputs, [(instance.id, _migration_params(
                       source, destination))], peer=destination,
                   supersede=_of_instance('migration', instance))


def _migration_params(source, destination):
    return {'source_host': source.name, 'source_host_uuid': source.uuid,
            'destination_host': destination.name,
            'destination_host_uuid': destination.uuid}


@db_api.retry_on_conflict
@db_api.context_manager.writer
def create_ratio_decision(context, host_uuid, ratio, policy, mode, inputs,
                          outputs):
    """Record a decision to set the host's MEMORY_MB allocation ratio in
    placement; returns it, or None when the host already has that ratio.
    HostBusy while another decision concerning the host is being carried
    out; an older ratio decision still waiting is superseded."""
    session = context.session
    host = _lock_host(session, host_uuid)
    check_not_busy(session, host)
    if host.allocation_ratio == ratio:
        return None
    return _record(session, host, 'allocation_ratio', policy, mode, inputs,
                   outputs, [(None, {'allocation_ratio': ratio,
                                     'previous_ratio':
                                     host.allocation_ratio})],
                   supersede=(models.Decision.host_id == host.id,
                              models.Decision.kind == 'allocation_ratio'))


@db_api.retry_on_conflict
def create_pooling_decision(context, instance_uuid, resident_bytes,
                            lender_host_uuid, lent_bytes, policy, mode,
                            inputs, outputs):
    """Record a decision to keep ``resident_bytes`` of a VM resident and
    page the rest out to the memory server of ``lender_host_uuid``
    (None, with resident_bytes at the VM's memory: take it all back);
    returns it, or None when the VM is gone, already so, or the server
    no longer has ``lent_bytes`` free.

    The VM's host and the lender's are locked (in id order) before
    anything else is read; HostBusy while another decision concerning
    either is being carried out. A pooling decision of the same VM still
    waiting is superseded. None too when paging out is not allowed
    (_may_pool): a host not admitted, or an owner id shared.
    """
    host_id, lender_id = _host_ids(context, instance_uuid, lender_host_uuid)
    if host_id is None:
        return None
    return _record_pooling(context, instance_uuid, host_id, lender_id,
                           resident_bytes, lent_bytes, policy, mode, inputs,
                           outputs)


@db_api.context_manager.writer
def _record_pooling(context, instance_uuid, host_id, lender_id,
                    resident_bytes, lent_bytes, policy, mode, inputs,
                    outputs):
    session = context.session
    hosts, instance = _lock_and_find(
        session, [host_id] + ([lender_id] if lender_id else []),
        instance_uuid, host_id)
    if instance is None:
        return None
    if lender_id is not None and not _may_pool(
            session, hosts[host_id], hosts[lender_id], instance):
        return None
    params = _paging_params(session, instance, resident_bytes,
                            hosts.get(lender_id), lent_bytes)
    if params is None:
        return None
    return _record(session, hosts[host_id], 'pooling', policy, mode, inputs,
                   outputs, [(instance.id, params)],
                   peer=hosts.get(lender_id),
                   supersede=_of_instance('pooling', instance))


def _may_pool(session, host, lender, instance):
    """Whether the VM may page out to the lender's server, read under
    both hosts' locks: an operator admitted both hosts
    (pooling_db.set_admitted takes the same lock), and the VM's owner id
    is its own (pooling_db.owner_is_alone). Taking a VM back needs
    neither: it ends its borrowing."""
    return bool(host.pooling_admitted and lender.pooling_admitted
                and pooling_db.owner_is_alone(session, instance))


def resident_target(instance, resident_bytes):
    """What resident_target_bytes becomes: None when the VM keeps all
    its memory."""
    return (None if resident_bytes >= current_bytes(instance)
            else resident_bytes)


def _paging_params(session, instance, resident_bytes, lender, lent_bytes):
    """A page action's parameters, or None when the VM is already so or
    the lender's server cannot take ``lent_bytes``. The previous state
    (resident size, server, lent bytes) is kept for a rollback."""
    memory = current_bytes(instance)
    resident = db_api.resident_of(memory, instance.resident_target_bytes)
    lease = pooling_db.lease_of(session, instance.uuid)
    server = None
    if lender is not None:
        server = pooling_db.server_on(session, lender.id)
        if server is None or not server.enabled:
            return None
        held = lease.lent_bytes if lease and (
            lease.memory_server_id == server.id) else 0
        if pooling_db.lent_by(session, server.id) - held + lent_bytes > (
                server.capacity_bytes):
            return None
    if min(resident_bytes, memory) == resident and (
            (lease and lease.memory_server_id) == (server and server.id)):
        return None
    previous_server = (session.get(models.MemoryServer,
                                   lease.memory_server_id) if lease else None)
    return {'target_bytes': min(resident_bytes, memory),
            'previous_bytes': resident, 'mechanism': 'paging',
            'stores': [TLS_STORE + server.address] if server else [],
            'memory_server_id': server.id if server else None,
            'lent_bytes': lent_bytes if server else 0,
            'previous_stores': [TLS_STORE + previous_server.address]
            if previous_server else [],
            'previous_memory_server_id': previous_server.id
            if previous_server else None,
            'previous_lent_bytes': lease.lent_bytes if lease else 0}


def _decision_query():
    return (sa.select(models.Decision, models.Host.uuid)
            .outerjoin(models.Host, models.Decision.host_id == models.Host.id))


def decision_and_host(session, decision_uuid, for_update=False):
    """The decision and its host's uuid; its row locked with
    ``for_update``. DecisionNotFound without one."""
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
    decision, host_uuid = decision_and_host(context.session, decision_uuid)
    return decision_dict(context.session, decision, host_uuid)


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
    return [decision_dict(session, decision, h_uuid, with_details=False)
            for decision, h_uuid in session.execute(query).all()]


@db_api.context_manager.reader
def busy_hosts(context):
    """Uuids of the hosts a decision being carried out concerns."""
    ids = set()
    for host_id, peer_id in context.session.execute(
            sa.select(models.Decision.host_id, models.Decision.peer_host_id)
            .where(models.Decision.state.in_(list(IN_FLIGHT)))):
        ids.update(i for i in (host_id, peer_id) if i is not None)
    return set(context.session.execute(
        sa.select(models.Host.uuid).where(models.Host.id.in_(ids)))
        .scalars()) if ids else set()


@db_api.context_manager.reader
def count_in_flight(context, kind):
    """How many decisions of ``kind`` are being carried out."""
    return context.session.execute(
        sa.select(sa.func.count(models.Decision.id)).where(
            models.Decision.kind == kind,
            models.Decision.state.in_(list(IN_FLIGHT)))).scalar_one()


@db_api.context_manager.reader
def host_busy(context, host_uuid):
    """Whether a decision of the host is being carried out: the optimizer
    waits for it before deciding again."""
    host_id = context.session.execute(sa.select(models.Host.id).where(
        models.Host.uuid == host_uuid)).scalar_one_or_none()
    return context.session.execute(
        sa.select(sa.func.count(models.Decision.id))
        .where(of_host(host_id),
               models.Decision.state.in_(list(IN_FLIGHT)))).scalar_one() > 0
