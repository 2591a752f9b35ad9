"""``openstack memcanal host set --admit|--no-admit`` on the seeded API
(1.10): a host borrows and lends only once an operator admits it."""

from unittest import mock

from osc_lib import exceptions
import pytest

from memcanal.api import microversion
from memcanal import context
from memcanal.db import api as db_api
from memcanal.osc.v1 import hosts as host_commands
from memcanal.tests.unit.osc import conftest
from memcanal.tests.unit.osc import test_commands


@pytest.mark.parametrize('by', ['name', 'uuid'])
def test_set_admits_and_stops_a_host(run, api, by):
    _, hosts, _ = api
    name = {'name': 'host-a', 'uuid': hosts['host-a']}[by]
    admitted = test_commands.fields(run(host_commands.SetHost, name,
                                        '--admit'))
    assert (admitted['uuid'], admitted['pooling_admitted']) == (
        hosts['host-a'], True)
    ctx = context.get_admin_context()
    assert db_api.get_host(ctx, hosts['host-a'])['pooling_admitted']
    stopped = test_commands.fields(run(host_commands.SetHost, name,
                                       '--no-admit'))
    assert stopped['pooling_admitted'] is False
    assert not db_api.get_host(ctx, hosts['host-a'])['pooling_admitted']


def test_set_needs_a_switch_and_a_known_host(run, api):
    with pytest.raises(SystemExit):
        run(host_commands.SetHost, 'host-a')
    with pytest.raises(SystemExit):
        run(host_commands.SetHost, 'host-a', '--admit', '--no-admit')
    with pytest.raises(exceptions.CommandError, match='No memcanal host is '
                       'named host-z'):
        run(host_commands.SetHost, 'host-z', '--admit')


def test_admitting_needs_1_10(api, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS', microversion.VERSIONS[
        :microversion.VERSIONS.index('1.10')])
    app = mock.Mock()
    app.client_manager.memcanal = conftest.make_client(api[0])
    command = host_commands.SetHost(app, None)
    with pytest.raises(exceptions.CommandError, match='Admitting hosts to '
                       'memory pooling need memcanal API 1.10'):
        command.take_action(command.get_parser('x').parse_args(
            ['host-a', '--admit']))
