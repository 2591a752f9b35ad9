"""The plugin's client: version negotiation, errors, pagination."""

from osc_lib import exceptions
import pytest
import requests

from memcanal.api import microversion
from memcanal.osc import client as osc_client
from memcanal.tests.unit.api import data
from memcanal.tests.unit.osc import conftest


def test_negotiates_the_newest_both_speak(api, client, monkeypatch):
    assert client.api_version == osc_client.LATEST_KNOWN
    assert conftest.make_client(api[0], '1.2').api_version == '1.2'
    # An older server: its maximum wins over what the client knows.
    monkeypatch.setattr(microversion, 'VERSIONS', ['1.0', '1.1', '1.2'])
    older = conftest.make_client(api[0])
    assert older.api_version == '1.2'
    assert conftest.make_client(api[0], '1.4').api_version == '1.2'
    older.require('1.1', 'Decisions')
    with pytest.raises(exceptions.CommandError, match='need memcanal API '
                       '1.3; this session speaks 1.2'):
        older.require('1.3', 'Deleted instances')


def test_requests_are_sent_at_the_negotiated_version(api):
    pinned = conftest.make_client(api[0], '1.3')
    shown = pinned.get('/instances/%s' % data.A1)
    assert 'observed_bytes' in shown
    # wss_bytes came with 1.4.
    assert 'wss_bytes' not in shown


def test_api_errors_carry_their_code(client):
    with pytest.raises(exceptions.NotFound) as caught:
        client.get('/instances/%s' % data.UNKNOWN)
    assert str(caught.value).startswith('memcanal.instance.not_found: ')
    assert '(request req-' in str(caught.value)
    assert caught.value.code == 404
    with pytest.raises(exceptions.BadRequest, match='memcanal.body.invalid'):
        client.patch('/instances/%s' % data.A1, {'opt_out': 'yes'})
    # A status osc-lib has no class for.
    with pytest.raises(osc_client.APIError,
                       match='memcanal.method.not_allowed') as caught:
        client.post('/instances')
    assert caught.value.code == 405


def test_an_error_not_in_the_api_format():
    response = requests.Response()
    response.status_code = 502
    response._content = b'<html>Bad Gateway</html>'
    response.headers['x-openstack-request-id'] = 'req-1'
    error = osc_client.error_from_response(response)
    assert isinstance(error, osc_client.APIError)
    assert str(error) == '<html>Bad Gateway</html> (request req-1) (HTTP 502)'


def test_list_all_follows_next_links(client):
    listed = client.list_all('/instances', 'instances', {'limit': 2})
    assert [i['uuid'] for i in listed] == data.ALL


def test_iterate_reads_a_page_only_when_needed(client, gets):
    paths = gets
    pages = client.iterate('/instances', 'instances', {'limit': 2})
    assert [next(pages)['uuid'], next(pages)['uuid']] == data.ALL[:2]
    assert paths == ['/instances']
    assert next(pages)['uuid'] == data.ALL[2]
    assert len(paths) == 2 and 'marker=' in paths[1]
