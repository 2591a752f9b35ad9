"""memcanal's API through the keystoneauth session OSC authenticated.

The microversion is negotiated once per client: the root document
(``GET /``, no token needed) gives the server's maximum, and requests are
sent at the lower of that and what the user asked for (by default the
newest this client knows, memcanal.api.microversion.VERSIONS[-1]). An
older server thus still answers what it can, and a command that needs a
newer version than the server speaks says so instead of a bare 404.

Errors come back in the API's JSON format (doc/api.md, "Errors"); they
are raised as osc-lib exceptions whose message leads with the error's
``code``, so a user sees ``memcanal.decision.state_conflict: ...``.
"""

from keystoneauth1 import adapter
from osc_lib import exceptions

from memcanal.api import microversion

SERVICE_TYPE = microversion.SERVICE_TYPE
HEADER = microversion.HEADER
KNOWN_VERSIONS = microversion.VERSIONS
LATEST_KNOWN = KNOWN_VERSIONS[-1]
# What --os-memcanal-api-version takes besides an exact X.Y: the major
# version alone, meaning "negotiate".
NEGOTIATE = '1'


def _parse(version):
    major, minor = version.split('.')
    return int(major), int(minor)


class APIError(exceptions.ClientException):
    """An error status osc-lib has no class for (405, 406, 415, 500...)."""

    message = 'memcanal API error'


_ERRORS = {cls.http_status: cls for cls in (
    exceptions.BadRequest, exceptions.Unauthorized, exceptions.Forbidden,
    exceptions.NotFound, exceptions.Conflict, exceptions.OverLimit)}


def error_from_response(response):
    """The osc-lib exception for an error response: ``<code>: <detail>``
    (plus the request id), whatever the body."""
    try:
        [error] = response.json()['errors'][:1]
        message = '%s: %s' % (error.get('code'), error.get('detail'))
        request = error.get('request_id')
    except (ValueError, KeyError, TypeError):
        # Not the API's format: a proxy's page, or a server that is not
        # memcanal at all.
        message = response.text[:200] or response.reason
        request = response.headers.get('x-openstack-request-id')
    if request:
        message += ' (request %s)' % request
    return _ERRORS.get(response.status_code, APIError)(
        response.status_code, message)


class Client:
    """GET, POST and PATCH paths of the API, negotiating the version.

    ``requested_version``: an 'X.Y' the user insists on, or NEGOTIATE
    (the default) for the newest both sides speak. ``auth``, when given,
    replaces the session's authentication plugin.
    """

    def __init__(self, session, requested_version=NEGOTIATE,
                 endpoint_override=None, interface=None, region_name=None,
                 auth=None):
        self._adapter = adapter.Adapter(
            session, service_type=SERVICE_TYPE, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override,
            auth=auth)
        self.requested_version = requested_version
        self._version = None

    @property
    def api_version(self):
        """The version requests are sent at (asks the server once)."""
        if self._version is None:
            wanted = (LATEST_KNOWN if self.requested_version == NEGOTIATE
                      else self.requested_version)
            root = self._send('GET', '/', version=None)
            [server] = root['versions']
            self._version = min(wanted, server['max_version'], key=_parse)
        return self._version

    def require(self, version, what):
        """CommandError unless the negotiated version is ``version`` or
        later: ``what`` (e.g. 'decisions') does not exist before it."""
        if _parse(self.api_version) < _parse(version):
            raise exceptions.CommandError(
                '%s need memcanal API %s; this session speaks %s (the '
                'server\'s maximum or --os-memcanal-api-version)' % (
                    what, version, self.api_version))

    def _send(self, method, path, body=None, params=None, version=None):
        headers = {'Accept': 'application/json'}
        if version is not None:
            headers[HEADER] = '%s %s' % (SERVICE_TYPE, version)
        response = self._adapter.request(
            path, method, json=body, params=params, headers=headers,
            raise_exc=False)
        if response.status_code >= 400:
            raise error_from_response(response)
        return response.json()

    def get(self, path, params=None):
        return self._send('GET', path, params=params,
                          version=self.api_version)

    def post(self, path, body=None):
        return self._send('POST', path, body=body, version=self.api_version)

    def patch(self, path, body):
        return self._send('PATCH', path, body=body, version=self.api_version)

    def iterate(self, path, key, params=None):
        """The items of a paginated list, fetching the next page (its
        ``next`` link, which carries the query, marker included) only when
        the caller reads past the current one."""
        body = self.get(path, params=params)
        while True:
            yield from body[key]
            following = [link['href'] for link in body.get('links', ())
                         if link['rel'] == 'next']
            if not following:
                return
            body = self.get(following[0])

    def list_all(self, path, key, params=None):
        """Every item of a paginated list."""
        return list(self.iterate(path, key, params))
