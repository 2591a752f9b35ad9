"""A small cloud in the database, built the way the service builds it.

Hosts register with ``register_host``; reports pass ``validate_report``
and are stored with ``store_report``, so the API reads exactly what the
service would have written. Shared by the unit and functional API tests.
"""

import contextlib

from memcanal import context
from memcanal.db import api as db_api
from memcanal.estimation import packed_curve
from memcanal.rpc import reports

MIB = 2 ** 20
GIB = 2 ** 30
PROJECT_A = 'project-a'
PROJECT_B = 'project-b'

# Instance uuids in the order the API lists them (by uuid).
A1 = '10000000-0000-4000-8000-000000000001'
A2 = '20000000-0000-4000-8000-000000000002'
B1 = '30000000-0000-4000-8000-000000000003'
A3 = '40000000-0000-4000-8000-000000000004'
B2 = '50000000-0000-4000-8000-000000000005'
ALL = [A1, A2, B1, A3, B2]
PROJECTS = {A1: PROJECT_A, A2: PROJECT_A, A3: PROJECT_A,
            B1: PROJECT_B, B2: PROJECT_B}
# host-a stores reports 1 to 3 of A1, A2 and B1; host-b report 1 of A3
# and B2.
HOST_A_INSTANCES = [A1, A2, B1]
FLAVORS = {PROJECT_A: 'm1.medium', PROJECT_B: 'm1.large'}
HOST_B_INSTANCES = [A3, B2]
HOST_A_REPORTS = 3
UNKNOWN = '99999999-0000-4000-8000-000000000099'


@contextlib.contextmanager
def using(fixture):
    """A ``fixtures.Fixture`` set up for the ``with`` block, for pytest."""
    fixture.setUp()
    try:
        yield fixture
    finally:
        fixture.cleanUp()


def wss(sequence):
    """The WSS the seed reports for any instance at ``sequence``."""
    return {'distinct': 100 * MIB * sequence, 'ewma': 90 * MIB * sequence,
            'prl': 80 * MIB * sequence}


def mrc(sequence):
    return {'exact': [[256 * MIB, 0.5 / sequence], [512 * MIB, 0.0]]}


def _sample(uuid, sequence):
    return {'uuid': uuid, 'project_id': PROJECTS[uuid],
            'allocated_bytes': 4 * GIB, 'observed_bytes': 3 * GIB,
            'flavor': FLAVORS[PROJECTS[uuid]],
            'wss': wss(sequence), 'mrc': mrc(sequence),
            'guest_stats': {'major_faults': 10.0 * sequence}}


def _store(ctx, host_uuid, sequence, instances):
    report = reports.validate_report(
        {'host_uuid': host_uuid, 'sequence': sequence,
         'collected_at': '2026-11-22T09:%02d:30Z' % sequence,
         'instances': [_sample(uuid, sequence) for uuid in instances]},
        max_mrc_points=100, max_instances=100)
    assert db_api.store_report(ctx, report)


# What store_sampled reports of a sampled VM (RPC 1.7): its working set,
# the 95 % interval, its curve and the curve's band.
SAMPLED_WSS = 200 * MIB
SAMPLED_BOUNDS = [180 * MIB, 230 * MIB]
SAMPLED_CURVE = [[128 * MIB, 0.6], [256 * MIB, 0.2], [512 * MIB, 0.0]]
SAMPLED_BAND = {'low': [[128 * MIB, 0.5], [256 * MIB, 0.1], [512 * MIB, 0.0]],
                'high': [[128 * MIB, 0.7], [256 * MIB, 0.3],
                         [512 * MIB, 0.05]]}


def store_sampled(host_uuid, sequence, instances, sampled):
    """Store a report of ``instances`` as the seed does, but of those in
    ``sampled`` only what a sampling agent at RPC 1.7 measures, with the
    intervals."""
    samples = []
    for uuid in instances:
        sample = _sample(uuid, sequence)
        if uuid in sampled:
            sample.update(
                wss={'sampled': SAMPLED_WSS},
                wss_bounds={'sampled': SAMPLED_BOUNDS},
                mrc={'sampled': packed_curve.pack(SAMPLED_CURVE)},
                mrc_bands={'sampled': {
                    edge: packed_curve.pack(points)
                    for edge, points in SAMPLED_BAND.items()}},
                guest_stats={'sampling_confidence': 0.95,
                             'sampled_pages': 512.0, 'sampling_rate': 0.01})
        samples.append(sample)
    report = reports.validate_report(
        {'host_uuid': host_uuid, 'sequence': sequence,
         'collected_at': '2026-11-22T09:%02d:30Z' % sequence,
         'instances': samples}, max_mrc_points=100, max_instances=100)
    assert db_api.store_report(context.get_admin_context(), report)


def seed():
    """Store the cloud; return {'host-a': uuid, 'host-b': uuid}."""
    ctx = context.get_admin_context()
    hosts = {
        'host-a': db_api.register_host(ctx, 'host-a', 64 * GIB,
                                       2 * GIB, 30.0)['uuid'],
        'host-b': db_api.register_host(ctx, 'host-b', 32 * GIB,
                                       GIB)['uuid'],
    }
    for sequence in range(1, HOST_A_REPORTS + 1):
        _store(ctx, hosts['host-a'], sequence, HOST_A_INSTANCES)
    _store(ctx, hosts['host-b'], 1, HOST_B_INSTANCES)
    return hosts


def report_ids(uuid):
    """The ids of an instance's reports, newest first, from the DB API."""
    return [r['id'] for r in db_api.list_instance_reports(
        context.get_admin_context(), uuid)]
