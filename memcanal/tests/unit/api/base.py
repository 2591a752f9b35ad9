"""Talking to the API app in unit tests."""

import json

import webob

from memcanal.tests.unit.api import data


def auth_headers(token, project=None, roles=None, headers=None):
    """The headers noauth2 reads a persona from, added to ``headers``."""
    all_headers = dict(headers or {})
    for name, value in (('X-Auth-Token', token), ('X-Project-Id', project),
                        ('X-Roles', roles)):
        if value is not None:
            all_headers[name] = value
    return all_headers


class Client:
    """GETs against the app as a persona, the way noauth2 reads them."""

    def __init__(self, app):
        self.app = app

    def request(self, path, method='GET', token='admin', project=None,
                roles=None, headers=None, body=None):
        """``body``: bytes as they are, anything else as JSON; either
        with Content-Type application/json unless ``headers`` has one."""
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = auth_headers(token, project, roles, headers)
        if body is not None:
            # As a JSON client sends it, unless the test says otherwise.
            headers.setdefault('Content-Type', 'application/json')
        return webob.Request.blank(
            path, method=method, body=body, headers=headers
        ).get_response(self.app)

    def admin(self, path, **kwargs):
        return self.request(path, **kwargs)

    def reader(self, path, project=data.PROJECT_A, **kwargs):
        """A project reader: role reader on ``project``, not admin."""
        return self.request(path, token='reader-of-%s' % project,
                            project=project, roles='member,reader',
                            **kwargs)


def assert_error(response, status, code):
    """``response`` is an API-SIG error with ``status`` and ``code``."""
    assert response.status_int == status, response.body
    assert response.content_type == 'application/json'
    [error] = response.json['errors']
    assert error['status'] == status
    assert error['code'] == code
    assert error['title']
    assert error['detail']
    assert error['request_id'].startswith('req-')
    assert error['request_id'] == response.headers['x-openstack-request-id']
    return error
