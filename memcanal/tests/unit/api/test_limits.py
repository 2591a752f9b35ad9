"""What the API does with bodies too large, not JSON, or quoted in errors."""

import io
import json

import pytest
import webob

from memcanal.api import deploy
from memcanal.api import errors
from memcanal.api.schemas import decisions as decision_schemas
from memcanal.api import util
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V11 = {'OpenStack-API-Version': 'memcanal 1.1'}
MIB = 2 ** 20
# Small, so the tests build small bodies around it.
LIMIT = 1024
APPROVE = '/decisions/%s/approve' % data.UNKNOWN
PATCH = '/instances/%s' % data.A1


class CountingStream(io.BytesIO):
    """A request body that counts the bytes the API reads of it."""

    def __init__(self, size):
        super().__init__(b' ' * size)
        self.bytes_read = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.bytes_read += len(chunk)
        return chunk


@pytest.fixture
def limited(conf, database, hosts):
    """A client of the app with ``[api] max_request_body_size`` LIMIT."""
    conf.set_override('max_request_body_size', LIMIT, 'api')
    return base.Client(deploy.loadapp(conf))


def send(client, path, stream, content_length, token='admin'):
    """PATCH ``stream`` as JSON, with ``content_length`` or chunked."""
    environ = {'wsgi.input': stream}
    if content_length is None:
        # What a WSGI server that decodes chunked bodies says.
        environ['wsgi.input_terminated'] = True
    else:
        environ['CONTENT_LENGTH'] = str(content_length)
    req = webob.Request.blank(
        path, method='PATCH', environ=environ,
        headers=base.auth_headers(token, headers=dict(
            V11, **{'Content-Type': 'application/json'})))
    if content_length is None:
        req.environ.pop('CONTENT_LENGTH', None)
    return req.get_response(client.app)


@pytest.mark.parametrize('token', ['admin', None])
def test_content_length_over_the_limit_is_413_unread(limited, token):
    # Refused before authentication, so an anonymous body is not read
    # either.
    stream = CountingStream(50 * MIB)
    response = send(limited, PATCH, stream, 50 * MIB, token=token)
    error = base.assert_error(response, 413, errors.BODY_TOO_LARGE)
    assert error['detail'] == ('The request body is %d bytes; at most %d '
                               'bytes are accepted.' % (50 * MIB, LIMIT))
    assert stream.bytes_read == 0
    assert len(response.body) < 1000


def test_chunked_body_is_read_to_the_limit_plus_one(limited):
    stream = CountingStream(50 * MIB)
    response = send(limited, PATCH, stream, None)
    error = base.assert_error(response, 413, errors.BODY_TOO_LARGE)
    assert 'over %d bytes' % LIMIT in error['detail']
    assert stream.bytes_read == LIMIT + 1


@pytest.mark.parametrize('chunked', [False, True])
def test_body_of_exactly_the_limit_is_handled(limited, chunked):
    body = b'{"opt_out": true}'
    body += b' ' * (LIMIT - len(body))
    response = send(limited, PATCH, io.BytesIO(body),
                    None if chunked else LIMIT)
    assert response.status_int == 200, response.body
    assert response.json['opt_out'] is True
    body += b' '
    base.assert_error(send(limited, PATCH, io.BytesIO(body),
                           None if chunked else LIMIT + 1),
                      413, errors.BODY_TOO_LARGE)


def test_default_limit_takes_the_largest_legitimate_body(client):
    # A reason of the most characters, each escaped to its longest
    # (a surrogate pair, 12 bytes), passes the limit and the schema: the
    # unknown decision is what is wrong with it.
    most = decision_schemas.TRANSITION['properties']['reason']['maxLength']
    body = json.dumps({'reason': '\U0001F600' * most}).encode()
    assert len(body) > 12 * most
    response = client.request(APPROVE, method='POST', headers=V11,
                              body=body)
    base.assert_error(response, 404, errors.DECISION_NOT_FOUND)


@pytest.mark.parametrize('content_type', [
    'text/plain', 'application/x-www-form-urlencoded', 'application/xml',
    None])
def test_body_of_another_type_is_415(client, hosts, content_type):
    headers = dict(V11)
    if content_type:
        headers['Content-Type'] = content_type
    req = webob.Request.blank(PATCH, method='PATCH', body=b'{"opt_out": 1}',
                              headers=base.auth_headers('admin',
                                                        headers=headers))
    error = base.assert_error(req.get_response(client.app), 415,
                              errors.BODY_UNSUPPORTED_MEDIA_TYPE)
    assert error['detail'] == 'The body is %s; only application/json is ' \
        'accepted.' % ('of type %s' % content_type if content_type
                       else 'without a Content-Type')


def test_json_with_parameters_is_json(client, hosts):
    response = client.request(PATCH, method='PATCH', body={'opt_out': True},
                              headers=dict(V11, **{
                                  'Content-Type':
                                  'application/json; charset=UTF-8'}))
    assert response.status_int == 200, response.body


def test_unparseable_json_stays_400(client, hosts):
    base.assert_error(client.request(PATCH, method='PATCH', headers=V11,
                                     body=b'{"opt_out": tru'),
                      400, errors.BODY_INVALID)


def test_no_body_needs_no_content_type(client):
    # An optional body left out: the decision is looked up.
    response = client.request(APPROVE, method='POST', headers=V11)
    base.assert_error(response, 404, errors.DECISION_NOT_FOUND)


def test_multi_megabyte_field_is_not_echoed(conf, database):
    conf.set_override('max_request_body_size', 16 * MIB, 'api')
    client = base.Client(deploy.loadapp(conf))
    reason = 'x' * (4 * MIB)
    response = client.request(APPROVE, method='POST', headers=V11,
                              body={'reason': reason})
    error = base.assert_error(response, 400, errors.BODY_INVALID)
    quoted = repr(reason)
    assert error['detail'] == "Invalid body at reason: %s... (%d " \
        "characters in all) is too long" % (quoted[:util.MAX_QUOTED],
                                            len(quoted))
    assert len(response.body) < 1000


def test_schema_message_keeps_its_end_after_the_cut():
    req = webob.Request.blank('/', method='POST', content_type=util.JSON,
                              body=json.dumps([1] * MIB).encode())
    with pytest.raises(webob.exc.HTTPBadRequest) as raised:
        util.extract_json(req, decision_schemas.TRANSITION)
    detail = raised.value.detail
    assert detail.startswith('Invalid body: [1, 1, 1')
    assert detail.endswith("characters in all) is not of type 'object', "
                           "'null'")
    assert len(detail) < 300


@pytest.mark.parametrize('url, body, status, code', [
    # A field name, which jsonschema quotes in place of the value.
    (APPROVE, {'k' * MIB: 1}, 400, errors.BODY_INVALID),
    # A query value.
    ('/instances?marker=' + 'z' * MIB, None, 400, errors.QUERY_INVALID),
    # The path itself.
    ('/' + 'p' * MIB, None, 404, errors.ROUTE_NOT_FOUND),
])
def test_no_detail_quotes_more_than_a_few_hundred_characters(
        conf, database, url, body, status, code):
    conf.set_override('max_request_body_size', 16 * MIB, 'api')
    client = base.Client(deploy.loadapp(conf))
    response = client.request(url, method='POST' if body else 'GET',
                              headers=V11, body=body)
    error = base.assert_error(response, status, code)
    assert 'characters in all)' in error['detail']
    assert len(error['detail']) < util.MAX_DETAIL + 40
