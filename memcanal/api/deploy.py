"""Build the API's WSGI application from configuration.

The pipeline, outermost first:

1. RequestId: an ``x-openstack-request-id`` for every response and log;
2. RequestLog: one INFO line per request, with that id and the status the
   client gets;
3. FaultWrapper: an unhandled exception becomes a JSON 500;
4. BodySizeLimiter: 413 to a body over ``[api] max_request_body_size``;
5. authentication: keystonemiddleware's auth_token, or NoAuthMiddleware;
6. ContextMiddleware: a RequestContext from the authentication headers;
7. MicroversionMiddleware: the OpenStack-API-Version of the request;
8. Router: the handler of the path and method.

The fault wrapper sits outside authentication so that nothing, not even a
keystonemiddleware bug, reaches the WSGI server as a bare traceback; the
request log outside the fault wrapper, to log its 500s too. The size limit
comes before authentication, the cheapest refusal first: an
unauthenticated client's body is never read past the limit.
"""

from oslo_middleware import request_id

from memcanal.api import auth
from memcanal.api import fault
from memcanal.api import handler
from memcanal.api import microversion
from memcanal.api import policy
from memcanal.api import requestlog
from memcanal.api import sizelimit


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
                       lambda application: sizelimit.BodySizeLimiter(
                           application, conf),
                       fault.FaultWrapper,
                       requestlog.RequestLog,
                       request_id.RequestId):
        application = middleware(application)
    return application
