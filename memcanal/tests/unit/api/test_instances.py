"""/instances and /instances/{uuid}: listing, pages, filters, policy."""

import urllib.parse

import pytest

from memcanal.api import errors
from memcanal import context
from memcanal.db import api as db_api
from memcanal.rpc import reports
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


def uuids(response):
    assert response.status_int == 200, response.body
    return [i['uuid'] for i in response.json['instances']]


def follow(client, path, persona='admin', **kwargs):
    """Every page from ``path`` on: [(uuids, links), ...]."""
    pages = []
    while path is not None:
        response = getattr(client, persona)(path, **kwargs)
        links = response.json['links']
        pages.append((uuids(response), links))
        nexts = [link['href'] for link in links if link['rel'] == 'next']
        path = nexts[0] if nexts else None
        assert len(pages) < 10, 'pagination does not end'
    return pages


def test_admin_lists_every_project(client, hosts):
    response = client.admin('/instances')
    assert uuids(response) == data.ALL
    assert response.json['links'] == []
    first = response.json['instances'][0]
    assert first == {
        'uuid': data.A1, 'host_uuid': hosts['host-a'],
        'project_id': data.PROJECT_A, 'allocated_bytes': 4 * data.GIB,
        'target_bytes': None, 'floor_bytes': None, 'ceiling_bytes': None,
        'opt_out': False, 'created_at': first['created_at'],
        'updated_at': first['updated_at']}
    assert first['created_at'].endswith('Z')


def test_admin_of_any_project_lists_everything(client, hosts):
    assert uuids(client.request('/instances', token='admin',
                                project=data.PROJECT_B)) == data.ALL


def test_reader_lists_own_project_only(client, hosts):
    assert uuids(client.reader('/instances')) == [data.A1, data.A2,
                                                  data.A3]
    assert uuids(client.reader('/instances', project=data.PROJECT_B)) == [
        data.B1, data.B2]
    assert uuids(client.reader('/instances', project='project-c')) == []


def test_reader_may_name_own_project(client, hosts):
    assert uuids(client.reader('/instances?project_id=%s'
                               % data.PROJECT_A)) == [data.A1, data.A2,
                                                      data.A3]


def test_reader_may_not_list_other_project(client, hosts):
    response = client.reader('/instances?project_id=%s' % data.PROJECT_B)
    error = base.assert_error(response, 403, errors.POLICY_DENIED)
    assert 'all_projects' in error['detail']


def test_member_without_reader_role_is_denied(client, hosts):
    response = client.request('/instances', token='bob',
                              project=data.PROJECT_A, roles='member')
    base.assert_error(response, 403, errors.POLICY_DENIED)


def test_system_scoped_token_is_denied(client, hosts):
    # Every rule is for project-scoped tokens.
    response = client.admin('/instances',
                            headers={'OpenStack-System-Scope': 'all'})
    base.assert_error(response, 403, errors.POLICY_DENIED)


def test_admin_filters_by_project(client, hosts):
    assert uuids(client.admin('/instances?project_id=%s'
                              % data.PROJECT_B)) == [data.B1, data.B2]


def test_filter_by_host(client, hosts):
    assert uuids(client.admin('/instances?host=%s' % hosts['host-b'])) == \
        data.HOST_B_INSTANCES
    assert uuids(client.reader('/instances?host=%s' % hosts['host-a'])) == \
        [data.A1, data.A2]
    assert uuids(client.admin('/instances?host=%s' % data.UNKNOWN)) == []


def test_pages_follow_next_links(client, hosts):
    pages = follow(client, '/instances?limit=2')
    assert [page for page, _links in pages] == [
        [data.A1, data.A2], [data.B1, data.A3], [data.B2]]
    assert pages[-1][1] == []
    next_href = pages[0][1][0]['href']
    path, query = next_href.split('?')
    assert path == '/instances'
    assert urllib.parse.parse_qs(query) == {'limit': ['2'],
                                            'marker': [data.A2]}


def test_full_last_page_links_to_an_empty_page(client, hosts):
    pages = follow(client, '/instances?limit=5')
    assert [page for page, _links in pages] == [data.ALL, []]


def test_next_link_keeps_filters(client, hosts):
    pages = follow(client, '/instances?limit=1&host=%s' % hosts['host-b'])
    assert [page for page, _links in pages] == [[data.A3], [data.B2], []]
    assert ('host=%s' % hosts['host-b']) in pages[0][1][0]['href']


def test_reader_pages_stay_in_project(client, hosts):
    pages = follow(client, '/instances?limit=2', persona='reader')
    assert [page for page, _links in pages] == [[data.A1, data.A2],
                                                [data.A3]]


def test_default_page_is_max_limit(client, conf, hosts):
    conf.set_override('max_limit', 3, 'api')
    response = client.admin('/instances')
    assert uuids(response) == data.ALL[:3]
    assert 'limit=3' in response.json['links'][0]['href']


@pytest.mark.parametrize('query, word', [
    ('limit=abc', 'limit'),
    ('limit=1.5', 'limit'),
    ('limit=', 'limit'),
    ('limit=0', 'limit'),
    ('limit=-1', 'limit'),
    ('limit=100000', 'limit'),
    ('limit=1&limit=2', 'limit'),
    ('sort=uuid', 'sort'),
    ('marker=not-a-uuid', 'marker'),
    ('marker=', 'marker'),
    ('host=abc', 'host'),
    ('project_id=', 'project_id'),
])
def test_malformed_query_is_400(client, hosts, query, word):
    error = base.assert_error(client.admin('/instances?' + query), 400,
                              errors.QUERY_INVALID)
    assert word in error['detail']


def test_limit_above_configured_max_is_400(client, conf, hosts):
    conf.set_override('max_limit', 3, 'api')
    assert uuids(client.admin('/instances?limit=3')) == data.ALL[:3]
    error = base.assert_error(client.admin('/instances?limit=4'), 400,
                              errors.QUERY_INVALID)
    assert '3' in error['detail']


def test_unknown_marker_is_404(client, hosts):
    response = client.admin('/instances?marker=%s' % data.UNKNOWN)
    error = base.assert_error(response, 404, errors.MARKER_NOT_FOUND)
    assert data.UNKNOWN in error['detail']


def test_marker_of_other_project_is_404_for_reader(client, hosts):
    response = client.reader('/instances?marker=%s' % data.B1)
    base.assert_error(response, 404, errors.MARKER_NOT_FOUND)
    # An admin may use it.
    assert uuids(client.admin('/instances?marker=%s' % data.B1)) == [
        data.A3, data.B2]


def test_show_instance_with_latest_report(client, hosts):
    response = client.admin('/instances/%s' % data.A1)
    assert response.status_int == 200
    body = response.json
    assert body['uuid'] == data.A1
    assert body['host_uuid'] == hosts['host-a']
    assert body['project_id'] == data.PROJECT_A
    latest = body['latest_report']
    assert latest['sequence'] == data.HOST_A_REPORTS
    assert latest['id'] == data.report_ids(data.A1)[0]
    assert latest['collected_at'] == '2026-11-22T09:03:30Z'
    assert latest['allocated_bytes'] == 4 * data.GIB
    assert latest['wss'] == data.wss(data.HOST_A_REPORTS)
    assert latest['mrc'] == data.mrc(data.HOST_A_REPORTS)
    assert latest['guest_stats'] == {'major_faults': 30.0}


def store_logs(host_uuid, logs):
    """host-a's next report, of A1 only, with ``logs``."""
    sequence = data.HOST_A_REPORTS + 1
    assert db_api.store_report(
        context.get_admin_context(), reports.validate_report(
            {'host_uuid': host_uuid, 'sequence': sequence,
             'collected_at': '2026-11-22T09:%02d:30Z' % sequence,
             'instances': [{'uuid': data.A1, 'project_id': data.PROJECT_A,
                            'allocated_bytes': 4 * data.GIB,
                            'logs': logs}]},
            max_mrc_points=100, max_instances=100))


def show_latest(client, version):
    response = client.admin('/instances/%s' % data.A1, headers={
        'OpenStack-API-Version': 'memcanal %s' % version})
    assert response.status_int == 200, response.body
    return response.json['latest_report']


def test_logs_from_microversion_1_2(client, hosts):
    prl = {'events': 120, 'logged': 61440, 'missed': 3,
           'handler_ns': 250000, 'vm_cpu_ns': 0}
    store_logs(hosts['host-a'], {'prl': prl, 'pml': {'logged': 1024}})
    assert show_latest(client, '1.2')['logs'] == {
        'prl': dict(prl, missed_per_event=0.025),
        # No events: nothing was missed per event.
        'pml': {'logged': 1024, 'missed_per_event': 0.0}}


@pytest.mark.parametrize('version', ['1.0', '1.1'])
def test_no_logs_before_microversion_1_2(client, hosts, version):
    store_logs(hosts['host-a'], {'prl': {'events': 4, 'missed': 2}})
    assert 'logs' not in show_latest(client, version)


def test_logs_are_null_when_the_report_had_none(client, hosts):
    assert show_latest(client, '1.2')['logs'] is None


def test_show_matches_list_entry(client, hosts):
    shown = client.admin('/instances/%s' % data.B2).json
    del shown['latest_report']
    [listed] = [i for i in client.admin('/instances').json['instances']
                if i['uuid'] == data.B2]
    assert shown == listed


def test_reader_sees_own_instance(client, hosts):
    response = client.reader('/instances/%s' % data.A3)
    assert response.status_int == 200
    assert response.json['latest_report']['wss'] == data.wss(1)


def test_reader_of_other_project_is_403(client, hosts):
    response = client.reader('/instances/%s' % data.A1,
                             project=data.PROJECT_B)
    error = base.assert_error(response, 403, errors.POLICY_DENIED)
    assert 'memcanal:instances:show' in error['detail']


def test_show_unknown_instance_is_404(client, hosts):
    error = base.assert_error(client.admin('/instances/%s' % data.UNKNOWN),
                              404, errors.INSTANCE_NOT_FOUND)
    assert data.UNKNOWN in error['detail']


@pytest.mark.parametrize('bad', ['nope', '10000000-0000-4000-8000'])
def test_show_invalid_uuid_is_404(client, hosts, bad):
    base.assert_error(client.admin('/instances/%s' % bad), 404,
                      errors.INSTANCE_NOT_FOUND)


def test_show_takes_no_query_parameters(client, hosts):
    base.assert_error(client.admin('/instances/%s?limit=1' % data.A1),
                      400, errors.QUERY_INVALID)


V13 = {'OpenStack-API-Version': 'memcanal 1.3'}


def test_observed_memory_and_presence_from_microversion_1_3(client, hosts):
    older = client.admin('/instances/%s' % data.A1,
                         headers={'OpenStack-API-Version': 'memcanal 1.2'})
    assert 'observed_bytes' not in older.json
    shown = client.admin('/instances/%s' % data.A1, headers=V13).json
    assert (shown['observed_bytes'], shown['target_bytes'],
            shown['deleted_at']) == (3 * data.GIB, None, None)
    assert shown['last_reported_at'].endswith('Z')


def test_deleted_instances_are_listed_only_on_request(client, hosts):
    ctx = context.get_admin_context()
    # host-a reports again, without B1: it is gone at once.
    db_api.store_report(ctx, reports.validate_report({
        'host_uuid': hosts['host-a'], 'sequence': 9,
        'collected_at': '2026-11-22T10:00:00Z',
        'instances': [data._sample(uuid, 9) for uuid in (data.A1, data.A2)],
    }, max_mrc_points=256, max_instances=10))
    assert db_api.mark_gone_instances(ctx, gone_after=0) == [data.B1]
    assert uuids(client.admin('/instances', headers=V13)) == [
        uuid for uuid in data.ALL if uuid != data.B1]
    deleted = client.admin('/instances?deleted=true', headers=V13)
    assert uuids(deleted) == [data.B1]
    assert deleted.json['instances'][0]['deleted_at'].endswith('Z')
    assert uuids(client.admin('/instances?deleted=false',
                              headers=V13)) == uuids(
        client.admin('/instances', headers=V13))
    # Shown by its uuid it still is, with its history.
    assert client.admin('/instances/%s' % data.B1).status_int == 200
    base.assert_error(client.admin('/instances?deleted=true'), 400,
                      errors.QUERY_INVALID)
    base.assert_error(client.admin('/instances?deleted=yes', headers=V13),
                      400, errors.QUERY_INVALID)


V18 = {'OpenStack-API-Version': 'memcanal 1.8'}


def test_intervals_from_microversion_1_8(client, hosts):
    """A sampled VM's working set shows its 95 % interval, and its latest
    report the intervals and the band of its curve; an unsampled VM's
    working set has none (null), its reports empty ones."""
    data.store_sampled(hosts['host-b'], 2, data.HOST_B_INSTANCES, {data.A3})
    listed = {i['uuid']: i for i in client.admin(
        '/instances', headers=V18).json['instances']}
    assert listed[data.A3]['wss_bytes'] == data.SAMPLED_WSS
    assert listed[data.A3]['wss_bounds_bytes'] == data.SAMPLED_BOUNDS
    assert listed[data.B2]['wss_bounds_bytes'] is None
    shown = client.admin('/instances/%s' % data.A3, headers=V18).json
    assert shown['wss_bounds_bytes'] == data.SAMPLED_BOUNDS
    latest = shown['latest_report']
    assert latest['wss_bounds'] == {'sampled': data.SAMPLED_BOUNDS}
    assert latest['mrc']['sampled'] == data.SAMPLED_CURVE
    assert latest['mrc_bands'] == {'sampled': data.SAMPLED_BAND}
    other = client.admin('/instances/%s' % data.B2, headers=V18).json
    assert (other['latest_report']['wss_bounds'],
            other['latest_report']['mrc_bands']) == ({}, {})
    [newest, older] = client.admin('/instances/%s/reports' % data.A3,
                                   headers=V18).json['reports']
    assert newest['mrc_bands'] == {'sampled': data.SAMPLED_BAND}
    assert older['wss_bounds'] == {}
    at_1_7 = {'OpenStack-API-Version': 'memcanal 1.7'}
    before = client.admin('/instances/%s' % data.A3, headers=at_1_7).json
    assert 'wss_bounds_bytes' not in before
    assert 'mrc_bands' not in before['latest_report']
    assert 'wss_bounds' not in client.admin(
        '/instances/%s/reports' % data.A3, headers=at_1_7).json[
        'reports'][0]
