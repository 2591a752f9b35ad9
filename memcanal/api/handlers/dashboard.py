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
# The page runs only its own script and style and talks only to the API
# that served it, so a value of the API that slipped into the DOM as
# markup could run nothing; no other site may frame it (its Approve
# buttons) or be sent where it came from.
SECURITY_HEADERS = {
    'Content-Security-Policy': (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"),
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
}


def _serve(req, name):
    """The file ``name`` of ASSETS_DIR, revalidated on every use so a
    browser never runs an older script against a newer API."""
    response = req.get_response(webob.static.FileApp(
        os.path.join(ASSETS_DIR, name),
        content_type=CONTENT_TYPES[os.path.splitext(name)[1]],
        charset='UTF-8', cache_control='no-cache'))
    response.headers.update(SECURITY_HEADERS)
    return response


def _shipped(name):
    """Whether ``name`` is a regular file of ASSETS_DIR itself: one entry
    of the directory, of a served kind, not a link out of it."""
    path = os.path.join(ASSETS_DIR, name)
    return (os.path.splitext(name)[1] in CONTENT_TYPES
            and name in os.listdir(ASSETS_DIR)
            and os.path.isfile(path)
            and os.path.dirname(os.path.realpath(path))
            == os.path.realpath(ASSETS_DIR))


@util.wsgify
def page(req):
    return _serve(req, PAGE)


@util.wsgify
def asset(req):
    """A file of the page; the name must be one shipped, so no path
    outside the directory can be asked for."""
    name = util.path_item(req, 'asset')
    if not _shipped(name):
        raise webob.exc.HTTPNotFound(
            'No resource at %s.' % util.quoted_path(req.environ),
            comment=errors.ROUTE_NOT_FOUND)
    return _serve(req, name)


# The handlers answering something else than JSON.
HANDLERS = (page, asset)
