"""/instances/{uuid}/reports: newest first, in pages, by policy."""

import urllib.parse

import pytest

from memcanal.api import errors
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


def reports(response):
    assert response.status_int == 200, response.body
    return response.json['reports']


def test_reports_newest_first(client, hosts):
    listed = reports(client.admin('/instances/%s/reports' % data.A1))
    assert [r['sequence'] for r in listed] == [3, 2, 1]
    assert [r['id'] for r in listed] == data.report_ids(data.A1)
    assert [r['wss'] for r in listed] == [data.wss(3), data.wss(2),
                                          data.wss(1)]
    assert listed[0]['mrc'] == data.mrc(3)
    assert listed[2]['collected_at'] == '2026-11-22T09:01:30Z'
    assert set(listed[0]) == {'id', 'sequence', 'collected_at',
                              'allocated_bytes', 'wss', 'mrc',
                              'guest_stats'}


def test_latest_report_is_first_report(client, hosts):
    latest = client.admin('/instances/%s' % data.B1).json['latest_report']
    first = reports(client.admin('/instances/%s/reports' % data.B1))[0]
    assert latest == first


def test_pages_and_next_links(client, hosts):
    ids = data.report_ids(data.A1)
    response = client.admin('/instances/%s/reports?limit=2' % data.A1)
    assert [r['id'] for r in reports(response)] == ids[:2]
    [link] = response.json['links']
    assert link['rel'] == 'next'
    path, query = link['href'].split('?')
    assert path == '/instances/%s/reports' % data.A1
    assert urllib.parse.parse_qs(query) == {'limit': ['2'],
                                            'marker': [str(ids[1])]}
    response = client.admin(link['href'])
    assert [r['id'] for r in reports(response)] == ids[2:]
    assert response.json['links'] == []


def test_full_last_page_links_to_an_empty_page(client, hosts):
    response = client.admin('/instances/%s/reports?limit=3' % data.A1)
    assert len(reports(response)) == 3
    [link] = response.json['links']
    response = client.admin(link['href'])
    assert reports(response) == []
    assert response.json['links'] == []


def test_reader_sees_own_reports(client, hosts):
    assert len(reports(client.reader('/instances/%s/reports'
                                     % data.A2))) == 3


def test_reader_of_other_project_is_403(client, hosts):
    response = client.reader('/instances/%s/reports' % data.A1,
                             project=data.PROJECT_B)
    error = base.assert_error(response, 403, errors.POLICY_DENIED)
    assert 'memcanal:instances:reports:list' in error['detail']


def test_unknown_instance_is_404(client, hosts):
    base.assert_error(client.admin('/instances/%s/reports' % data.UNKNOWN),
                      404, errors.INSTANCE_NOT_FOUND)
    base.assert_error(client.admin('/instances/bogus/reports'),
                      404, errors.INSTANCE_NOT_FOUND)


def test_marker_of_another_instance_is_404(client, hosts):
    other = data.report_ids(data.A2)[0]
    response = client.admin('/instances/%s/reports?marker=%d'
                            % (data.A1, other))
    error = base.assert_error(response, 404, errors.MARKER_NOT_FOUND)
    assert str(other) in error['detail']


def test_unknown_marker_is_404(client, hosts):
    base.assert_error(
        client.admin('/instances/%s/reports?marker=999999' % data.A1),
        404, errors.MARKER_NOT_FOUND)


@pytest.mark.parametrize('query, word', [
    ('marker=abc', 'marker'),
    ('marker=%s' % data.A1, 'marker'),
    ('marker=0', 'marker'),
    ('marker=99999999999', 'marker'),
    ('limit=abc', 'limit'),
    ('limit=0', 'limit'),
    ('limit=100000', 'limit'),
    ('newest=1', 'newest'),
])
def test_malformed_query_is_400(client, hosts, query, word):
    response = client.admin('/instances/%s/reports?%s' % (data.A1, query))
    error = base.assert_error(response, 400, errors.QUERY_INVALID)
    assert word in error['detail']
