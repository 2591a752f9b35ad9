"""Query-string validation, error rendering, links and times."""

import datetime
import urllib.parse

import pytest
import webob
import webob.exc

from memcanal.api import errors
from memcanal.api.schemas import common
from memcanal.api.schemas import instances
from memcanal.api import util

SCHEMA = instances.list_query(max_limit=50)


def validate(query):
    return util.validate_query_params(webob.Request.blank('/?' + query),
                                      SCHEMA)


def bad(query):
    with pytest.raises(webob.exc.HTTPBadRequest) as raised:
        validate(query)
    assert raised.value.comment == errors.QUERY_INVALID
    return str(raised.value.detail)


def test_valid_query_is_converted():
    marker = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee'
    assert validate('limit=50&marker=%s&project_id=p' % marker) == {
        'limit': 50, 'marker': marker, 'project_id': 'p'}
    assert validate('') == {}


def test_details_say_what_is_wrong():
    assert bad('limit=abc') == \
        "Query parameter limit must be an integer, not 'abc'."
    assert bad('limit=51') == \
        'Invalid query parameter limit: 51 is greater than the maximum ' \
        'of 50'
    assert bad('limit=0') == \
        'Invalid query parameter limit: 0 is less than the minimum of 1'
    assert bad('limit=1&limit=1') == \
        'Query parameter limit is given 2 times; give it once.'
    assert bad('b=1&a=2') == (
        'Unknown query parameter(s): a, b. Accepted: host, limit, marker, '
        'project_id.')
    assert 'marker' in bad('marker=123')


@pytest.mark.parametrize('value', ['1_0', ' 5', '5 ', '+5', '0x10',
                                   '9' * 5000])
def test_only_plain_decimal_integers(value):
    assert 'limit' in bad('limit=%s' % urllib.parse.quote(value))


def test_error_response_format():
    exc = webob.exc.HTTPConflict('It clashed.', comment='memcanal.x.y',
                                 headers={'Retry-After': '5'})
    response = util.error_response({'openstack.request_id': 'req-1'}, exc)
    assert response.status == '409 Conflict'
    assert response.content_type == 'application/json'
    assert response.headers['Retry-After'] == '5'
    assert response.json == {'errors': [{
        'status': 409, 'code': 'memcanal.x.y', 'title': 'Conflict',
        'detail': 'It clashed.', 'request_id': 'req-1'}]}


def test_error_response_defaults():
    response = util.error_response({}, webob.exc.HTTPNotFound())
    [error] = response.json['errors']
    assert error['code'] == errors.DEFAULT
    assert error['detail'] == webob.exc.HTTPNotFound.explanation
    assert 'request_id' not in error


def test_wsgify_renders_raised_errors_as_json():
    @util.wsgify
    def handler(req):
        raise webob.exc.HTTPGone('Went.', comment='memcanal.gone')

    response = webob.Request.blank(
        '/', headers={'Accept': 'text/html'}).get_response(handler)
    assert response.status_int == 410
    assert response.json['errors'][0]['code'] == 'memcanal.gone'


def test_page_links():
    req = webob.Request.blank('/base/things?limit=2&host=h&marker=old',
                              environ={'SCRIPT_NAME': '/base',
                                       'PATH_INFO': '/things'})
    assert util.page_links(req, [1], 2, 'm') == []
    assert util.page_links(req, [1, 2], 2, 'm') == [{
        'rel': 'next', 'href': '/base/things?host=h&limit=2&marker=m'}]


def test_isotime():
    assert util.isotime(None) is None
    assert util.isotime(datetime.datetime(2026, 1, 2, 3, 4, 5, 678)) == \
        '2026-01-02T03:04:05Z'
    aware = datetime.datetime(2026, 1, 2, 5, 4, 5, tzinfo=datetime.timezone(
        datetime.timedelta(hours=2)))
    assert util.isotime(aware) == '2026-01-02T03:04:05Z'


@pytest.mark.parametrize('value, ok', [
    ('10000000-0000-4000-8000-000000000001', True),
    ('10000000000040008000000000000001', True),
    ('ABCDEF00-0000-4000-8000-000000000001', True),
    ('10000000-0000-4000-8000-00000000000', False),
    ('../hosts', False),
    ('', False),
])
def test_is_uuid(value, ok):
    assert common.is_uuid(value) is ok
