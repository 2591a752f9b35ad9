"""Versioned notifications over real RabbitMQ: an oslo.messaging
notification listener on ``versioned_notifications`` hears a compute
host register with memcanal-service and an operator reject a decision
through the API, each process sending as its own publisher."""

import os
import queue
import sys

import oslo_messaging as messaging
import pytest
import requests

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.tests.functional import services
from memcanal.tests.functional import test_metrics
from memcanal.tests.functional.test_rabbit import cloud  # noqa: F401

@pytest.fixture
def extra_config():
    return ('[oslo_messaging_notifications]\ndriver = messagingv2\n'
            '[api]\nauth_strategy = noauth2\n')


class Endpoint:
    """Puts (priority, publisher_id, event_type, payload) on a queue."""

    def __init__(self):
        self.heard = queue.Queue()

    def _hear(self, priority):
        def hear(ctxt, publisher_id, event_type, payload, metadata):
            self.heard.put((priority, publisher_id, event_type, payload))
        return hear

    def __getattr__(self, priority):
        if priority not in ('info', 'warn', 'error'):
            raise AttributeError(priority)
        return self._hear(priority)


@pytest.fixture
def listener(cloud, conf):  # noqa: F811
    """An Endpoint listening on versioned_notifications of the cloud's
    RabbitMQ and exchange, from before anything is sent."""
    conf(['--config-file', str(cloud['config'])], project='memcanal',
         default_config_files=[])
    transport = messaging.get_notification_transport(conf)
    endpoint = Endpoint()
    server = messaging.get_notification_listener(
        transport, [messaging.Target(topic='versioned_notifications',
                                     exchange=conf.control_exchange)],
        [endpoint], executor='threading')
    server.start()
    yield endpoint
    server.stop()
    server.wait()
    transport.cleanup()


def next_event(endpoint, event_type, timeout=60):
    """The next notification of ``event_type`` the listener hears."""
    while True:
        heard = endpoint.heard.get(timeout=timeout)
        if heard[2] == event_type:
            return heard


def test_service_and_api_notify_over_rabbit(cloud, listener):  # noqa: F811
    cloud['start']('service')
    cloud['start']('agent')
    priority, publisher, _, payload = next_event(listener,
                                                 'memcanal.host.register')
    assert (priority, publisher) == ('info', 'memcanal-service:compute-test')
    assert payload['memcanal_object.name'] == 'HostPayload'
    assert payload['memcanal_object.version'] == '1.0'
    host = payload['memcanal_object.data']
    assert (host['name'], host['state']) == ('compute-test', 'up')

    ctx = memcanal_context.get_admin_context()
    [vm, *_] = services.wait_for(lambda: db_api.list_instances(ctx),
                                 what='the agent\'s VMs')
    decision = decisions_db.create_decision(
        ctx, host['uuid'], 'memory_targets', 'isolated_sharing',
        'recommend', {}, {}, [{
            'instance_uuid': vm['uuid'], 'target_bytes': vm[
                'allocated_bytes'] // 2,
            'previous_bytes': vm['allocated_bytes'],
            'mechanism': 'balloon'}])
    api_port = services.free_port()
    with services.serving(
            'api', [sys.executable, '-c', test_metrics.API_SERVER,
                    str(api_port)], api_port, cloud['tmp_path'],
            env=dict(os.environ,
                     OS_MEMCANAL_CONFIG_FILES=str(cloud['config']))):
        response = requests.post(
            'http://127.0.0.1:%d/decisions/%s/reject' % (
                api_port, decision['uuid']),
            json={'reason': 'Not on this host.'}, timeout=10,
            headers={'X-Auth-Token': 'admin', 'X-User-Id': 'operator',
                     'OpenStack-API-Version': 'memcanal 1.1'})
        assert response.status_code == 200, response.text
        priority, publisher, _, payload = next_event(
            listener, 'memcanal.decision.reject')
    assert (priority, publisher) == ('info', 'memcanal-api:compute-test')
    rejected = payload['memcanal_object.data']
    assert payload['memcanal_object.name'] == 'DecisionPayload'
    assert (rejected['uuid'], rejected['state'], rejected['previous_state'],
            rejected['user_id'], rejected['reason']) == (
        decision['uuid'], 'rejected', 'recommended', 'operator',
        'Not on this host.')
    assert rejected['instance_uuids'] == [vm['uuid']]
    assert rejected['host_name'] == 'compute-test'
