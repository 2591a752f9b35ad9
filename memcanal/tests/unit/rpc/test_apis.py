"""Both RPC APIs end to end over oslo.messaging's in-process transport:
every message signed, and only the methods meant for RPC reachable."""

import threading

from cryptography.hazmat.primitives.asymmetric import ed25519
import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal import rpc
from memcanal.rpc import agent_api
from memcanal.rpc import freshness
from memcanal.rpc import service_api
from memcanal.rpc import signing
from memcanal.tests import keys

HOST_KEY = ed25519.Ed25519PrivateKey.generate()


@pytest.fixture
def transport(conf):
    rpc.init(conf, url='fake://')
    yield
    rpc.cleanup()


def serve(topic, server, endpoint):
    rpc_server = rpc.get_server(
        messaging.Target(topic=topic, server=server), [endpoint])
    rpc_server.start()
    return rpc_server


class Recorder:
    target = messaging.Target(version='1.10')

    def __init__(self):
        self.calls = []
        self.arrived = threading.Event()

    @messaging.expose
    def register_host(self, context, **kwargs):
        self.calls.append(('register_host', context, kwargs))
        return {'uuid': 'u', 'last_sequence': 4}

    @messaging.expose
    def report(self, context, **kwargs):
        self.calls.append(('report', context, kwargs))
        self.arrived.set()

    @messaging.expose
    def apply_decision(self, context, **kwargs):
        self.calls.append(('apply_decision', context, kwargs))
        self.arrived.set()

    def optimize(self, context):
        """Public, but no RPC: never dispatched."""
        self.calls.append(('optimize', context, {}))
        self.arrived.set()


def test_service_api_signs_every_message_as_its_host(transport):
    recorder = Recorder()
    server = serve(rpc.SERVICE_TOPIC, 'central', recorder)
    try:
        api = service_api.ServiceAPI('h1', HOST_KEY)
        context = memcanal_context.RequestContext(request_id='req-1')
        assert api.register_host(context, 10, 1, 60.0,
                                 hypervisor_type='xen') == {
            'uuid': 'u', 'last_sequence': 4}
        api.report(context, {'sequence': 1})
        assert recorder.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    (_name, received_context, registered), (_, _, reported) = recorder.calls
    public_key = signing.public_text(HOST_KEY)
    # Stamped fresh (1.10), the stamp signed with the rest.
    assert {key: value for key, value in registered.items()
            if key not in ('signature', 'sent_at', 'nonce')} == {
        'name': 'h1', 'memory_total_bytes': 10, 'memory_reserved_bytes': 1,
        'report_interval': 60.0, 'host': 'h1', 'public_key': public_key,
        'hypervisor_type': 'xen'}
    assert registered['nonce'] != reported['nonce']
    assert freshness.Window(300).check('h1', reported) is None
    assert signing.verify(public_key, 'register_host', registered)
    assert reported['report'] == {'sequence': 1}
    assert signing.verify(public_key, 'report', reported)
    assert not signing.verify(public_key, 'register_host', reported)
    # The context crosses the wire as memcanal's own RequestContext.
    assert isinstance(received_context, memcanal_context.RequestContext)
    assert received_context.request_id == 'req-1'


def test_agent_api_casts_to_the_named_host_only_signed(transport):
    on_h1, on_h2 = Recorder(), Recorder()
    servers = [serve(rpc.AGENT_TOPIC, 'h1', on_h1),
               serve(rpc.AGENT_TOPIC, 'h2', on_h2)]
    action = {'uuid': 'action-9', 'instance_uuid': 'vm-1',
              'target_bytes': 2 ** 30, 'mechanism': 'balloon'}
    try:
        agent_api.AgentAPI(keys.SERVICE_KEY).apply_decision(
            memcanal_context.get_admin_context(), 'h2', 'decision-1',
            [action])
        assert on_h2.arrived.wait(10)
    finally:
        for server in servers:
            server.stop()
            server.wait()
    assert on_h1.calls == []
    [(_name, _context, kwargs)] = on_h2.calls
    assert {key: value for key, value in kwargs.items()
            if key not in ('signature', 'sent_at', 'nonce')} == {
        'host': 'h2', 'decision_uuid': 'decision-1', 'actions': [action]}
    assert freshness.Window(300).check('service', kwargs) is None
    assert signing.verify(keys.SERVICE_KEY.public_key(), 'apply_decision',
                          kwargs)


def test_a_public_method_that_is_no_rpc_cannot_be_called(transport):
    recorder = Recorder()
    server = serve(rpc.SERVICE_TOPIC, 'central', recorder)
    try:
        client = service_api.ServiceAPI('h1', HOST_KEY).client
        with pytest.raises(messaging.NoSuchMethod):
            client.prepare(timeout=10).call(
                memcanal_context.get_admin_context(), 'optimize')
    finally:
        server.stop()
        server.wait()
    assert recorder.calls == []


def test_clients_are_capped_at_their_api_version(transport):
    for api in (service_api.ServiceAPI('h1', HOST_KEY),
                agent_api.AgentAPI(keys.SERVICE_KEY)):
        assert api.client.can_send_version('1.1')
        assert not api.client.can_send_version(
            '1.%d' % (int(api.VERSION.split('.')[1]) + 1))
    assert service_api.ServiceAPI('h1', HOST_KEY).client.can_send_version(
        '1.5')


def test_a_service_takes_the_reports_of_agents_at_1_6(transport):
    """Agents are upgraded after their service: one still at 1.6 (no
    intervals in its reports) reaches a service at 1.7 or later."""
    recorder = Recorder()
    server = serve(rpc.SERVICE_TOPIC, 'central', recorder)
    try:
        api = service_api.ServiceAPI('h1', HOST_KEY)
        api.VERSION = '1.6'
        api.client = rpc.get_client(messaging.Target(
            topic=rpc.SERVICE_TOPIC, version='1.6'), version_cap='1.6')
        api.report(memcanal_context.get_admin_context(), {'sequence': 1})
        assert recorder.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    [(_name, _context, reported)] = recorder.calls
    assert reported['report'] == {'sequence': 1}
    assert tuple(map(int, service_api.ServiceAPI.VERSION.split('.'))) >= (
        1, 7)
