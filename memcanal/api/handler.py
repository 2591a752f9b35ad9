"""Routing: which handler answers which path and method.

ROUTE_DECLARATIONS is the whole API surface at a glance. A known path with
an unknown method is a 405 naming the allowed methods; an unknown path is a
404. Both, like every error, in the API's JSON error format.
"""

import routes
import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import dashboard
from memcanal.api.handlers import decisions
from memcanal.api.handlers import demand
from memcanal.api.handlers import hosts
from memcanal.api.handlers import instances
from memcanal.api.handlers import memory_servers
from memcanal.api.handlers import metrics
from memcanal.api.handlers import reports
from memcanal.api.handlers import root
from memcanal.api import util

# Paths (routes syntax) to {HTTP method: handler}. Handlers are wsgified
# functions of the request; path variables are in util.path_item.
ROUTE_DECLARATIONS = {
    '/': {
        'GET': root.home,
    },
    '/demand_ratios': {
        'GET': demand.show_demand_ratios,
    },
    '/hosts': {
        'GET': hosts.list_hosts,
    },
    '/hosts/{uuid}': {
        'GET': hosts.get_host,
        'PATCH': hosts.update_host,
    },
    '/instances': {
        'GET': instances.list_instances,
    },
    '/instances/{uuid}': {
        'GET': instances.get_instance,
        'PATCH': instances.update_instance,
    },
    '/instances/{uuid}/reports': {
        'GET': reports.list_reports,
    },
    '/decisions': {
        'GET': decisions.list_decisions,
    },
    '/memory_servers': {
        'GET': memory_servers.list_memory_servers,
    },
    '/memory_servers/{uuid}': {
        'PATCH': memory_servers.update_memory_server,
    },
    '/decisions/{uuid}': {
        'GET': decisions.get_decision,
    },
    '/decisions/{uuid}/approve': {
        'POST': decisions.approve,
    },
    '/decisions/{uuid}/reject': {
        'POST': decisions.reject,
    },
    '/decisions/{uuid}/rollback': {
        'POST': decisions.rollback,
    },
    '/dashboard': {
        'GET': dashboard.page,
    },
    '/dashboard/{asset}': {
        'GET': dashboard.asset,
    },
    '/metrics': {
        'GET': metrics.show,
    },
}


NON_JSON_HANDLERS = dashboard.HANDLERS + metrics.HANDLERS


@util.wsgify
def handle_405(req):
    allowed = util.path_item(req, '_methods')
    raise webob.exc.HTTPMethodNotAllowed(
        'The method %s is not allowed for this resource; allowed: %s.' % (
            req.method, allowed),
        headers={'Allow': allowed}, comment=errors.METHOD_NOT_ALLOWED)


def make_map(declarations):
    """A routes.Mapper: one route per path and method, then a 405 catch."""
    mapper = routes.Mapper()
    for path, targets in declarations.items():
        for method, handler in targets.items():
            mapper.connect(path, action=handler,
                           conditions={'method': [method]})
        mapper.connect(path, action=handle_405,
                       _methods=', '.join(targets))
    return mapper


class Router:
    """Dispatch a request to its handler, after checking it accepts JSON
    (unless it asks for the dashboard or the metrics)."""

    def __init__(self, conf):
        self.conf = conf
        self._map = make_map(ROUTE_DECLARATIONS)

    @util.wsgify
    def __call__(self, req):
        match = self._map.match(environ=req.environ)
        if match is None:
            raise webob.exc.HTTPNotFound(
                'No resource at %s.' % util.quoted_path(req.environ),
                comment=errors.ROUTE_NOT_FOUND)
        handler = match.pop('action')
        req.environ['wsgiorg.routing_args'] = ((), match)
        req.environ[util.ENV_CONF] = self.conf
        # The dashboard's files are HTML, script and style, the metrics
        # Prometheus's text format: not JSON.
        if handler is not handle_405 and handler not in NON_JSON_HANDLERS:
            util.check_accept(req)
        return handler
