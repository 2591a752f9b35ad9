"""noauth2 and keystone authentication, and the context they produce."""

import pytest
import webob

from memcanal.api import auth
from memcanal.api import deploy
from memcanal.api import errors
from memcanal.api import util
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


@pytest.fixture
def seen_context():
    """An app behind NoAuth and Context middleware that keeps the context."""
    seen = {}

    @util.wsgify
    def probe(req):
        seen['context'] = req.environ[util.ENV_CONTEXT]
        return util.json_response({})

    app = auth.NoAuthMiddleware(auth.ContextMiddleware(probe))

    def get(path='/x', **headers):
        seen.clear()
        response = webob.Request.blank(path, headers=headers).get_response(
            app)
        return response, seen.get('context')
    return get


def test_admin_token_gets_admin_roles(seen_context):
    response, ctx = seen_context(**{'X-Auth-Token': 'admin'})
    assert response.status_int == 200
    assert sorted(ctx.roles) == ['admin', 'member', 'reader']
    assert ctx.user_id == 'admin'
    assert ctx.project_id == 'admin'


def test_given_roles_win_over_admin_token(seen_context):
    _response, ctx = seen_context(**{'X-Auth-Token': 'admin',
                                     'X-Roles': 'reader'})
    assert ctx.roles == ['reader']


def test_other_token_has_only_given_roles(seen_context):
    _response, ctx = seen_context(**{'X-Auth-Token': 'alice'})
    assert ctx.roles == []
    _response, ctx = seen_context(**{'X-Auth-Token': 'alice',
                                     'X-Roles': 'member, reader'})
    assert ctx.roles == ['member', 'reader']


def test_user_and_project_defaults(seen_context):
    _response, ctx = seen_context(**{'X-Auth-Token': 'tok'})
    assert (ctx.user_id, ctx.project_id) == ('tok', 'tok')
    _response, ctx = seen_context(**{'X-Auth-Token': 'tok',
                                     'X-User-Id': 'alice'})
    assert (ctx.user_id, ctx.project_id) == ('alice', 'alice')
    _response, ctx = seen_context(**{'X-Auth-Token': 'tok',
                                     'X-User-Id': 'alice',
                                     'X-Project-Id': 'p1'})
    assert (ctx.user_id, ctx.project_id) == ('alice', 'p1')


def test_context_carries_request_id(client, monkeypatch):
    from memcanal.api.handlers import root

    seen = {}
    original = root.home.func

    def home(req):
        seen['context'] = req.environ[util.ENV_CONTEXT]
        return original(req)

    monkeypatch.setattr(root.home, 'func', home)
    response = client.request('/')
    assert seen['context'].request_id == \
        response.headers['x-openstack-request-id']


def test_noauth_root_needs_no_token(seen_context):
    response, ctx = seen_context(path='/')
    assert response.status_int == 200
    assert ctx.user_id is None


def test_noauth_no_token_is_401(seen_context):
    response, ctx = seen_context()
    assert response.status_int == 401
    assert response.json['errors'][0]['code'] == errors.AUTH_UNAUTHORIZED
    assert ctx is None


def test_context_without_user_is_401():
    # What a misconfigured pipeline (no auth middleware) would produce.
    app = auth.ContextMiddleware(util.wsgify(
        lambda req: util.json_response({})))
    response = webob.Request.blank('/hosts').get_response(app)
    assert response.status_int == 401
    assert response.json['errors'][0]['code'] == errors.AUTH_UNAUTHORIZED


@pytest.fixture
def keystone_client(conf, database):
    conf.set_override('auth_strategy', 'keystone', 'api')
    conf.set_override('www_authenticate_uri', 'http://127.0.0.1:1/identity',
                      'keystone_authtoken')
    conf.set_override('delay_auth_decision', False, 'keystone_authtoken')
    return base.Client(deploy.loadapp(conf))


def test_keystone_without_token_is_401(keystone_client):
    response = keystone_client.request('/instances', token=None)
    base.assert_error(response, 401, errors.AUTH_UNAUTHORIZED)
    assert response.headers['WWW-Authenticate'] == \
        'Keystone uri="http://127.0.0.1:1/identity"'


def test_keystone_ignores_noauth_headers(keystone_client):
    # Identity headers a client sends are stripped, not trusted.
    response = keystone_client.request(
        '/hosts', token=None, headers={'X-User-Id': 'admin',
                                       'X-Roles': 'admin',
                                       'X-Identity-Status': 'Confirmed'})
    base.assert_error(response, 401, errors.AUTH_UNAUTHORIZED)


def test_keystone_root_needs_no_token(keystone_client):
    response = keystone_client.request('/', token=None)
    assert response.status_int == 200
    assert response.json['versions'][0]['id'] == 'v1.0'


def test_loadapp_picks_auth_middleware(conf, database):
    def auth_layer(app):
        # The first layer that is not one of the outer middlewares.
        while not isinstance(app, (auth.NoAuthMiddleware,
                                   auth.KeystoneAuthProtocol)):
            app = app.application
        return app

    assert isinstance(auth_layer(deploy.loadapp(conf)),
                      auth.NoAuthMiddleware)
    conf.set_override('auth_strategy', 'keystone', 'api')
    assert isinstance(auth_layer(deploy.loadapp(conf)),
                      auth.KeystoneAuthProtocol)


def test_noauth_reader_header_is_trusted(client, hosts):
    # The reason noauth2 is for tests and all-in-one only.
    response = client.request('/instances/%s' % data.A1, token='anyone',
                              project=data.PROJECT_A, roles='reader')
    assert response.status_int == 200


def test_keystone_metrics_need_no_token_once_enabled(keystone_client, conf):
    base.assert_error(keystone_client.request('/metrics', token=None), 404,
                      errors.ROUTE_NOT_FOUND)
    conf.set_override('metrics_enabled', True, 'api')
    response = keystone_client.request('/metrics', token=None)
    assert response.status_int == 200
    assert b'# TYPE memcanal_decisions gauge' in response.body
    # Only the path itself: nothing under it is public.
    base.assert_error(keystone_client.request('/metrics/x', token=None),
                      401, errors.AUTH_UNAUTHORIZED)
