"""The REST API over real HTTP, on SQLite, MariaDB and PostgreSQL.

The app is the one ``loadapp`` builds for a WSGI server, served by
wsgiref in a thread (or, for the entry-point test, by a separate process
importing ``memcanal.wsgi.api``), and spoken to with ``requests``.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
from wsgiref import simple_server

import pytest
import requests

from memcanal.api import deploy
from memcanal.api import errors
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

TIMEOUT = 10


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(app):
    """Serve ``app`` on 127.0.0.1, a free port; yield its base URL."""
    server = simple_server.make_server('127.0.0.1', 0, app,
                                       handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True,
                              name='memcanal-api-test')
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)


@pytest.fixture
def conf():
    with data.using(memcanal_fixtures.ConfFixture('noauth2')) as fixture:
        yield fixture.conf


@pytest.fixture
def api(any_db_url, conf):
    """(base URL, seeded hosts) of the API on each real database."""
    conf.set_override('connection', any_db_url, 'database')
    with data.using(memcanal_fixtures.Database(any_db_url, migrate=True)):
        hosts = data.seed()
        with serving(deploy.loadapp(conf)) as url:
            yield url, hosts


def get(url, path, token='admin', project=None, roles=None, headers=None):
    return requests.get(
        url + path, timeout=TIMEOUT,
        headers=base.auth_headers(token, project, roles, headers))


def reader(url, path, project):
    return get(url, path, token='reader', project=project, roles='reader')


def assert_error(response, status, code):
    assert response.status_code == status, response.text
    assert response.headers['Content-Type'] == 'application/json'
    [error] = response.json()['errors']
    assert (error['status'], error['code']) == (status, code)
    assert error['request_id'] == response.headers['x-openstack-request-id']
    return error


def test_list_and_show(api):
    url, hosts = api
    response = get(url, '/instances')
    assert response.status_code == 200
    assert response.headers['OpenStack-API-Version'] == 'memcanal 1.0'
    assert [i['uuid'] for i in response.json()['instances']] == data.ALL

    seen, path = [], '/instances?limit=2'
    while path:
        page = get(url, path).json()
        seen.append([i['uuid'] for i in page['instances']])
        path = page['links'][0]['href'] if page['links'] else None
    assert seen == [data.ALL[0:2], data.ALL[2:4], data.ALL[4:]]

    shown = get(url, '/instances/%s' % data.A1).json()
    assert shown['host_uuid'] == hosts['host-a']
    assert shown['latest_report']['wss'] == data.wss(data.HOST_A_REPORTS)
    assert shown['latest_report']['mrc'] == data.mrc(data.HOST_A_REPORTS)
    assert shown['latest_report']['collected_at'] == '2026-11-22T09:03:30Z'

    reports = get(url, '/instances/%s/reports?limit=2' % data.A1).json()
    assert [r['sequence'] for r in reports['reports']] == [3, 2]
    rest = get(url, reports['links'][0]['href']).json()
    assert [r['sequence'] for r in rest['reports']] == [1]
    assert rest['links'] == []

    listed = get(url, '/hosts').json()['hosts']
    assert [(h['name'], h['instance_count']) for h in listed] == [
        ('host-a', 3), ('host-b', 2)]
    host = get(url, '/hosts/%s' % hosts['host-b']).json()
    assert host['memory_total_bytes'] == 32 * data.GIB
    assert [i['uuid'] for i in get(
        url, '/instances?host=%s' % hosts['host-b']).json()['instances']] \
        == data.HOST_B_INSTANCES


def test_project_reader(api):
    url, _hosts = api
    for path in ('/instances/%s' % data.A1,
                 '/instances/%s/reports' % data.A1):
        error = assert_error(reader(url, path, data.PROJECT_B), 403,
                             errors.POLICY_DENIED)
        assert 'memcanal:instances:' in error['detail']
        assert reader(url, path, data.PROJECT_A).status_code == 200
    listed = reader(url, '/instances', data.PROJECT_B).json()['instances']
    assert [i['uuid'] for i in listed] == [data.B1, data.B2]
    assert_error(reader(url, '/hosts', data.PROJECT_A), 403,
                 errors.POLICY_DENIED)


@pytest.mark.parametrize('path', [
    '/instances?limit=abc',
    '/instances?limit=0',
    '/instances?limit=100000',
    '/instances?marker=not-a-uuid',
    '/instances?colour=blue',
    '/instances/%s/reports?marker=abc' % data.A1,
])
def test_malformed_queries_are_400(api, path):
    url, _hosts = api
    assert_error(get(url, path), 400, errors.QUERY_INVALID)


def test_http_errors_are_json(api):
    url, _hosts = api
    assert_error(get(url, '/instances/%s' % data.UNKNOWN), 404,
                 errors.INSTANCE_NOT_FOUND)
    assert_error(get(url, '/instances?marker=%s' % data.UNKNOWN), 404,
                 errors.MARKER_NOT_FOUND)
    assert_error(get(url, '/nowhere', headers={'Accept': 'text/html'}), 404,
                 errors.ROUTE_NOT_FOUND)
    response = requests.delete(url + '/instances', timeout=TIMEOUT,
                               headers={'X-Auth-Token': 'admin'})
    assert_error(response, 405, errors.METHOD_NOT_ALLOWED)
    assert response.headers['Allow'] == 'GET'
    assert_error(get(url, '/instances', token=None), 401,
                 errors.AUTH_UNAUTHORIZED)
    assert_error(get(url, '/', headers={
        'OpenStack-API-Version': 'memcanal 9.9'}), 406,
        errors.MICROVERSION_NOT_ACCEPTABLE)


def test_keystone_without_token_is_401(conf, keystone_conf):
    """auth_token refuses a tokenless request without asking keystone.

    Keystone "is" on port 1, where nothing listens.
    """
    keystone_conf('http://127.0.0.1:1/identity', 'secret')
    assert conf.api.auth_strategy == 'keystone'
    with data.using(memcanal_fixtures.Database()):
        with serving(deploy.loadapp(conf)) as url:
            response = get(url, '/instances', token=None)
            assert_error(response, 401, errors.AUTH_UNAUTHORIZED)
            assert response.headers['WWW-Authenticate'] == \
                'Keystone uri="http://127.0.0.1:1/identity"'
            # noauth2's trust in headers is gone.
            assert_error(get(url, '/hosts', token=None,
                             headers={'X-Roles': 'admin',
                                      'X-User-Id': 'admin'}),
                         401, errors.AUTH_UNAUTHORIZED)
            # A token would need keystone, which is not there: 503.
            assert_error(get(url, '/instances', token='bogus'), 503,
                         errors.AUTH_UNAVAILABLE)
            root = get(url, '/', token=None)
            assert root.status_code == 200
            assert root.json()['versions'][0]['status'] == 'CURRENT'


def test_wsgi_entry_point_in_its_own_process(any_db_url, tmp_path):
    """``memcanal.wsgi.api:application``, as a WSGI server loads it."""
    config = tmp_path / 'memcanal.conf'
    config.write_text('[api]\nauth_strategy = noauth2\n'
                      '[database]\nconnection = %s\n' % any_db_url)
    server_code = (
        'from wsgiref import simple_server\n'
        'from memcanal.wsgi.api import application\n'
        'server = simple_server.make_server("127.0.0.1", 0, application)\n'
        'print(server.server_port, flush=True)\n'
        'server.serve_forever()\n')
    with data.using(memcanal_fixtures.Database(any_db_url, migrate=True)):
        data.seed()
        log = open(tmp_path / 'api.log', 'wb')
        process = subprocess.Popen(
            [sys.executable, '-c', server_code], stdout=subprocess.PIPE,
            stderr=log, start_new_session=True,
            env=dict(os.environ, OS_MEMCANAL_CONFIG_FILES=str(config)))
        try:
            port = process.stdout.readline().strip()
            assert port, (tmp_path / 'api.log').read_text()
            url = 'http://127.0.0.1:%d' % int(port)
            listed = get(url, '/instances').json()['instances']
            assert [i['uuid'] for i in listed] == data.ALL
            assert_error(reader(url, '/instances/%s' % data.B1,
                                data.PROJECT_A), 403, errors.POLICY_DENIED)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(TIMEOUT)
            process.stdout.close()
            log.close()
