"""Both RPC APIs end to end over oslo.messaging's in-process transport."""

import threading

import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal import rpc
from memcanal.rpc import agent_api
from memcanal.rpc import service_api


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
    target = messaging.Target(version='1.4')

    def __init__(self):
        self.calls = []
        self.arrived = threading.Event()

    def register_host(self, context, **kwargs):
        self.calls.append(('register_host', context, kwargs))
        return {'uuid': 'u', 'last_sequence': 4}

    def report(self, context, report):
        self.calls.append(('report', context, report))
        self.arrived.set()

    def apply_memory_target(self, context, **kwargs):
        self.calls.append(('apply_memory_target', context, kwargs))
        self.arrived.set()


def test_service_api_call_and_cast(transport):
    recorder = Recorder()
    server = serve(rpc.SERVICE_TOPIC, 'central', recorder)
    try:
        api = service_api.ServiceAPI()
        context = memcanal_context.RequestContext(request_id='req-1')
        assert api.register_host(context, 'h1', 10, 1, 60.0) == {
            'uuid': 'u', 'last_sequence': 4}
        api.report(context, {'sequence': 1})
        assert recorder.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    name, received_context, kwargs = recorder.calls[0]
    assert kwargs == {'name': 'h1', 'memory_total_bytes': 10,
                      'memory_reserved_bytes': 1, 'report_interval': 60.0}
    # The context crosses the wire as memcanal's own RequestContext.
    assert isinstance(received_context, memcanal_context.RequestContext)
    assert received_context.request_id == 'req-1'
    assert recorder.calls[1][2] == {'sequence': 1}


def test_agent_api_casts_to_the_named_host_only(transport):
    on_h1, on_h2 = Recorder(), Recorder()
    servers = [serve(rpc.AGENT_TOPIC, 'h1', on_h1),
               serve(rpc.AGENT_TOPIC, 'h2', on_h2)]
    try:
        agent_api.AgentAPI().apply_memory_target(
            memcanal_context.get_admin_context(), 'h2', 'vm-1', 2 ** 30,
            'action-9')
        assert on_h2.arrived.wait(10)
    finally:
        for server in servers:
            server.stop()
            server.wait()
    assert on_h1.calls == []
    assert on_h2.calls[0][2] == {'instance_uuid': 'vm-1',
                                 'target_bytes': 2 ** 30,
                                 'action_id': 'action-9'}


def test_clients_are_capped_at_their_api_version(transport):
    for api in (service_api.ServiceAPI(), agent_api.AgentAPI()):
        assert api.client.can_send_version('1.1')
        assert not api.client.can_send_version(
            '1.%d' % (int(api.VERSION.split('.')[1]) + 1))
    assert service_api.ServiceAPI().client.can_send_version('1.2')
