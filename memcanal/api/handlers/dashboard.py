"""``/dashboard``: a web page drawing the cloud's memory from the API.

The page and its script and style are static files shipped in the package
(memcanal/api/dashboard/); the script reads the JSON API with the token
the operator types in. The files hold no data, so they are served without
authentication (memcanal.api.auth) and whatever the Accept header says
(memcanal.api.handler): a browser asks for HTML, not JSON.
"""

import os

import webob.exc
import webob.static

from memcanal.api import errors
from memcanal.api import util

ASSETS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)),
                          'dashboard')
PAGE = 'index.html'
# Only files of these kinds are served: the directory holds nothing else,
# and a stray file (an editor's backup) stays private.
CONTENT_TYPES = {
    '.html': 'text/html',
    '.js': 'text/javascript',
    '.css': 'text/css',
}


def _serve(name):
    """The file ``name`` of ASSETS_DIR, revalidated on every use so a
    browser never runs an older script against a newer API."""
    return webob.static.FileApp(
        os.path.join(ASSETS_DIR, name),
        content_type=CONTENT_TYPES[os.path.splitext(name)[1]],
        charset='UTF-8', cache_control='no-cache')


@util.wsgify
def page(req):
    return _serve(PAGE)


@util.wsgify
def asset(req):
    """A file of the page; the name must be one shipped, so no path
    outside the directory can be asked for."""
    name = util.path_item(req, 'asset')
    if (os.path.splitext(name)[1] not in CONTENT_TYPES
            or name not in os.listdir(ASSETS_DIR)):
        raise webob.exc.HTTPNotFound('No resource at %s.' % req.path_info,
                                     comment=errors.ROUTE_NOT_FOUND)
    return _serve(name)


# The handlers answering something else than JSON.
HANDLERS = (page, asset)
