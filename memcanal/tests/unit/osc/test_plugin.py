"""The hooks OpenStackClient calls."""

import argparse
from unittest import mock

from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from osc_lib import exceptions
import pytest

from memcanal.osc import client as osc_client
from memcanal.osc import plugin
from memcanal.tests.unit.osc import conftest


def test_api_versions():
    assert plugin.check_api_version('1') is True
    assert plugin.check_api_version(osc_client.LATEST_KNOWN) is True
    with pytest.raises(exceptions.CommandError, match='2.0 is not '
                       'supported'):
        plugin.check_api_version('2.0')


def test_option_defaults_to_negotiation(monkeypatch):
    monkeypatch.delenv('OS_MEMCANAL_API_VERSION', raising=False)
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    assert parser.parse_args([]).os_memcanal_api_version == '1'
    assert parser.parse_args(['--os-memcanal-api-version', '1.2']
                             ).os_memcanal_api_version == '1.2'
    monkeypatch.setenv('OS_MEMCANAL_API_VERSION', '1.3')
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    assert parser.parse_args([]).os_memcanal_api_version == '1.3'


def _instance(session):
    """OSC's ClientManager as make_client reads it."""
    instance = mock.Mock(_api_version={'memcanal': '1.2'},
                         interface='public', region_name=None,
                         session=session)
    instance.get_configuration.return_value = {
        'memcanal_endpoint_override': conftest.URL}
    return instance


def test_make_client_honours_the_endpoint_override(api):
    # The session OSC authenticated, its token's endpoint elsewhere.
    made = plugin.make_client(_instance(ks_session.Session(
        auth=token_endpoint.Token('http://elsewhere.test', 'admin'),
        session=api[0])))
    assert made.api_version == '1.2'
    assert made.get('/hosts')['hosts'][0]['name'] == 'host-a'


def test_auth_type_none_is_noauth2s_admin(api):
    """--os-auth-type none: keystoneauth's token "notused" would be an
    ordinary noauth2 user, refused the admin-only host list."""
    made = plugin.make_client(_instance(ks_session.Session(
        auth=noauth.NoAuth(), session=api[0])))
    assert made.get('/hosts')['hosts'][0]['name'] == 'host-a'
    as_keystoneauth_would = conftest.make_client(api[0])
    as_keystoneauth_would._adapter.auth = noauth.NoAuth()
    with pytest.raises(exceptions.Forbidden, match='policy'):
        as_keystoneauth_would.get('/hosts')
