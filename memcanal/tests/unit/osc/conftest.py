"""The OSC plugin's client and commands against the real API app.

The API (noauth2, the token ``admin``) serves the seeded cloud of
memcanal.tests.unit.api.data; the plugin's client reaches it through a
keystoneauth session, as it does under OSC, whose requests.Session hands
each request to the WSGI app in-process instead of a socket.
"""

from unittest import mock

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import pytest
import requests
from requests import structures
import webob

from memcanal.api import deploy
from memcanal import context
from memcanal.db import decisions as decisions_db
from memcanal.osc import client as osc_client
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import data

URL = 'http://memcanal.test'


class WSGIAdapter(requests.adapters.BaseAdapter):
    """A requests transport that calls a WSGI application."""

    def __init__(self, app):
        super().__init__()
        self.app = app

    def send(self, request, **kwargs):
        body = request.body or b''
        # keystoneauth sends its JSON bodies as str.
        if isinstance(body, str):
            body = body.encode()
        answer = webob.Request.blank(
            request.url, method=request.method, headers=request.headers,
            body=body).get_response(self.app)
        response = requests.Response()
        response.status_code = answer.status_code
        response.reason = answer.status.split(' ', 1)[1]
        response.headers = structures.CaseInsensitiveDict(answer.headers)
        response._content = answer.body
        response.url, response.request = request.url, request
        return response

    def close(self):
        pass


@pytest.fixture
def api():
    """(base URL, {host name: uuid}, the recommended decision's uuid)."""
    with data.using(memcanal_fixtures.ConfFixture('noauth2')) as conf, \
            data.using(memcanal_fixtures.Database()):
        hosts = data.seed()
        decision = decisions_db.create_decision(
            context.get_admin_context(), hosts['host-a'], 'memory_targets',
            'isolated_sharing', 'recommend', {}, {},
            [{'instance_uuid': data.A1, 'target_bytes': 3 * data.GIB,
              'previous_bytes': None, 'mechanism': 'balloon'}])
        transport = requests.Session()
        transport.mount(URL, WSGIAdapter(deploy.loadapp(conf.conf)))
        yield transport, hosts, decision['uuid']


def make_client(transport, version=osc_client.NEGOTIATE):
    session = ks_session.Session(auth=token_endpoint.Token(URL, 'admin'),
                                 session=transport)
    return osc_client.Client(session, requested_version=version,
                             endpoint_override=URL)


@pytest.fixture
def client(api):
    return make_client(api[0])


@pytest.fixture
def run(client):
    """``run(CommandClass, *argv)``: the command's take_action result,
    with ``client`` as OSC's client_manager.memcanal."""
    app = mock.Mock()
    app.client_manager.memcanal = client

    def run(command_class, *argv):
        command = command_class(app, None)
        parsed = command.get_parser('openstack memcanal').parse_args(argv)
        return command.take_action(parsed)
    return run


@pytest.fixture
def gets(client, monkeypatch):
    """The paths the client GETs, in order, as it reads them."""
    get = client.get
    paths = []

    def counted(path, params=None):
        paths.append(path)
        return get(path, params)
    monkeypatch.setattr(client, 'get', counted)
    return paths
