"""Who is calling: authentication middlewares and the request context.

The root document (``GET /``) answers without authentication, as
placement's does, so clients can discover versions before they have a
token; so do the dashboard's page and files (``/dashboard``,
``/dashboard/<file>``), which hold no data: its script asks for the data
with the operator's token; and ``/metrics``, which Prometheus scrapes
without a token: it answers only when ``[api] metrics_enabled`` is on
(memcanal.api.handlers.metrics says why).
"""

import re

from keystonemiddleware import auth_token
import webob.exc

from memcanal.api import errors
from memcanal.api import util
from memcanal import context

NOAUTH_ADMIN_ROLES = 'admin,member,reader'
_UNAUTHORIZED = 'The request you have made requires authentication.'


# The paths answered without authentication: the root document, the
# dashboard's page and its files (one level down, no deeper), the
# metrics.
_PUBLIC = re.compile(r'^/?$|^/dashboard(/[^/]+)?$|^/metrics$')


def _is_public(environ):
    return _PUBLIC.match(environ.get('PATH_INFO', '')) is not None


def _unauthorized(headers=None):
    return webob.exc.HTTPUnauthorized(_UNAUTHORIZED, headers=headers,
                                      comment=errors.AUTH_UNAUTHORIZED)


class NoAuthMiddleware:
    """Trust the caller's headers; for all-in-one setups and tests only.

    Any X-Auth-Token authenticates. X-User-Id defaults to the token and
    X-Project-Id to the user id. The token ``admin`` gets the roles admin,
    member and reader unless X-Roles says otherwise; any other token has
    only the roles X-Roles gives it.
    """

    def __init__(self, application):
        self.application = application

    @util.wsgify
    def __call__(self, req):
        if _is_public(req.environ):
            return self.application
        token = req.headers.get('X-Auth-Token')
        if not token:
            raise _unauthorized()
        user_id = req.headers.get('X-User-Id') or token
        req.headers['X-User-Id'] = user_id
        req.headers['X-Project-Id'] = (req.headers.get('X-Project-Id')
                                       or user_id)
        if 'X-Roles' not in req.headers and token == 'admin':
            req.headers['X-Roles'] = NOAUTH_ADMIN_ROLES
        return self.application


class KeystoneAuthProtocol(auth_token.AuthProtocol):
    """keystonemiddleware's auth_token, leaving the public paths open.

    Its own rejections (401 without a valid token, 503 when keystone is
    unreachable) are rendered in the API's error format, keeping the
    WWW-Authenticate header that says where to get a token.
    """

    def __init__(self, application, conf):
        self._memcanal_app = application
        # oslo_config_config: read [keystone_authtoken] from memcanal's
        # own ConfigOpts, already parsed, rather than parsing again.
        super().__init__(application, {'oslo_config_config': conf})

    def __call__(self, environ, start_response):
        if _is_public(environ):
            return self._memcanal_app(environ, start_response)
        return super().__call__(environ, start_response)

    def process_request(self, request):
        try:
            return super().process_request(request)
        except webob.exc.HTTPError as exc:
            if exc.code == 401:
                exc = _unauthorized(
                    headers=[h for h in exc.headers.items()
                             if h[0].lower() == 'www-authenticate'])
            elif exc.code == 503:
                exc.comment = errors.AUTH_UNAVAILABLE
            return util.error_response(request.environ, exc)


class ContextMiddleware:
    """Make a memcanal RequestContext from the authentication headers.

    keystonemiddleware (or NoAuthMiddleware) has set X-User-Id,
    X-Project-Id and X-Roles by now; oslo.context reads them, with the
    request id. A request without a user, other than to a public path, is
    refused rather than handled anonymously.
    """

    def __init__(self, application):
        self.application = application

    @util.wsgify
    def __call__(self, req):
        ctx = context.RequestContext.from_environ(req.environ)
        if ctx.user_id is None and not _is_public(req.environ):
            raise _unauthorized()
        req.environ[util.ENV_CONTEXT] = ctx
        return self.application
