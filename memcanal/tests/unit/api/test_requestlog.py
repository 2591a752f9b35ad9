"""The request log: one INFO line per request, whatever answered it."""

import logging
import re

import pytest
import webob

from memcanal.api import deploy
from memcanal.api import errors
from memcanal.api import requestlog
from memcanal.db import api as db_api
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

LINE = re.compile(r'^(?P<remote>\S+) "(?P<method>\S+) (?P<path>\S+)" '
                  r'status: (?P<status>\d+) len: (?P<length>\S+) '
                  r'time: (?P<ms>\d+\.\d) ms request_id: (?P<id>\S+)$')
REMOTE = '127.0.0.9'


@pytest.fixture
def logged(caplog):
    """The request log's lines, each parsed by LINE."""
    caplog.set_level(logging.INFO, logger=requestlog.__name__)

    def lines():
        records = [r for r in caplog.records
                   if r.name == requestlog.__name__]
        assert all(r.levelno == logging.INFO for r in records)
        return [LINE.match(r.getMessage()).groupdict() for r in records]
    return lines


def request(app, path, method='GET', token='admin', **kwargs):
    return webob.Request.blank(
        path, method=method, environ={'REMOTE_ADDR': REMOTE},
        headers=base.auth_headers(token), **kwargs).get_response(app)


def test_one_line_per_request(app, hosts, logged):
    response = request(app, '/instances?limit=2&host=%s' % hosts['host-a'])
    assert response.status_int == 200
    [line] = logged()
    assert line == {
        'remote': REMOTE, 'method': 'GET',
        'path': '/instances?limit=2&host=%s' % hosts['host-a'],
        'status': '200', 'length': str(len(response.body)),
        'ms': line['ms'],
        'id': response.headers['x-openstack-request-id']}


def test_refusals_are_logged_with_their_status(conf, database, logged):
    conf.set_override('max_request_body_size', 10, 'api')
    app = deploy.loadapp(conf)
    unauthenticated = request(app, '/hosts', token=None)
    too_large = request(app, '/instances/%s' % data.A1, method='PATCH',
                        body=b'{"opt_out": true}')
    base.assert_error(unauthenticated, 401, errors.AUTH_UNAUTHORIZED)
    base.assert_error(too_large, 413, errors.BODY_TOO_LARGE)
    assert [(line['method'], line['status'], line['id'])
            for line in logged()] == [
        ('GET', '401', unauthenticated.headers['x-openstack-request-id']),
        ('PATCH', '413', too_large.headers['x-openstack-request-id'])]


def test_fault_wrapper_500_is_logged(app, monkeypatch, logged):
    def fail(context):
        raise RuntimeError('the database went away')

    monkeypatch.setattr(db_api, 'list_hosts', fail)
    response = request(app, '/hosts')
    base.assert_error(response, 500, errors.INTERNAL_ERROR)
    [line] = logged()
    assert (line['status'], line['length'], line['id']) == (
        '500', str(len(response.body)),
        response.headers['x-openstack-request-id'])


def test_path_cannot_forge_a_log_line(app, logged):
    response = request(app, '/x%0A127.0.0.1%20%22GET%20/%22?a=%0A')
    assert response.status_int == 404
    [line] = logged()
    assert line['path'] == '/x%0A127.0.0.1%20%22GET%20/%22?a=%0A'
