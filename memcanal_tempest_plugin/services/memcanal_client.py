"""A tempest RestClient for memcanal's REST API (doc/api.md).

Every request carries ``OpenStack-API-Version: memcanal X.Y`` when the
client was made with a microversion, and every answer is checked to have
been served at that version: a deployment that silently answered at
another would make the tests' field checks meaningless.
"""

import urllib.parse

from oslo_serialization import jsonutils as json
from tempest.lib.common import api_version_utils
from tempest.lib.common import rest_client

VERSION_HEADER = 'OpenStack-API-Version'
SERVICE_TYPE = 'memcanal'


class MemcanalClient(rest_client.RestClient):

    def __init__(self, auth_provider, service, region, microversion=None,
                 **kwargs):
        super().__init__(auth_provider, service, region, **kwargs)
        self.microversion = microversion

    def get_headers(self, accept_type=None, send_type=None):
        headers = super().get_headers(accept_type, send_type)
        if self.microversion:
            headers[VERSION_HEADER] = '%s %s' % (SERVICE_TYPE,
                                                 self.microversion)
        return headers

    def request(self, method, url, extra_headers=False, headers=None,
                body=None, chunked=False):
        resp, body = super().request(method, url, extra_headers, headers,
                                     body, chunked)
        if (self.microversion and self.microversion
                != api_version_utils.LATEST_MICROVERSION):
            api_version_utils.assert_version_header_matches_request(
                VERSION_HEADER, '%s %s' % (SERVICE_TYPE, self.microversion),
                resp)
        return resp, body

    def _json(self, method, path, params=None, body=None):
        """The JSON answer of a 200 to ``method`` on ``path``."""
        if params:
            path = '%s?%s' % (path, urllib.parse.urlencode(params))
        if body is not None:
            body = json.dumps(body)
        resp, answer = self.request(method, path, body=body)
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(answer))

    def show_root(self):
        """The versions document; it needs no token, but gets one."""
        return self._json('GET', '')

    def list_hosts(self):
        return self._json('GET', 'hosts')

    def show_host(self, uuid):
        return self._json('GET', 'hosts/%s' % uuid)

    def list_instances(self, **params):
        """A page of instances; ``limit``, ``marker``, ``host``,
        ``project_id``, ``deleted`` filter it."""
        return self._json('GET', 'instances', params)

    def show_instance(self, uuid):
        return self._json('GET', 'instances/%s' % uuid)

    def update_instance(self, uuid, **settings):
        """PATCH the instance's opt_out, floor_bytes, ceiling_bytes or
        mechanism (microversion 1.1)."""
        return self._json('PATCH', 'instances/%s' % uuid, body=settings)

    def list_instance_reports(self, uuid, **params):
        return self._json('GET', 'instances/%s/reports' % uuid, params)

    def list_decisions(self, **params):
        return self._json('GET', 'decisions', params)

    def show_decision(self, uuid):
        return self._json('GET', 'decisions/%s' % uuid)

    def _transition(self, uuid, request, reason):
        return self._json('POST', 'decisions/%s/%s' % (uuid, request),
                          body={'reason': reason} if reason else None)

    def approve_decision(self, uuid, reason=None):
        return self._transition(uuid, 'approve', reason)

    def reject_decision(self, uuid, reason=None):
        return self._transition(uuid, 'reject', reason)

    def rollback_decision(self, uuid, reason=None):
        return self._transition(uuid, 'rollback', reason)

    def show_demand_ratios(self):
        return self._json('GET', 'demand_ratios')

    def list_memory_servers(self):
        return self._json('GET', 'memory_servers')

    def update_memory_server(self, uuid, enabled):
        """Let memory pooling lend from the server, or stop it
        (microversion 1.6)."""
        return self._json('PATCH', 'memory_servers/%s' % uuid,
                          body={'enabled': enabled})

    def update_host(self, uuid, pooling_admitted):
        """Admit the host to memory pooling, or stop it (microversion
        1.10)."""
        return self._json('PATCH', 'hosts/%s' % uuid,
                          body={'pooling_admitted': pooling_admitted})


def next_page_params(page):
    """The query parameters of a page's ``next`` link, or None on the last
    page. The link's path is the API's own (it may carry a prefix the
    catalog's endpoint already has), so only its query is reused."""
    for link in page.get('links', []):
        if link['rel'] == 'next':
            query = urllib.parse.urlparse(link['href']).query
            return dict(urllib.parse.parse_qsl(query))
    return None
