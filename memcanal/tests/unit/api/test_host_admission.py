"""Hosts an operator admits to memory pooling (microversion 1.10): a new
host is listed not admitted, an admin admits and stops it with PATCH
/hosts/{uuid}, and older microversions are unchanged."""

from memcanal.api import errors
from memcanal import context
from memcanal.db import api as db_api
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V19 = {'OpenStack-API-Version': 'memcanal 1.9'}
V110 = {'OpenStack-API-Version': 'memcanal 1.10'}


def test_a_new_host_is_listed_not_admitted(client, hosts):
    listed = client.admin('/hosts', headers=V110).json['hosts']
    assert [host['pooling_admitted'] for host in listed] == [False, False]
    shown = client.admin('/hosts/' + hosts['host-a'], headers=V110).json
    assert shown['pooling_admitted'] is False
    assert 'pooling_admitted' not in client.admin(
        '/hosts', headers=V19).json['hosts'][0]


def test_an_admin_admits_and_stops_a_host(client, hosts):
    path = '/hosts/' + hosts['host-a']
    admitted = client.admin(path, method='PATCH',
                            body={'pooling_admitted': True}, headers=V110)
    assert admitted.status_int == 200
    assert (admitted.json['uuid'], admitted.json['pooling_admitted']) == (
        hosts['host-a'], True)
    ctx = context.get_admin_context()
    assert db_api.get_host(ctx, hosts['host-a'])['pooling_admitted']
    assert not db_api.get_host(ctx, hosts['host-b'])['pooling_admitted']
    stopped = client.admin(path, method='PATCH',
                           body={'pooling_admitted': False}, headers=V110)
    assert stopped.json['pooling_admitted'] is False


def test_admitting_needs_1_10_the_admin_a_boolean_and_a_host(client, hosts):
    path = '/hosts/' + hosts['host-a']
    body = {'pooling_admitted': True}
    base.assert_error(client.admin(path, method='PATCH', body=body,
                                   headers=V19),
                      404, errors.ROUTE_NOT_FOUND)
    base.assert_error(client.reader(path, method='PATCH', body=body,
                                    headers=V110),
                      403, errors.POLICY_DENIED)
    for bad in ({}, {'pooling_admitted': 'yes'},
                {'pooling_admitted': True, 'name': 'x'}):
        base.assert_error(client.admin(path, method='PATCH', body=bad,
                                       headers=V110),
                          400, errors.BODY_INVALID)
    for missing in (data.A1, 'not-a-uuid'):
        base.assert_error(client.admin('/hosts/' + missing, method='PATCH',
                                       body=body, headers=V110),
                          404, errors.HOST_NOT_FOUND)
    assert not db_api.get_host(context.get_admin_context(),
                               hosts['host-a'])['pooling_admitted']
