"""Memory pooling in the API (microversion 1.5): /memory_servers, the
hosts' memory map and the instances' paging; which servers lend, as an
operator enables them (1.6)."""

from memcanal.api import errors
from memcanal import context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.rpc import reports
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V15 = {'OpenStack-API-Version': 'memcanal 1.5'}
V16 = {'OpenStack-API-Version': 'memcanal 1.6'}
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
    [server] = pooling_db.list_memory_servers(ctx)
    pooling_db.set_enabled(ctx, server['uuid'], True)
    for host in ('host-a', 'host-b'):
        pooling_db.set_admitted(ctx, hosts[host], True)
    decision = decisions_db.create_pooling_decision(
        ctx, data.A1, data.GIB, hosts['host-b'], 3 * data.GIB, 'pooling',
        'auto', {}, {})
    action_delivery.record_results(ctx, decision['uuid'], [
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


def register(hosts):
    """host-b registers a memory server, as its agent's report does."""
    db_api.store_report(context.get_admin_context(), reports.validate_report(
        {'host_uuid': hosts['host-b'], 'sequence': 2,
         'collected_at': '2026-11-24T09:00:00Z', 'instances': [],
         'memserver': {'address': ADDRESS, 'capacity_bytes': 16 * data.GIB}},
        max_mrc_points=100, max_instances=100))
    [server] = stored_servers()
    return server


def stored_servers():
    return pooling_db.list_memory_servers(context.get_admin_context())


def test_a_new_memory_server_is_listed_disabled_and_lends_nothing(client,
                                                                  hosts):
    server = register(hosts)
    [listed] = client.admin('/memory_servers', headers=V16).json[
        'memory_servers']
    assert (listed['uuid'], listed['enabled'], listed['capacity_bytes'],
            listed['free_bytes']) == (server['uuid'], False, 16 * data.GIB,
                                      0)
    assert 'enabled' not in client.admin('/memory_servers', headers=V15).json[
        'memory_servers'][0]


def test_an_admin_enables_and_disables_a_memory_server(client, hosts):
    server = register(hosts)
    path = '/memory_servers/' + server['uuid']
    enabled = client.admin(path, method='PATCH', body={'enabled': True},
                           headers=V16)
    assert enabled.status_int == 200
    assert (enabled.json['uuid'], enabled.json['enabled'],
            enabled.json['free_bytes']) == (server['uuid'], True,
                                            16 * data.GIB)
    assert stored_servers()[0]['enabled'] is True
    disabled = client.admin(path, method='PATCH', body={'enabled': False},
                            headers=V16)
    assert (disabled.json['enabled'], disabled.json['free_bytes']) == (
        False, 0)


def test_enabling_needs_1_6_the_admin_a_boolean_and_a_server(client, hosts):
    server = register(hosts)
    path = '/memory_servers/' + server['uuid']
    base.assert_error(client.admin(path, method='PATCH',
                                   body={'enabled': True}, headers=V15),
                      404, errors.ROUTE_NOT_FOUND)
    base.assert_error(client.reader(path, method='PATCH',
                                    body={'enabled': True}, headers=V16),
                      403, errors.POLICY_DENIED)
    for body in ({}, {'enabled': 'yes'}, {'enabled': True, 'address': 'x'}):
        base.assert_error(client.admin(path, method='PATCH', body=body,
                                       headers=V16),
                          400, errors.BODY_INVALID)
    for missing in (data.A1, 'not-a-uuid'):
        base.assert_error(client.admin('/memory_servers/' + missing,
                                       method='PATCH', body={'enabled': True},
                                       headers=V16),
                          404, errors.MEMORY_SERVER_NOT_FOUND)
    assert stored_servers()[0]['enabled'] is False
