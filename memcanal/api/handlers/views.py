"""How hosts, instances and reports look on the wire.

Rendered from the dicts memcanal.db.api returns, in one place so that a
list and a show (and, later, every microversion) agree. Database ids stay
internal except a report's, which is its pagination marker. Sizes are
bytes, under the names the database API uses; times are ISO 8601 UTC.
"""

from memcanal.api import util


def host(value):
    return {
        'uuid': value['uuid'],
        'name': value['name'],
        'state': value['state'],
        'memory_total_bytes': value['memory_total_bytes'],
        'memory_reserved_bytes': value['memory_reserved_bytes'],
        'instance_count': value['instance_count'],
        'last_sequence': value['last_sequence'],
        'reports_rejected': value['reports_rejected'],
        'last_heartbeat_at': util.isotime(value['last_heartbeat_at']),
        'created_at': util.isotime(value['created_at']),
        'updated_at': util.isotime(value['updated_at']),
    }


def host_demand(value):
    """Microversion 1.4 adds the host's zone, the MEMORY_MB allocation
    ratio memcanal set in placement, and what its live VMs measurably
    need (memcanal.policy.demand): capacity (total less reserved), demand,
    headroom (capacity less demand) and utilization (demand over
    capacity; null without capacity)."""
    return {key: value[key] for key in (
        'availability_zone', 'allocation_ratio', 'capacity_bytes',
        'demand_bytes', 'headroom_bytes', 'utilization')}


def host_pooling(value):
    """Microversion 1.5 adds the host's memory map: its VMs' memory
    (allocated), what they hold resident (their memory, less what memory
    pooling pages out), what its memory server lends to other hosts'
    VMs, and what its VMs borrow from others'."""
    return {key: value[key] for key in (
        'allocated_bytes', 'resident_bytes', 'lent_bytes',
        'borrowed_bytes')}


def host_admission(value):
    """Microversion 1.10: whether an operator admitted the host to
    memory pooling (its VMs may borrow, its memory server may lend)."""
    return {'pooling_admitted': value['pooling_admitted']}


def host_hypervisor(value):
    """Microversion 1.7 adds what the host's agent registered it as
    (null: an agent from before) and whether nova manages it: a Xen host
    is not (memcanal.hypervisors), so placement's allocation ratio, nova's
    filter and weigher and migrations do not apply to it."""
    return {key: value[key] for key in ('hypervisor_type', 'nova_managed')}


def host_demand_bounds(value):
    """Microversion 1.8 adds the 95 % interval of the host's demand:
    [its VMs' demand from the lower bounds of their sampled working
    sets, from the upper bounds]; an unsampled VM's counts the same in
    both. demand_bytes is the upper bound."""
    return {'demand_bounds_bytes': list(value['demand_bounds_bytes'])}


def instance_wss_bounds(value):
    """Microversion 1.8 adds the 95 % interval of ``wss_bytes``, [low,
    high], or null when it was not sampled (read as exact)."""
    bounds = value['wss_bounds_bytes']
    return {'wss_bounds_bytes': None if bounds is None else list(bounds)}


def report_intervals(value):
    """Microversion 1.8 adds a report's 95 % intervals: ``wss_bounds``
    {estimator: [low, high] bytes} and ``mrc_bands`` {method: {"low":
    points, "high": points}} at the sizes of that curve (empty: none,
    as from an agent before RPC 1.7)."""
    return {
        'wss_bounds': {name: list(bounds)
                       for name, bounds in value['wss_bounds'].items()},
        'mrc_bands': {method: {edge: [list(point) for point in points]
                               for edge, points in band.items()}
                      for method, band in value['mrc_bands'].items()},
    }


def instance_paging(value):
    """Microversion 1.5 adds remote paging: what the agent last saw the
    VM hold resident and paged out (null: no pager holds it), and how
    much memory pooling decided it keeps resident (null: all)."""
    return {key: value[key] for key in (
        'resident_bytes', 'paged_bytes', 'resident_target_bytes')}


def memory_server_identity(value):
    """Microversion 1.6: which memory server, and whether an operator
    let pooling lend from it."""
    return {'uuid': value['uuid'], 'enabled': value['enabled']}


def memory_server(value):
    """A memory server, what it lends and to whom."""
    return {
        'host_uuid': value['host_uuid'],
        'host_name': value['host_name'],
        'host_state': value['host_state'],
        'address': value['address'],
        'capacity_bytes': value['capacity_bytes'],
        'used_bytes': value['used_bytes'],
        'lent_bytes': value['lent_bytes'],
        'free_bytes': value['free_bytes'],
        'leases': [dict(lease, created_at=util.isotime(lease['created_at']))
                   for lease in value['leases']],
        'updated_at': util.isotime(value['updated_at']),
    }


def instance(value):
    return {
        'uuid': value['uuid'],
        'host_uuid': value['host_uuid'],
        'project_id': value['project_id'],
        'allocated_bytes': value['allocated_bytes'],
        'target_bytes': value['target_bytes'],
        'floor_bytes': value['floor_bytes'],
        'ceiling_bytes': value['ceiling_bytes'],
        'opt_out': value['opt_out'],
        'created_at': util.isotime(value['created_at']),
        'updated_at': util.isotime(value['updated_at']),
    }


def report(value):
    """A report: ``wss`` is {estimator: bytes}, ``mrc`` is
    {method: [[size bytes, miss ratio], ...]}, sizes increasing.
    """
    return {
        'id': value['id'],
        'sequence': value['sequence'],
        'collected_at': util.isotime(value['collected_at']),
        'allocated_bytes': value['allocated_bytes'],
        'wss': dict(value['wss']),
        'mrc': {method: [list(point) for point in points]
                for method, points in value['mrc'].items()},
        'guest_stats': dict(value['guest_stats'] or {}),
    }


def _missed_per_event(stats):
    events = stats.get('events', 0)
    return stats.get('missed', 0) / events if events else 0.0


def report_logs(value):
    """Microversion 1.2 adds what the PRL and PML logs did in a report's
    interval, each with ``missed_per_event`` (GPAs lost per log-full
    event, 0.0 without events), or None when the agent did not say.
    """
    logs = value['log_stats']
    if logs is None:
        return None
    return {name: dict(stats, missed_per_event=_missed_per_event(stats))
            for name, stats in logs.items()}


def instance_settings(value):
    """Microversion 1.1 adds how the VM is resized and when memcanal last
    changed its target."""
    return {
        'mechanism': value['mechanism'],
        'target_changed_at': util.isotime(value['target_changed_at']),
    }


def instance_presence(value):
    """Microversion 1.3 adds what the agent last observed the VM at
    (memory as the hypervisor shows it, apart from the target memcanal
    set), when its host last listed it, and when it was found gone."""
    return {
        'observed_bytes': value['observed_bytes'],
        'last_reported_at': util.isotime(value['last_reported_at']),
        'deleted_at': util.isotime(value['deleted_at']),
    }


def instance_reached(value):
    """Microversion 1.9 adds what the guest reached at memcanal's last
    memory target, as its agent read it back (null: not said, by an
    agent before it, or no target set); memcanal counts the VM at it."""
    return {'reached_bytes': value['reached_bytes']}


def action_reached(action):
    """Microversion 1.9 adds to each action what its guest reached and
    whether it lagged the target, from the agent's result (null where it
    did not say: an agent before it, an action not applied, another
    kind)."""
    result = action['result'] or {}
    return {'reached_bytes': result.get('reached_bytes'),
            'lagged': result.get('lagged')}


def decision(value):
    """A decision as listed: its state, policy and per-VM outputs."""
    return {
        'uuid': value['uuid'],
        'host_uuid': value['host_uuid'],
        'kind': value['kind'],
        'policy': value['policy'],
        'mode': value['mode'],
        'state': value['state'],
        'outputs': value['outputs'],
        'created_at': util.isotime(value['created_at']),
        'updated_at': util.isotime(value['updated_at']),
    }


def decision_detail(value):
    """A decision shown alone: also its inputs, its actions (with what the
    agent did) and every change of its state, with who and when."""
    body = decision(value)
    body['inputs'] = value['inputs']
    body['actions'] = [dict(action, updated_at=util.isotime(
        action['updated_at'])) for action in value['actions']]
    body['events'] = [dict(event, created_at=util.isotime(
        event['created_at'])) for event in value['events']]
    return body
