"""Unknown paths, wrong methods, missing tokens and unexpected errors."""

import pytest

from memcanal.api import errors
from memcanal.api import handler
from memcanal.db import api as db_api
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


@pytest.mark.parametrize('path', ['/nowhere', '/hosts/', '/v1/hosts',
                                  '/instances/%s/reports/1' % data.A1])
def test_unknown_path_is_404(client, path):
    error = base.assert_error(client.request(path), 404,
                              errors.ROUTE_NOT_FOUND)
    assert path in error['detail']


@pytest.mark.parametrize('path, allowed, method', [
    (path, allowed, method) for path, allowed in [
        ('/', 'GET'), ('/hosts', 'GET'), ('/instances', 'GET'),
        ('/instances/%s' % data.A1, 'GET, PATCH'),
        ('/instances/%s/reports' % data.A1, 'GET'), ('/decisions', 'GET'),
        ('/decisions/%s/approve' % data.A1, 'POST')]
    for method in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')
    if method not in allowed])
def test_wrong_method_is_405_with_allow(client, path, allowed, method):
    response = client.request(path, method=method)
    error = base.assert_error(response, 405, errors.METHOD_NOT_ALLOWED)
    assert response.headers['Allow'] == allowed
    assert method in error['detail']


def test_allow_lists_every_declared_method(monkeypatch):
    def nothing(environ, start_response):
        raise AssertionError('not dispatched')

    mapper = handler.make_map({'/things': {'GET': nothing,
                                           'PUT': nothing}})
    match = mapper.match(environ={'PATH_INFO': '/things',
                                  'REQUEST_METHOD': 'DELETE'})
    assert match['action'] is handler.handle_405
    assert match['_methods'] == 'GET, PUT'


@pytest.mark.parametrize('path', ['/hosts', '/instances',
                                  '/instances/%s' % data.A1])
def test_no_token_is_401(client, path):
    base.assert_error(client.request(path, token=None), 401,
                      errors.AUTH_UNAUTHORIZED)


def test_unknown_path_without_token_is_401(client):
    # Authentication comes before routing: nothing is revealed.
    base.assert_error(client.request('/nowhere', token=None), 401,
                      errors.AUTH_UNAUTHORIZED)


def test_unexpected_exception_is_json_500(client, monkeypatch):
    def broken(context):
        raise RuntimeError('password=hunter2 in a SQL error')

    monkeypatch.setattr(db_api, 'list_hosts', broken)
    response = client.request('/hosts')
    error = base.assert_error(response, 500, errors.INTERNAL_ERROR)
    assert 'hunter2' not in response.text
    assert error['request_id'] in error['detail']
