"""/dashboard: the page and its files, open to anyone, in any Accept."""

import os
import re

import pytest

from memcanal.api import errors
from memcanal.api.handlers import dashboard
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import test_auth

# keystone, configured but never reached: a public path must not need it.
keystone_client = test_auth.keystone_client
BROWSER_ACCEPT = 'text/html,application/xhtml+xml,*/*;q=0.8'


@pytest.mark.parametrize('accept', [BROWSER_ACCEPT, 'text/html', None])
def test_page_is_html_without_token(client, accept):
    response = client.request(
        '/dashboard', token=None,
        headers={'Accept': accept} if accept else None)
    assert response.status_int == 200
    assert response.content_type == 'text/html'
    assert response.charset == 'UTF-8'
    assert response.cache_control.no_cache
    assert b'<title>memcanal dashboard</title>' in response.body


def test_page_is_open_under_keystone(keystone_client):
    response = keystone_client.request('/dashboard', token=None)
    assert response.status_int == 200
    assert response.content_type == 'text/html'
    response = keystone_client.request('/dashboard/dashboard.js', token=None)
    assert response.status_int == 200


def test_every_file_the_page_names_is_served(client):
    page = client.request('/dashboard', token=None).body.decode()
    names = re.findall(r'(?:src|href)="dashboard/([^"]+)"', page)
    assert sorted(names) == ['dashboard.css', 'dashboard.js']
    types = {'dashboard.css': 'text/css', 'dashboard.js': 'text/javascript'}
    for name in names:
        response = client.request('/dashboard/' + name, token=None,
                                  headers={'Accept': '*/*'})
        assert response.status_int == 200, name
        assert response.content_type == types[name]
        with open(os.path.join(dashboard.ASSETS_DIR, name), 'rb') as shipped:
            assert response.body == shipped.read()


def test_script_speaks_the_newest_version(client):
    script = client.request('/dashboard/dashboard.js').body.decode()
    assert "'memcanal 1.5'" in script
    assert 'X-Auth-Token' in script


@pytest.mark.parametrize('path', [
    '/dashboard/nothing.js',
    '/dashboard/index.htm',
    '/dashboard/__init__.py',
])
def test_unknown_file_is_404(client, path):
    base.assert_error(client.request(path, token=None), 404,
                      errors.ROUTE_NOT_FOUND)


def test_no_way_out_of_the_directory(client):
    # The quoted slash is decoded: a path deeper than /dashboard/<file>,
    # so not public, and no route.
    path = '/dashboard/..%2Fhandlers%2Fdashboard.py'
    base.assert_error(client.request(path, token=None), 401,
                      errors.AUTH_UNAUTHORIZED)
    base.assert_error(client.request(path), 404, errors.ROUTE_NOT_FOUND)


def test_stray_file_is_not_served(client, monkeypatch, tmp_path):
    (tmp_path / 'index.html~').write_text('backup')
    (tmp_path / 'notes.txt').write_text('private')
    monkeypatch.setattr(dashboard, 'ASSETS_DIR', str(tmp_path))
    for name in ('index.html~', 'notes.txt'):
        base.assert_error(client.request('/dashboard/' + name), 404,
                          errors.ROUTE_NOT_FOUND)


@pytest.mark.parametrize('path', ['/dashboard/a/b', '/dashboards',
                                  '/hosts'])
def test_other_paths_still_need_a_token(client, path):
    base.assert_error(client.request(path, token=None), 401,
                      errors.AUTH_UNAUTHORIZED)


def test_only_get(client):
    response = client.request('/dashboard', method='POST')
    base.assert_error(response, 405, errors.METHOD_NOT_ALLOWED)
    assert response.headers['Allow'] == 'GET'
