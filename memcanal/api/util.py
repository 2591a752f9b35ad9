"""What every handler and middleware of the API shares.

Errors are rendered here, always as API-SIG JSON
(https://specs.openstack.org/openstack/api-sig/guidelines/errors.html):
webob would otherwise pick HTML or plain text from the Accept header and a
client could no longer read the error's ``code``.
"""

import re
import urllib.parse

import jsonschema
from oslo_middleware import request_id
from oslo_serialization import jsonutils
from oslo_utils import timeutils
import webob
import webob.dec
import webob.exc

from memcanal.api import errors

# Where the request's memcanal.context.RequestContext and the service's
# oslo.config ConfigOpts are kept in the WSGI environ.
ENV_CONTEXT = 'memcanal.context'
ENV_CONF = 'memcanal.conf'

JSON = 'application/json'
_INTEGER = re.compile(r'^-?[0-9]+$')
# Headers of a webob exception that describe webob's own body, not ours.
_BODY_HEADERS = ('content-type', 'content-length')
# The most characters an error detail quotes of one value of the request
# (jsonschema quotes the offending value whole), and the most any detail
# has: a detail quoting a multi-megabyte field must not send it back.
MAX_QUOTED = 200
MAX_DETAIL = 500
# What webob leaves unquoted in a path.
_PATH_SAFE = "/~!$&'()*+,;=:@"


def shorten(text, limit=MAX_QUOTED):
    """``text``, cut to ``limit`` characters and saying its full length."""
    if len(text) <= limit:
        return text
    return '%s... (%d characters in all)' % (text[:limit], len(text))


def error_response(environ, exc, code=None, **extra):
    """Render the webob HTTP error ``exc`` as an API-SIG JSON response.

    The error code is ``code``, else the exception's ``comment`` (where
    handlers put it, as placement's do), else ``errors.DEFAULT``. Headers
    the exception carries, such as Allow or WWW-Authenticate, are kept.
    ``extra`` adds fields to the error, e.g. a 406's supported versions.
    The detail is cut to MAX_DETAIL characters, as it may quote the
    request (a path, a header, a body's field name).
    """
    error = {
        'status': exc.code,
        'code': code or exc.comment or errors.DEFAULT,
        'title': exc.title,
        'detail': shorten(str(exc.detail) if exc.detail else exc.explanation,
                          MAX_DETAIL),
    }
    req_id = environ.get(request_id.ENV_REQUEST_ID)
    if req_id:
        error['request_id'] = req_id
    error.update(extra)
    response = json_response({'errors': [error]}, status=exc.status)
    for name, value in exc.headers.items():
        if name.lower() not in _BODY_HEADERS:
            response.headers.add(name, value)
    return response


class MemcanalWsgify(webob.dec.wsgify):
    """webob's wsgify, answering HTTP errors raised inside in JSON.

    Handlers raise ``webob.exc.HTTPNotFound(detail, comment=errors.X)``;
    this turns it into the API-SIG error response. Anything else raised
    propagates to the fault wrapper, which answers 500.
    """

    def call_func(self, req, *args, **kwargs):
        try:
            return super().call_func(req, *args, **kwargs)
        except webob.exc.HTTPError as exc:
            return error_response(req.environ, exc)


wsgify = MemcanalWsgify


def json_response(data, status=200):
    """A JSON response; not cached, as reports arrive continuously."""
    response = webob.Response(status=status, content_type=JSON,
                              charset=None)
    response.body = jsonutils.dump_as_bytes(data)
    response.cache_control = 'no-cache'
    return response


def check_accept(req):
    """Raise 406 unless the client accepts JSON, all this API speaks.

    No Accept header, or ``*/*``, accepts JSON.
    """
    if not req.accept.acceptable_offers([JSON]):
        raise webob.exc.HTTPNotAcceptable(
            'Only %s is provided; the Accept header excludes it.' % JSON,
            comment=errors.ACCEPT_NOT_ACCEPTABLE)


def _bad_query(detail):
    return webob.exc.HTTPBadRequest(detail, comment=errors.QUERY_INVALID)


def validate_query_params(req, schema):
    """The query string as a dict checked against the JSON ``schema``.

    ``schema`` describes an object whose properties are the accepted
    parameters. Each parameter may appear once. Properties of type
    "integer" are converted from their string before validation, so the
    schema states ranges naturally. Raises 400 ``memcanal.query.invalid``
    with a detail naming the parameter at fault.
    """
    properties = schema.get('properties', {})
    try:
        query = req.GET
    except UnicodeDecodeError:
        raise _bad_query('The query string is not UTF-8.')
    if any('\x00' in text for item in query.items() for text in item):
        # Nothing takes it, and PostgreSQL refuses it in a comparison.
        raise _bad_query('The query string has a NUL character.')
    unknown = sorted(set(query) - set(properties))
    if unknown:
        raise _bad_query('Unknown query parameter(s): %s. Accepted: %s.' % (
            ', '.join(unknown), ', '.join(sorted(properties)) or 'none'))
    params = {}
    for name in query:
        values = query.getall(name)
        if len(values) > 1:
            raise _bad_query('Query parameter %s is given %d times; give it '
                             'once.' % (name, len(values)))
        value = values[0]
        if properties[name].get('type') == 'integer':
            try:
                if not _INTEGER.match(value):
                    raise ValueError(value)
                value = int(value)
            except ValueError:
                raise _bad_query('Query parameter %s must be an integer, '
                                 'not %r.' % (name, values[0]))
        params[name] = value
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(params))
    if error is not None:
        name = error.absolute_path[0] if error.absolute_path else None
        if name is None:
            raise _bad_query('Invalid query string: %s' % _schema_message(
                error))
        raise _bad_query('Invalid query parameter %s: %s' % (
            name, _schema_message(error)))
    return params


def _schema_message(error):
    """jsonschema's message for ``error``, with the value it quotes cut.

    jsonschema quotes the offending value whole (``'aaa...' is too
    long``); only its start is kept, so the message still says what is
    wrong after it.
    """
    quoted = repr(error.instance)
    return error.message.replace(quoted, shorten(quoted))


def extract_json(req, schema):
    """The request body as JSON checked against ``schema``.

    A body that is not ``application/json`` is 415
    ``memcanal.body.unsupported_media_type``, as placement's
    ``require_content`` answers (no body at all is JSON ``null``, for
    bodies a schema makes optional); a body that is not JSON or breaks the
    schema is 400 ``memcanal.body.invalid`` naming the field at fault.
    """
    if req.body and req.content_type != JSON:
        raise webob.exc.HTTPUnsupportedMediaType(
            'The body is %s; only %s is accepted.' % (
                'of type %s' % req.content_type if req.content_type
                else 'without a Content-Type', JSON),
            comment=errors.BODY_UNSUPPORTED_MEDIA_TYPE)
    try:
        body = jsonutils.loads(req.body or b'null')
    except ValueError as exc:
        raise webob.exc.HTTPBadRequest('The body is not JSON: %s' % exc,
                                       comment=errors.BODY_INVALID)
    except RecursionError:
        # Arrays or objects nested deeper than Python's stack.
        raise webob.exc.HTTPBadRequest('The body nests too deeply.',
                                       comment=errors.BODY_INVALID)
    if not all(map(_storable, _strings(body))):
        raise webob.exc.HTTPBadRequest(
            'The body has a string with a NUL character or a lone '
            'surrogate.', comment=errors.BODY_INVALID)
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(body))
    if error is not None:
        where = '/'.join(str(part) for part in error.absolute_path)
        raise webob.exc.HTTPBadRequest(
            'Invalid body%s: %s' % (' at %s' % where if where else '',
                                    _schema_message(error)),
            comment=errors.BODY_INVALID)
    return body


def _strings(value):
    """Every string of a decoded JSON value, keys too; without recursion,
    as the value may nest as deep as the JSON parser allowed."""
    pending = [value]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            pending.extend(value)
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _storable(text):
    """Whether every database stores ``text``: JSON may escape a NUL,
    which PostgreSQL refuses, or a lone surrogate (``"\\ud83d"``), which
    is no UTF-8 at all."""
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return '\x00' not in text


def quoted_path(environ):
    """The request's path, URL-quoted byte by byte as the client sent it:
    printable (for a log line or an error's detail) even when it is not
    UTF-8, which webob's ``req.path`` fails to decode."""
    return urllib.parse.quote(
        (environ.get('SCRIPT_NAME', '') + environ.get('PATH_INFO', ''))
        # PEP 3333: the bytes received, each as one character.
        .encode('latin-1'), safe=_PATH_SAFE)


def path_item(req, name):
    """A variable of the matched route, e.g. the ``uuid`` of /hosts/{uuid}."""
    return req.environ['wsgiorg.routing_args'][1][name]


def page_links(req, page, limit, next_marker):
    """A page's ``links``: ``next`` when ``page`` is full, else none.

    A full page may be the last one, in which case the next page is empty;
    knowing that for sure would cost another query. The href is an
    absolute path (no scheme or host), so it holds behind proxies; the
    request's other parameters are kept.
    """
    if len(page) < limit:
        return []
    params = [(key, value) for key, value in req.GET.items()
              if key not in ('limit', 'marker')]
    params += [('limit', str(limit)), ('marker', str(next_marker))]
    return [{'rel': 'next',
             'href': '%s?%s' % (req.path, urllib.parse.urlencode(params))}]


def isotime(value):
    """A naive UTC datetime as ISO 8601 with 'Z', to the second, or None.

    Seconds, because MariaDB's DATETIME stores no fraction: the same row
    then reads the same on every database.
    """
    if value is None:
        return None
    return timeutils.normalize_time(value).strftime('%Y-%m-%dT%H:%M:%SZ')
