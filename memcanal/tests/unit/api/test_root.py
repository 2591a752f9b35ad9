"""The versions document, microversion negotiation and Accept."""

import pytest
import webob

from memcanal.api import errors
from memcanal.api import microversion
from memcanal.api import util
from memcanal.tests.unit.api import base


def test_versions_document_needs_no_token(client):
    response = client.request('/', token=None)
    assert response.status_int == 200
    assert response.content_type == 'application/json'
    assert response.json == {'versions': [{
        'id': 'v1.0', 'min_version': '1.0', 'max_version': '1.10',
        'status': 'CURRENT', 'links': [{'rel': 'self', 'href': ''}]}]}


def test_versions_document_follows_versions_list(client, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS',
                        ['1.0', '1.1', '1.2', '1.3', '1.4', '1.5', '1.6',
                         '1.7', '1.8', '1.9', '1.10', '1.11'])
    [version] = client.request('/').json['versions']
    assert (version['min_version'], version['max_version']) == ('1.0', '1.11')


def test_no_header_is_minimum_version(client):
    response = client.request('/')
    assert response.headers['OpenStack-API-Version'] == 'memcanal 1.0'
    assert response.headers['Vary'] == 'OpenStack-API-Version'
    assert response.headers['x-openstack-request-id'].startswith('req-')


@pytest.mark.parametrize('requested, served', [
    ('memcanal 1.0', '1.0'), ('memcanal latest', '1.10'),
    ('MEMCANAL 1.0', '1.0'), ('compute 2.90, memcanal 1.0', '1.0'),
    ('memcanal 1.1', '1.1'), ('memcanal 1.2', '1.2'),
    ('memcanal 1.3', '1.3'), ('memcanal 1.4', '1.4'),
    ('memcanal 1.5', '1.5'), ('memcanal 1.6', '1.6'),
    ('memcanal 1.7', '1.7'), ('memcanal 1.8', '1.8'),
    ('memcanal 1.9', '1.9'), ('memcanal 1.10', '1.10')])
def test_accepted_version_is_echoed(client, requested, served):
    response = client.request(
        '/instances', headers={'OpenStack-API-Version': requested})
    assert response.status_int == 200
    assert response.headers['OpenStack-API-Version'] == 'memcanal ' + served


def test_other_services_version_is_ignored(client):
    response = client.request(
        '/', headers={'OpenStack-API-Version': 'compute 2.90'})
    assert response.headers['OpenStack-API-Version'] == 'memcanal 1.0'


def test_latest_is_the_newest_version(client, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS', ['1.0', '1.1'])
    response = client.request(
        '/', headers={'OpenStack-API-Version': 'memcanal latest'})
    assert response.headers['OpenStack-API-Version'] == 'memcanal 1.1'


@pytest.mark.parametrize('requested', ['memcanal 1.11', 'memcanal 0.9',
                                       'memcanal 2.0'])
def test_version_out_of_range_is_406(client, requested):
    response = client.request(
        '/instances', headers={'OpenStack-API-Version': requested})
    error = base.assert_error(response, 406,
                              errors.MICROVERSION_NOT_ACCEPTABLE)
    assert (error['min_version'], error['max_version']) == ('1.0', '1.10')
    assert requested.split()[1] in error['detail']
    assert response.headers['Vary'] == 'OpenStack-API-Version'


def test_malformed_version_is_400(client):
    response = client.request(
        '/', headers={'OpenStack-API-Version': 'memcanal one'})
    base.assert_error(response, 400, errors.MICROVERSION_INVALID)


def test_is_supported(client, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS', ['1.0', '1.1'])
    seen = {}

    @util.wsgify
    def probe(req):
        seen['1.1'] = microversion.is_supported(req, '1.1')
        return util.json_response({})

    app = microversion.MicroversionMiddleware(probe)
    webob.Request.blank('/').get_response(app)
    assert seen['1.1'] is False
    webob.Request.blank('/', headers={
        'OpenStack-API-Version': 'memcanal 1.1'}).get_response(app)
    assert seen['1.1'] is True


@pytest.mark.parametrize('accept', ['application/json', '*/*',
                                    'text/html, application/*;q=0.5',
                                    None])
def test_json_accepted(client, accept):
    headers = {'Accept': accept} if accept else {}
    response = client.request('/hosts', headers=headers)
    assert response.status_int == 200
    assert response.content_type == 'application/json'


@pytest.mark.parametrize('accept', ['text/html', 'text/plain',
                                    'application/json;q=0, */*;q=0'])
def test_accept_without_json_is_406(client, accept):
    response = client.request('/hosts', headers={'Accept': accept})
    base.assert_error(response, 406, errors.ACCEPT_NOT_ACCEPTABLE)


def test_errors_are_json_even_when_html_is_preferred(client):
    # webob alone would answer HTML to a browser-like Accept header.
    response = client.request('/nowhere',
                              headers={'Accept': 'text/html,*/*;q=0.8'})
    base.assert_error(response, 404, errors.ROUTE_NOT_FOUND)
