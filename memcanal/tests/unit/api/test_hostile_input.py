"""Requests no client means to send, answered 4xx in the error format,
not 500: bytes that are not UTF-8, NUL characters, lone surrogates and
bodies nested deeper than the JSON parser goes.

Each was a 500 on some database (PostgreSQL refuses NUL; no database
stores a lone surrogate) or on all, a path not UTF-8 even without the
JSON error format (the request log failed outside the fault wrapper).
"""

import logging

import pytest
import webob

from memcanal.api import errors
from memcanal.api import requestlog
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V11 = {'OpenStack-API-Version': 'memcanal 1.1'}


def raw_request(app, path, query=''):
    """A GET of ``path`` and ``query`` as a WSGI server passes bytes that
    are not UTF-8: PATH_INFO each byte as one character (PEP 3333), the
    query string as sent."""
    req = webob.Request.blank('/', headers=base.auth_headers('admin'))
    req.environ['PATH_INFO'] = path.decode('latin-1')
    req.environ['QUERY_STRING'] = query
    return req.get_response(app)


@pytest.mark.parametrize('path,code', [
    (b'/instances/\xff', errors.INSTANCE_NOT_FOUND),
    (b'/hosts/\xed\xa0\x80', errors.HOST_NOT_FOUND),
    (b'/\xff', errors.ROUTE_NOT_FOUND),
])
def test_a_path_not_utf8_is_404(app, path, code):
    base.assert_error(raw_request(app, path), 404, code)


@pytest.mark.parametrize('query', [
    'project_id=%ED%A0%80', 'project_id=%FF', '%FF=1'])
def test_a_query_not_utf8_is_400(app, query):
    error = base.assert_error(raw_request(app, b'/instances', query), 400,
                              errors.QUERY_INVALID)
    assert 'not UTF-8' in error['detail']


@pytest.mark.parametrize('query', ['project_id=a%00b', 'a%00=1'])
def test_a_query_with_nul_is_400(client, query):
    error = base.assert_error(client.admin('/instances?' + query), 400,
                              errors.QUERY_INVALID)
    assert 'NUL' in error['detail']


@pytest.mark.parametrize('body', [
    b'{"reason": "before\\u0000after"}',
    b'{"reason": "\\ud83d"}',
    b'{"\\u0000": 1}',
    b'{"reason": [["\\udc00"]]}',
])
def test_a_body_string_no_database_stores_is_400(client, hosts, body):
    error = base.assert_error(client.admin(
        '/instances/%s' % data.A1, method='PATCH', headers=V11, body=body),
        400, errors.BODY_INVALID)
    assert 'NUL character or a lone surrogate' in error['detail']


def test_an_escaped_backslash_is_no_nul(client, hosts):
    """``\\\\u0000`` is a backslash and five characters: the schema, not
    the NUL check, refuses it where it does not belong."""
    error = base.assert_error(client.admin(
        '/instances/%s' % data.A1, method='PATCH', headers=V11,
        body=b'{"mechanism": "\\\\u0000"}'), 400, errors.BODY_INVALID)
    assert 'mechanism' in error['detail']


def test_a_body_nested_too_deeply_is_400(client, hosts):
    depth = 100000  # 200 kB, under [api] max_request_body_size
    error = base.assert_error(client.admin(
        '/instances/%s' % data.A1, method='PATCH', headers=V11,
        body=b'[' * depth + b']' * depth), 400, errors.BODY_INVALID)
    assert 'nests too deeply' in error['detail']


def test_a_path_not_utf8_is_logged_quoted(app, caplog):
    caplog.set_level(logging.INFO, logger=requestlog.__name__)
    raw_request(app, b'/instances/\xff')
    [line] = [r.getMessage() for r in caplog.records
              if r.name == requestlog.__name__]
    assert '"GET /instances/%FF" status: 404' in line
