"""Refuse request bodies larger than ``[api] max_request_body_size``.

A body is otherwise read whole into memory by the first handler that
parses it, whatever its size. The largest body memcanal takes is a few
kilobytes (a decision's reason, at most 4000 characters), so the default
limit of 256 KiB refuses nothing legitimate.

oslo.middleware's ``sizelimit.RequestBodySizeLimiter`` does this job but
does not fit the API: its 413 is webob's HTML or plain text, without an
error code (and with a literal ``%s`` where the limit should be); it reads
``[oslo_middleware] max_request_body_size`` rather than an ``[api]``
option; and it counts a chunked body only when a handler reads it, 64 KiB
at a time through webob, so up to 64 KiB past the limit are read and the
413 comes from inside the handler.
"""

import webob.exc

from memcanal.api import errors
from memcanal.api import util


def _read_at_most(stream, size):
    """Up to ``size`` bytes of ``stream``; fewer only at its end.

    A WSGI input may return less than asked before its end, so read until
    ``size`` bytes or end of input, never more than ``size`` in all.
    """
    chunks = []
    left = size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b''.join(chunks)


class BodySizeLimiter:
    """Answer 413 ``memcanal.body.too_large`` to a body over the limit.

    A Content-Length over the limit is refused before a byte of the body
    is read. A body without one (chunked transfer encoding) is read here,
    at most the limit plus one byte: that byte tells it is too large;
    a body within the limit is handed on as if it had had a
    Content-Length.
    """

    def __init__(self, application, conf):
        self.application = application
        self.limit = conf.api.max_request_body_size

    def _too_large(self, size):
        return webob.exc.HTTPRequestEntityTooLarge(
            'The request body is %s; at most %d bytes are accepted.' % (
                size, self.limit),
            comment=errors.BODY_TOO_LARGE)

    @util.wsgify
    def __call__(self, req):
        if req.content_length is not None:
            if req.content_length > self.limit:
                raise self._too_large('%d bytes' % req.content_length)
        elif req.is_body_readable:
            body = _read_at_most(req.body_file_raw, self.limit + 1)
            if len(body) > self.limit:
                raise self._too_large('over %d bytes' % self.limit)
            req.body = body
        return self.application
