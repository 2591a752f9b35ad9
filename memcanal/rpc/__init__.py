"""oslo.messaging plumbing shared by the service and the agents.

``init`` must be called once per process before any client or server is
made; the transport URL comes from ``[DEFAULT] transport_url``, so
``fake://`` gives in-process messaging and ``rabbit://`` RabbitMQ.
"""

import oslo_messaging as messaging
from oslo_messaging.rpc import dispatcher

from memcanal import context as memcanal_context

SERVICE_TOPIC = 'memcanal-service'
AGENT_TOPIC = 'memcanal-agent'

TRANSPORT = None

messaging.set_transport_defaults(control_exchange='memcanal')


class RequestContextSerializer(messaging.Serializer):
    """Send memcanal's RequestContext as a dict and rebuild it on arrival."""

    def serialize_entity(self, context, entity):
        return entity

    def deserialize_entity(self, context, entity):
        return entity

    def serialize_context(self, context):
        return context.to_dict()

    def deserialize_context(self, context):
        return memcanal_context.RequestContext.from_dict(context)


def init(conf, url=None):
    """Open this process's transport; ``url`` overrides transport_url."""
    global TRANSPORT
    if TRANSPORT is None:
        TRANSPORT = messaging.get_rpc_transport(conf, url=url)
    return TRANSPORT


def cleanup():
    global TRANSPORT
    if TRANSPORT is not None:
        TRANSPORT.cleanup()
        TRANSPORT = None


def get_client(target, version_cap=None):
    return messaging.get_rpc_client(
        TRANSPORT, target, version_cap=version_cap,
        serializer=RequestContextSerializer())


def get_server(target, endpoints):
    """An RPC server dispatching only to the endpoints' methods marked
    ``@oslo_messaging.expose``: anyone holding the broker's credentials
    can name any method, and the managers have public methods that are
    no RPC (their periodic jobs)."""
    return messaging.get_rpc_server(
        TRANSPORT, target, endpoints, executor='threading',
        serializer=RequestContextSerializer(),
        access_policy=dispatcher.ExplicitRPCAccessPolicy)
