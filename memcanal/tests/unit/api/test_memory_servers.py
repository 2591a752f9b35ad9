"""Memory pooling in the API (microversion 1.5): /memory_servers, the
hosts' memory map and the instances' paging."""

from memcanal.api import errors
from memcanal import context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.rpc import reports
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V15 = {'OpenStack-API-Version': 'memcanal 1.5'}
ADDRESS = '10.0.0.2:7400'


def lend(hosts):
    """host-b registers a 16 GiB memory server and lends 3 GiB of it to
    A1 on host-a, which keeps 1 GiB of its 4 resident."""
    ctx = context.get_admin_context()
    db_api.store_report(ctx, reports.validate_report(
        {'host_uuid': hosts['host-b'], 'sequence': 2,
         'collected_at': '2026-11-24T09:00:00Z', 'instances': [],
         'memserver': {'address': ADDRESS, 'capacity_bytes': 16 * data.GIB,
                       'used_bytes': data.GIB}},
        max_mrc_points=100, max_instances=100))
    decision = decisions_db.create_pooling_decision(
        ctx, data.A1, data.GIB, hosts['host-b'], 3 * data.GIB, 'pooling',
        'auto', {}, {})
    decisions_db.record_results(ctx, decision['uuid'], [
        {'uuid': action['uuid'], 'state': 'applied', 'error': None,
         'result': None} for action in decision['actions']])
    return decision


def test_memory_servers_show_who_lends_what_to_whom(client, hosts):
    decision = lend(hosts)
    response = client.admin('/memory_servers', headers=V15)
    assert response.status_int == 200
    [server] = response.json['memory_servers']
    [lease] = server['leases']
    assert (server['host_name'], server['address'], server['capacity_bytes'],
            server['used_bytes'], server['lent_bytes'],
            server['free_bytes']) == ('host-b', ADDRESS, 16 * data.GIB,
                                      data.GIB, 3 * data.GIB,
                                      13 * data.GIB)
    assert (lease['instance_uuid'], lease['borrower_host_name'],
            lease['lent_bytes'], lease['decision_uuid']) == (
        data.A1, 'host-a', 3 * data.GIB, decision['uuid'])


def test_hosts_and_instances_show_the_memory_map(client, hosts):
    lend(hosts)
    host_a, host_b = client.admin('/hosts', headers=V15).json['hosts']
    assert (host_a['allocated_bytes'], host_a['resident_bytes'],
            host_a['borrowed_bytes'], host_a['lent_bytes']) == (
        12 * data.GIB, 9 * data.GIB, 3 * data.GIB, 0)
    assert (host_b['lent_bytes'], host_b['borrowed_bytes']) == (
        3 * data.GIB, 0)
    instance = client.admin('/instances/' + data.A1, headers=V15).json
    assert (instance['resident_target_bytes'], instance['resident_bytes'],
            instance['paged_bytes']) == (data.GIB, None, None)
    assert 'lent_bytes' not in client.admin('/hosts').json['hosts'][0]
    assert 'resident_target_bytes' not in client.admin(
        '/instances/' + data.A1).json


def test_memory_servers_need_1_5_and_the_admin(client, hosts):
    base.assert_error(client.admin('/memory_servers'), 404,
                      errors.ROUTE_NOT_FOUND)
    base.assert_error(client.reader('/memory_servers', headers=V15), 403,
                      errors.POLICY_DENIED)
    base.assert_error(client.admin('/memory_servers?x=1', headers=V15), 400,
                      errors.QUERY_INVALID)
