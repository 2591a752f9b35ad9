"""``openstack memcanal memory server list|set`` on the seeded API."""

from unittest import mock

from osc_lib import exceptions
import pytest

from memcanal.api import microversion
from memcanal import context
from memcanal.db import api as db_api
from memcanal.osc.v1 import memory_servers
from memcanal.rpc import reports
from memcanal.tests.unit.osc import conftest
from memcanal.tests.unit.osc import test_commands

GIB = 2 ** 30


@pytest.fixture
def server(api):
    """host-b's memory server, as its agent registers it: disabled."""
    _, hosts, _ = api
    db_api.store_report(context.get_admin_context(), reports.validate_report(
        {'host_uuid': hosts['host-b'], 'sequence': 9,
         'collected_at': '2026-11-24T09:00:00Z', 'instances': [],
         'memserver': {'address': '10.0.0.2:7400',
                       'capacity_bytes': 16 * GIB}},
        max_mrc_points=100, max_instances=100))
    return hosts['host-b']


def test_list_shows_which_servers_may_lend(run, server):
    [listed] = test_commands.rows(run(memory_servers.ListMemoryServer))
    assert (listed['Host'], listed['Address'], listed['Enabled'],
            listed['Capacity (MiB)'], listed['Free (MiB)']) == (
        'host-b', '10.0.0.2:7400', False, 16384, 0)


@pytest.mark.parametrize('by', ['uuid', 'host name', 'host uuid'])
def test_set_enables_and_disables_a_server(run, server, by):
    [listed] = test_commands.rows(run(memory_servers.ListMemoryServer))
    name = {'uuid': listed['UUID'], 'host name': 'host-b',
            'host uuid': server}[by]
    enabled = test_commands.fields(run(memory_servers.SetMemoryServer,
                                       name, '--enable'))
    assert (enabled['uuid'], enabled['enabled'], enabled['free_bytes']) == (
        listed['UUID'], True, 16 * GIB)
    [listed] = test_commands.rows(run(memory_servers.ListMemoryServer))
    assert (listed['Enabled'], listed['Free (MiB)']) == (True, 16384)
    disabled = test_commands.fields(run(memory_servers.SetMemoryServer,
                                        name, '--disable'))
    assert disabled['enabled'] is False


def test_set_needs_a_switch_and_a_known_server(run, server):
    with pytest.raises(SystemExit):
        run(memory_servers.SetMemoryServer, 'host-b')
    with pytest.raises(SystemExit):
        run(memory_servers.SetMemoryServer, 'host-b', '--enable',
            '--disable')
    with pytest.raises(exceptions.CommandError, match='No memory server is '
                       'host-z'):
        run(memory_servers.SetMemoryServer, 'host-z', '--enable')


def test_enabling_needs_1_6(api, server, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS', microversion.VERSIONS[
        :microversion.VERSIONS.index('1.6')])
    app = mock.Mock()
    app.client_manager.memcanal = conftest.make_client(api[0])
    command = memory_servers.SetMemoryServer(app, None)
    with pytest.raises(exceptions.CommandError, match='Enabling memory '
                       'servers need memcanal API 1.6'):
        command.take_action(command.get_parser('x').parse_args(
            ['host-b', '--enable']))
