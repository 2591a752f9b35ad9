"""/decisions and PATCH /instances/{uuid} (microversion 1.1)."""

import pytest

from memcanal.api import errors
from memcanal import context
from memcanal.db import action_delivery
from memcanal.db import decisions as decisions_db
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V11 = {'OpenStack-API-Version': 'memcanal 1.1'}


@pytest.fixture
def decision(hosts):
    """A recommended decision for host-a resizing A1 and A2."""
    return decisions_db.create_decision(
        context.get_admin_context(), hosts['host-a'], 'memory_targets',
        'isolated_sharing', 'recommend', {'free_bytes': 0},
        {'instances': {data.A1: {'predicted_miss_ratio': 0.1}}},
        [{'instance_uuid': uuid, 'target_bytes': target,
          'previous_bytes': 4 * data.GIB, 'mechanism': 'balloon'}
         for uuid, target in ((data.A1, 3 * data.GIB),
                              (data.A2, 5 * data.GIB))])


def post(client, decision, request, **kwargs):
    return client.request('/decisions/%s/%s' % (decision['uuid'], request),
                          method='POST', headers=V11, **kwargs)


def test_decisions_do_not_exist_before_1_1(client, decision):
    base.assert_error(client.request('/decisions'), 404,
                      errors.ROUTE_NOT_FOUND)
    base.assert_error(client.request(
        '/decisions/%s/approve' % decision['uuid'], method='POST'), 404,
        errors.ROUTE_NOT_FOUND)


def test_list_and_show(client, decision, hosts):
    listed = client.request('/decisions', headers=V11).json
    [item] = listed['decisions']
    assert (item['uuid'], item['host_uuid'], item['state'],
            item['policy']) == (decision['uuid'], hosts['host-a'],
                                'recommended', 'isolated_sharing')
    assert 'actions' not in item
    shown = client.request('/decisions/%s' % decision['uuid'],
                           headers=V11).json
    assert [a['instance_uuid'] for a in shown['actions']] == [data.A1,
                                                              data.A2]
    assert shown['outputs']['instances'][data.A1] == {
        'predicted_miss_ratio': 0.1}
    assert shown['events'][0]['to_state'] == 'recommended'
    assert client.request('/decisions?host=%s' % hosts['host-b'],
                          headers=V11).json['decisions'] == []
    assert client.request('/decisions?state=rejected',
                          headers=V11).json['decisions'] == []


def test_list_rejects_bad_queries(client, decision):
    base.assert_error(client.request('/decisions?state=happy', headers=V11),
                      400, errors.QUERY_INVALID)
    base.assert_error(client.request('/decisions?marker=%s' % data.UNKNOWN,
                                     headers=V11), 404,
                      errors.MARKER_NOT_FOUND)


def test_approve_records_the_operator(client, decision):
    response = post(client, decision, 'approve',
                    body={'reason': 'night window'})
    assert response.status_int == 200
    assert response.json['state'] == 'approved'
    event = response.json['events'][-1]
    assert (event['from_state'], event['to_state'], event['user_id'],
            event['reason']) == ('recommended', 'approved', 'admin',
                                 'night window')
    assert event['created_at'].endswith('Z')
    error = base.assert_error(post(client, decision, 'approve'), 409,
                              errors.DECISION_STATE_CONFLICT)
    assert 'approved' in error['detail']


def test_reject_then_nothing_else(client, decision):
    assert post(client, decision, 'reject').json['state'] == 'rejected'
    for request in ('approve', 'rollback'):
        base.assert_error(post(client, decision, request), 409,
                          errors.DECISION_STATE_CONFLICT)


def test_rollback_of_an_applied_decision(client, decision):
    post(client, decision, 'approve')
    ctx = context.get_admin_context()
    action_delivery.record_results(ctx, decision['uuid'], [
        {'uuid': a['uuid'], 'state': 'applied', 'error': None,
         'result': None} for a in decision['actions']])
    rolled = post(client, decision, 'rollback').json
    assert rolled['state'] == 'rolling_back'
    assert sorted(a['target_bytes'] for a in rolled['actions']
                  if a['kind'] == 'restore') == [4 * data.GIB] * 2


def test_what_the_guests_reached_from_1_9(client, decision):
    """A1's guest lagged its 3 GiB target at 3.5 GiB; A2's agent (before
    RPC 1.8) did not say. The decision's actions and the instances show
    it from 1.9."""
    post(client, decision, 'approve')
    ctx = context.get_admin_context()
    first, second = decision['actions']
    action_delivery.record_results(ctx, decision['uuid'], [
        {'uuid': first['uuid'], 'state': 'applied', 'error': None,
         'result': {'mechanism': 'balloon', 'previous_bytes': 4 * data.GIB,
                    'target_bytes': 3 * data.GIB, 'seconds': 0.1,
                    'reached_bytes': 7 * data.GIB // 2, 'lagged': True,
                    'settle_seconds': 30.0}},
        {'uuid': second['uuid'], 'state': 'applied', 'error': None,
         'result': {'seconds': 0.1}}])
    v19 = {'OpenStack-API-Version': 'memcanal 1.9'}
    shown = client.request('/decisions/%s' % decision['uuid'],
                           headers=v19).json
    assert [(a['reached_bytes'], a['lagged']) for a in shown['actions']] == [
        (7 * data.GIB // 2, True), (None, None)]
    older = client.request('/decisions/%s' % decision['uuid'],
                           headers=V11).json
    assert 'lagged' not in older['actions'][0]
    instances = {i['uuid']: i for i in client.admin(
        '/instances', headers=v19).json['instances']}
    assert (instances[data.A1]['target_bytes'],
            instances[data.A1]['reached_bytes']) == (3 * data.GIB,
                                                     7 * data.GIB // 2)
    assert instances[data.A2]['reached_bytes'] is None
    assert 'reached_bytes' not in client.admin(
        '/instances/%s' % data.A1,
        headers={'OpenStack-API-Version': 'memcanal 1.8'}).json


def test_rollback_of_a_superseded_decision_is_409_naming_the_newer(
        client, decision, hosts):
    ctx = context.get_admin_context()
    post(client, decision, 'approve')
    apply_all = [{'uuid': a['uuid'], 'state': 'applied', 'error': None,
                  'result': None} for a in decision['actions']]
    action_delivery.record_results(ctx, decision['uuid'], apply_all)
    newer = decisions_db.create_decision(
        ctx, hosts['host-a'], 'memory_targets', 'isolated_sharing', 'auto',
        {}, {}, [{'instance_uuid': data.A1, 'target_bytes': 2 * data.GIB,
                  'previous_bytes': 0, 'mechanism': 'balloon'}])
    # While the newer one is in flight, the host is busy.
    error = base.assert_error(post(client, decision, 'rollback'), 409,
                              errors.DECISION_HOST_BUSY)
    assert error['busy_decision'] == newer['uuid']
    action_delivery.record_results(ctx, newer['uuid'], [
        {'uuid': newer['actions'][0]['uuid'], 'state': 'applied',
         'error': None, 'result': None}])
    error = base.assert_error(post(client, decision, 'rollback'), 409,
                              errors.DECISION_SUPERSEDED)
    assert error['newer_decision'] == newer['uuid']
    assert newer['uuid'] in error['detail']
    assert client.request('/decisions/%s' % decision['uuid'],
                          headers=V11).json['state'] == 'applied'


@pytest.mark.parametrize('body', [b'{', {'reason': 3}, {'why': 'x'}, [1]])
def test_bad_body_is_400(client, decision, body):
    base.assert_error(post(client, decision, 'approve', body=body), 400,
                      errors.BODY_INVALID)
    assert client.request('/decisions/%s' % decision['uuid'],
                          headers=V11).json['state'] == 'recommended'


def test_unknown_decision_is_404(client, decision):
    for path in ('/decisions/%s' % data.UNKNOWN, '/decisions/nope'):
        base.assert_error(client.request(path, headers=V11), 404,
                          errors.DECISION_NOT_FOUND)
    base.assert_error(client.request('/decisions/%s/approve' % data.UNKNOWN,
                                     method='POST', headers=V11), 404,
                      errors.DECISION_NOT_FOUND)


def test_only_admins(client, decision):
    for response in (
            client.reader('/decisions', headers=V11),
            client.reader('/decisions/%s/approve' % decision['uuid'],
                          method='POST', headers=V11),
            client.reader('/instances/%s' % data.A1, method='PATCH',
                          headers=V11, body={'opt_out': True})):
        base.assert_error(response, 403, errors.POLICY_DENIED)


def patch(client, body, uuid=data.A1, **kwargs):
    return client.request('/instances/%s' % uuid, method='PATCH',
                          headers=V11, body=body, **kwargs)


def test_patch_instance_settings(client, hosts):
    response = patch(client, {'opt_out': True, 'floor_bytes': data.GIB,
                              'mechanism': 'hotplug'})
    assert response.status_int == 200
    assert (response.json['opt_out'], response.json['floor_bytes'],
            response.json['mechanism']) == (True, data.GIB, 'hotplug')
    shown = client.request('/instances/%s' % data.A1, headers=V11).json
    assert shown['mechanism'] == 'hotplug'
    # Version 1.0 shows an instance as it always did.
    assert 'mechanism' not in client.request('/instances/%s' % data.A1).json
    assert patch(client, {'mechanism': None}).json['mechanism'] is None


@pytest.mark.parametrize('body', [
    {}, {'opt_out': 'yes'}, {'mechanism': 'magic'}, {'floor_bytes': -1},
    {'size': 3}, {'floor_bytes': 2 * data.GIB, 'ceiling_bytes': data.GIB}])
def test_patch_rejects_bad_settings(client, hosts, body):
    base.assert_error(patch(client, body), 400, errors.BODY_INVALID)
    assert client.request('/instances/%s' % data.A1,
                          headers=V11).json['opt_out'] is False


def test_patch_unknown_instance_and_old_version(client, hosts):
    base.assert_error(patch(client, {'opt_out': True}, uuid=data.UNKNOWN),
                      404, errors.INSTANCE_NOT_FOUND)
    base.assert_error(client.request('/instances/%s' % data.A1,
                                     method='PATCH',
                                     body={'opt_out': True}), 404,
                      errors.ROUTE_NOT_FOUND)
