"""Build the API's WSGI application from configuration.

The pipeline, outermost first:

1. RequestId: an ``x-openstack-request-id`` for every response and log;
2. FaultWrapper: an unhandled exception becomes a JSON 500;
3. authentication: keystonemiddleware's auth_token, or NoAuthMiddleware;
4. ContextMiddleware: a RequestContext from the authentication headers;
5. MicroversionMiddleware: the OpenStack-API-Version of the request;
6. Router: the handler of the path and method.

The fault wrapper sits outside authentication so that nothing, not even a
keystonemiddleware bug, reaches the WSGI server as a bare traceback.
"""

from oslo_middleware import request_id

from memcanal.api import auth
from memcanal.api import fault
from memcanal.api import handler
from memcanal.api import microversion
from memcanal.api import policy


def _auth_middleware(conf):
    strategy = conf.api.auth_strategy
    if strategy == 'noauth2':
        return auth.NoAuthMiddleware
    if strategy == 'keystone':
        return lambda application: auth.KeystoneAuthProtocol(application,
                                                             conf)
    # oslo.config's choices make this unreachable; fail loudly anyway.
    raise ValueError('Unknown [api] auth_strategy %r' % strategy)


def loadapp(conf):
    """The API application for ``conf`` (an oslo.config ConfigOpts).

    Also (re)initialises the policy enforcer on ``conf``.
    """
    policy.init(conf)
    application = handler.Router(conf)
    # Listed from the inside out.
    for middleware in (microversion.MicroversionMiddleware,
                       auth.ContextMiddleware,
                       _auth_middleware(conf),
                       fault.FaultWrapper,
                       request_id.RequestId):
        application = middleware(application)
    return application
