"""data.py's cloud with something in every part of the API: a report
with log statistics and paging, a sampled VM with its intervals, a
memory server lending to a VM,
decisions of every kind, applied and waiting, and a third host.

For tests that walk the whole API (the OpenAPI reference's, schemathesis)
rather than one resource.
"""

from memcanal import context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.rpc import reports
from memcanal.tests.unit.api import data


def _apply(ctx, decision):
    action_delivery.record_results(ctx, decision['uuid'], [
        {'uuid': action['uuid'], 'state': 'applied', 'error': None,
         'result': {'seconds': 0.5}} for action in decision['actions']])


# host-c runs one VM and has only an applied decision, so approving the
# others (which leaves their hosts busy until the agent answers) never
# keeps it from being rolled back.
C1 = '60000000-0000-4000-8000-000000000006'


def seed():
    """Store the cloud; return the uuids of its rows by collection:
    {'hosts': [...], 'instances': [...], 'memory_servers': [...],
    'decisions': [...]}."""
    ctx = context.get_admin_context()
    hosts = data.seed()
    # A sampling agent's report (RPC 1.7), with its intervals.
    data.store_sampled(hosts['host-a'], data.HOST_A_REPORTS + 1,
                       data.HOST_A_INSTANCES, {data.A1})
    db_api.store_report(ctx, reports.validate_report(
        {'host_uuid': hosts['host-b'], 'sequence': 2,
         'collected_at': '2026-11-22T09:10:30Z',
         'instances': [{
             'uuid': uuid, 'project_id': data.PROJECTS[uuid],
             'allocated_bytes': 4 * data.GIB, 'wss': data.wss(2),
             'mrc': data.mrc(2),
             'logs': {'prl': {'events': 4, 'logged': 4096, 'missed': 2},
                      'pml': {}},
             'paging': {'resident_bytes': 3 * data.GIB,
                        'paged_bytes': data.GIB}}
             for uuid in data.HOST_B_INSTANCES],
         'memserver': {'address': '10.0.0.2:7400',
                       'capacity_bytes': 16 * data.GIB,
                       'used_bytes': data.GIB}},
        max_mrc_points=100, max_instances=100))
    [server] = pooling_db.list_memory_servers(ctx)
    pooling_db.set_enabled(ctx, server['uuid'], True)
    for host in ('host-a', 'host-b'):
        pooling_db.set_admitted(ctx, hosts[host], True)
    lending = decisions_db.create_pooling_decision(
        ctx, data.A1, data.GIB, hosts['host-b'], 3 * data.GIB, 'pooling',
        'auto', {}, {})
    _apply(ctx, lending)
    applied = decisions_db.create_decision(
        ctx, hosts['host-b'], 'memory_targets', 'isolated_sharing', 'auto',
        {}, {}, [{'instance_uuid': data.B2, 'target_bytes': 3 * data.GIB,
                  'previous_bytes': 4 * data.GIB, 'mechanism': 'balloon'}])
    _apply(ctx, applied)
    migration = decisions_db.create_migration(
        ctx, data.A2, hosts['host-b'], 'balance', 'recommend', {}, {})
    ratio = decisions_db.create_ratio_decision(
        ctx, hosts['host-b'], 1.5, 'ratio', 'recommend', {}, {})
    recommended = decisions_db.create_decision(
        ctx, hosts['host-a'], 'memory_targets', 'isolated_sharing',
        'recommend', {'free_bytes': 0},
        {'instances': {data.B1: {'predicted_miss_ratio': 0.1}}},
        [{'instance_uuid': data.B1, 'target_bytes': 3 * data.GIB,
          'previous_bytes': 4 * data.GIB, 'mechanism': 'hotplug'}])
    host_c = db_api.register_host(ctx, 'host-c', 16 * data.GIB,
                                  data.GIB)['uuid']
    db_api.store_report(ctx, reports.validate_report(
        {'host_uuid': host_c, 'sequence': 1,
         'collected_at': '2026-11-22T09:10:30Z',
         'instances': [{'uuid': C1, 'project_id': data.PROJECT_A,
                        'allocated_bytes': 4 * data.GIB,
                        'wss': data.wss(1), 'mrc': data.mrc(1)}]},
        max_mrc_points=100, max_instances=100))
    alone = decisions_db.create_decision(
        ctx, host_c, 'memory_targets', 'isolated_sharing', 'auto', {}, {},
        [{'instance_uuid': C1, 'target_bytes': 2 * data.GIB,
          'previous_bytes': 4 * data.GIB, 'mechanism': 'balloon'}])
    _apply(ctx, alone)
    db_api.update_instance_settings(ctx, data.A3, {
        'floor_bytes': data.GIB, 'ceiling_bytes': 8 * data.GIB})
    return {'hosts': sorted([*hosts.values(), host_c]),
            'instances': [*data.ALL, C1],
            'memory_servers': [server['uuid']],
            'decisions': [decision['uuid'] for decision in (
                lending, applied, migration, ratio, recommended, alone)]}
