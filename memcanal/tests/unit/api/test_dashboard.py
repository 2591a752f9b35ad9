"""/dashboard: the page and its files, open to anyone, in any Accept."""

import os
import re

import pytest

from memcanal.api import errors
from memcanal.api.handlers import dashboard
from memcanal.api import microversion
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
    assert "'memcanal %s'" % microversion.max_version_string() in script
    assert 'X-Auth-Token' in script


@pytest.mark.parametrize('path', [
    '/dashboard/nothing.js',
    '/dashboard/index.htm',
    '/dashboard/__init__.py',
    # Not UTF-8: the detail names it URL-quoted.
    '/dashboard/%FF.js',
])
def test_unknown_file_is_404(client, path):
    base.assert_error(client.request(path, token=None), 404,
                      errors.ROUTE_NOT_FOUND)


@pytest.mark.parametrize('path', ['/dashboard', '/dashboard/dashboard.js',
                                  '/dashboard/dashboard.css'])
def test_files_are_served_with_a_strict_policy(client, path):
    response = client.request(path, token=None, headers={'Accept': '*/*'})
    assert response.status_int == 200
    assert response.headers['X-Content-Type-Options'] == 'nosniff'
    assert response.headers['X-Frame-Options'] == 'DENY'
    assert response.headers['Referrer-Policy'] == 'no-referrer'
    assert response.cache_control.no_cache
    policy = dict(
        (directive.split(' ', 1) + [''])[:2] for directive in
        response.headers['Content-Security-Policy'].split('; '))
    # Only the page's own files run; nothing inline, nothing elsewhere.
    assert policy['default-src'] == "'none'"
    assert policy['script-src'] == "'self'"
    assert policy['style-src'] == "'self'"
    assert policy['connect-src'] == "'self'"
    assert policy['frame-ancestors'] == "'none'"


def test_page_has_nothing_inline(client):
    """What the policy would block: inline script, style or handlers."""
    page = client.request('/dashboard', token=None).body.decode()
    assert re.findall(r'<script(?![^>]*\bsrc=)', page) == []
    assert re.findall(r'<style|\sstyle=|\son[a-z]+=', page) == []


@pytest.mark.parametrize('path', [
    '/dashboard/..',
    '/dashboard/%2e%2e',
    '/dashboard/%2E%2E%2Fhandlers%2Fdashboard.py',
    '/dashboard/..%5C..%5Chandler.py',
    '/dashboard/..%5Cdashboard.js',
    '/dashboard/%2Fetc%2Fpasswd',
    '/dashboard/%2Fetc%2Fhosts.css',
    '/dashboard/dashboard.js%00.js',
    '/dashboard/.%2Fdashboard.js',
    '/dashboard//etc/passwd',
])
def test_no_way_out_of_the_directory_with_a_token(client, path):
    base.assert_error(client.request(path), 404, errors.ROUTE_NOT_FOUND)


def test_link_out_of_the_directory_is_not_followed(client, monkeypatch,
                                                   tmp_path):
    secret = tmp_path / 'secret.js'
    secret.write_text('secret')
    assets = tmp_path / 'assets'
    assets.mkdir()
    (assets / 'shipped.js').write_text('shipped')
    (assets / 'leak.js').symlink_to(secret)
    (assets / 'dir.css').mkdir()
    monkeypatch.setattr(dashboard, 'ASSETS_DIR', str(assets))
    assert client.request('/dashboard/shipped.js').body == b'shipped'
    for name in ('leak.js', 'dir.css'):
        base.assert_error(client.request('/dashboard/' + name), 404,
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
