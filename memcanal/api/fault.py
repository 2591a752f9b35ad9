"""Turn an exception nobody handled into a 500 in the API's error format."""

from oslo_log import log as logging
from oslo_middleware import request_id
import webob.exc

from memcanal.api import errors
from memcanal.api import util

LOG = logging.getLogger(__name__)


class FaultWrapper:
    """The last line: log the traceback, answer a JSON 500.

    The detail deliberately says nothing about the exception (it may carry
    SQL or hostnames); the request id in the error finds it in the log.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        try:
            return self.application(environ, start_response)
        except Exception:
            req_id = environ.get(request_id.ENV_REQUEST_ID)
            LOG.exception('Unexpected error handling %s %s (request %s)',
                          environ.get('REQUEST_METHOD'),
                          environ.get('PATH_INFO'), req_id)
            exc = webob.exc.HTTPInternalServerError(
                'An unexpected error occurred; the service log has the '
                'details under request id %s.' % req_id)
            response = util.error_response(environ, exc,
                                           code=errors.INTERNAL_ERROR)
            return response(environ, start_response)
