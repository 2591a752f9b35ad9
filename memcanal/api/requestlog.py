"""One INFO line per API request, as placement's request log writes.

An operator answering "what happened to my request" needs the line that
ties the client's ``x-openstack-request-id`` to a status and a duration,
also for requests refused before any handler ran (401, 413) or that
failed (500).
"""

import time

from oslo_log import log as logging
from oslo_middleware import request_id

from memcanal.api import util

LOG = logging.getLogger(__name__)


def _path_qs(environ):
    query = environ.get('QUERY_STRING')
    path = util.quoted_path(environ)
    return '%s?%s' % (path, query) if query else path


class RequestLog:
    """Log caller, method, path and query, status, length, time, id.

    It sits inside RequestId, so the id is known, and outside the fault
    wrapper and authentication, so the status logged is the one the client
    gets. The line is written when the response starts, as its status and
    headers are then known: the time is up to that point (the API's
    bodies are built whole before). The path is logged URL-quoted, so a
    path cannot forge a log line.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        started = time.monotonic()

        def logging_start_response(status, headers, exc_info=None):
            length = next((value for name, value in headers
                           if name.lower() == 'content-length'), '-')
            LOG.info('%(remote)s "%(method)s %(path)s" status: %(status)s '
                     'len: %(length)s time: %(ms).1f ms request_id: '
                     '%(request_id)s',
                     {'remote': environ.get('REMOTE_ADDR', '-'),
                      'method': environ['REQUEST_METHOD'],
                      'path': _path_qs(environ),
                      'status': status.split(None, 1)[0],
                      'length': length,
                      'ms': (time.monotonic() - started) * 1000,
                      'request_id': environ.get(request_id.ENV_REQUEST_ID,
                                                '-')})
            return start_response(status, headers, exc_info)

        return self.application(environ, logging_start_response)
