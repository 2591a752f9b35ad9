"""The OpenAPI reference: committed as generated, every JSON route in it,
and what it says of versions and response bodies true of the real API."""

import json
import pathlib

import jsonschema
import pytest
import schemathesis

from memcanal.api import errors
from memcanal.api import handler
from memcanal.api import microversion
from memcanal.api import openapi
from memcanal.api.schemas import responses
from memcanal.tests.unit.api import full_cloud
from memcanal.tests.unit.api import data

COMMITTED = (pathlib.Path(__file__).parents[4] / 'doc' / 'api-ref'
             / 'openapi.json')
ALL_VERSIONS = microversion.VERSIONS


def _header(version):
    return {microversion.HEADER: '%s %s' % (microversion.SERVICE_TYPE,
                                            version)}


def _previous(version):
    return ALL_VERSIONS[ALL_VERSIONS.index(version) - 1]


def _operations(document):
    for path, methods in document['paths'].items():
        for method, operation in methods.items():
            yield path, method.upper(), operation


@pytest.fixture
def seeded(database):
    """full_cloud.seed's rows, by collection."""
    return full_cloud.seed()


def test_committed_reference_is_the_generated_one():
    assert COMMITTED.read_text() == openapi.dumps(openapi.build()), (
        'doc/api-ref/openapi.json is out of date; regenerate it with: %s'
        % openapi.REGENERATE)


@pytest.mark.parametrize('version', [None] + ALL_VERSIONS)
def test_documents_are_valid_openapi(version):
    schemathesis.openapi.from_dict(openapi.build(version)).validate()


def test_every_route_is_described_but_html_pages(monkeypatch):
    document = openapi.build()
    described = {(path, method) for path, method, _ in _operations(document)}
    declared = {(path, method)
                for path, methods in handler.ROUTE_DECLARATIONS.items()
                for method in methods if openapi.is_json(path)}
    assert described == declared

    routes = dict(handler.ROUTE_DECLARATIONS,
                  **{'/dashboard': {'GET': object()},
                     '/dashboard/{file}': {'GET': object()}})
    monkeypatch.setattr(handler, 'ROUTE_DECLARATIONS', routes)
    assert '/dashboard' not in openapi.build()['paths']
    routes['/widgets'] = {'GET': object()}
    with pytest.raises(openapi.UndescribedRoute, match='GET /widgets'):
        openapi.build()


def test_versioned_documents_hold_what_the_version_has():
    oldest = openapi.build('1.0')
    assert '/decisions' not in oldest['paths']
    listed = oldest['paths']['/instances']['get']['parameters']
    assert 'deleted' not in [p.get('name') for p in listed]
    host = oldest['components']['schemas']['Host']
    assert 'report_interval' not in host['properties']
    assert set(host['required']) == set(host['properties'])

    reference = openapi.build()
    host = reference['components']['schemas']['Host']
    assert host['properties']['report_interval'][
        responses.MIN_VERSION] == '1.3'
    assert 'report_interval' not in host['required']
    [deleted] = [p for p in reference['paths']['/instances']['get'][
        'parameters'] if p.get('name') == 'deleted']
    assert deleted[responses.MIN_VERSION] == '1.3'


def test_operations_appear_at_their_microversion(client):
    """Before its version an operation is the unknown route; from it, a
    request naming nothing is that resource's 404 (or a success)."""
    later = [(path, method, operation['x-memcanal-min-version'])
             for path, method, operation in _operations(openapi.build())
             if 'x-memcanal-min-version' in operation]
    assert later
    for path, method, version in later:
        path = path.replace('{uuid}', data.UNKNOWN)
        body = {} if method == 'PATCH' else None
        before = client.request(path, method=method, body=body,
                                headers=_header(_previous(version)))
        error = json.loads(before.body)['errors'][0]
        assert error['code'] == errors.ROUTE_NOT_FOUND, (path, method)
        since = client.request(path, method=method, body=body,
                               headers=_header(version))
        assert errors.ROUTE_NOT_FOUND not in since.text, (path, method)


def _get_paths(document, seeded):
    """Each GET of ``document`` with a seeded row in its path, and the
    component its 200 body is documented by."""
    for path, method, operation in _operations(document):
        if method != 'GET':
            continue
        name = operation['responses']['200']['$ref'].rsplit('/', 1)[-1]
        collection = path.split('/')[1]
        for uuid in (seeded.get(collection, [None])
                     if '{uuid}' in path else [None]):
            yield path.replace('{uuid}', str(uuid)), name


@pytest.mark.parametrize('version', ALL_VERSIONS)
def test_responses_match_their_schemas(client, seeded, version):
    """Every GET, on every seeded row, at every version, has exactly the
    body documented for that version; errors the documented format."""
    document = openapi.build(version)
    components = document['components']
    for path, name in _get_paths(document, seeded):
        response = client.request(path, headers=_header(version))
        assert response.status_int == 200, (path, response.text)
        jsonschema.Draft202012Validator(
            {'$ref': '#/components/schemas/%s' % name,
             'components': components}).validate(response.json)
    missing = client.request('/instances/%s' % data.UNKNOWN,
                             headers=_header(version))
    jsonschema.Draft202012Validator(
        {'$ref': '#/components/schemas/Error',
         'components': components}).validate(missing.json)
