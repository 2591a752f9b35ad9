"""memcanal_tempest_plugin without a cloud: what tempest loads from it,
and the client's microversion handling. test_tempest.py runs the plugin's
tests against a cloud."""

import os
from unittest import mock

from oslo_config import cfg
import pytest
from tempest.lib.common import rest_client
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin import config
from memcanal_tempest_plugin import plugin
from memcanal_tempest_plugin.services import memcanal_client


def test_tests_are_found_under_the_package_name():
    test_dir, top_level = plugin.MemcanalTempestPlugin().load_tests()
    assert os.path.isfile(os.path.join(test_dir, 'api', 'test_root.py'))
    assert os.path.relpath(test_dir, top_level) == os.path.join(
        'memcanal_tempest_plugin', 'tests')


def test_options_registered_and_listed():
    conf = cfg.ConfigOpts()
    tempest_plugin = plugin.MemcanalTempestPlugin()
    tempest_plugin.register_opts(conf)
    conf([], default_config_files=[])
    assert conf.service_available.memcanal is True
    assert (conf.memcanal.catalog_type, conf.memcanal.max_microversion,
            conf.memcanal.change_existing_resources) == (
        'memcanal', 'latest', False)
    listed = dict(tempest_plugin.get_opt_lists())
    assert listed['memcanal'] == config.MemcanalGroup
    assert listed['service_available'] == [config.service_available]


def client(microversion):
    return memcanal_client.MemcanalClient(mock.Mock(), 'memcanal', '',
                                          microversion=microversion)


def test_the_microversion_is_sent_only_when_asked():
    assert client('1.5').get_headers()['OpenStack-API-Version'] == \
        'memcanal 1.5'
    assert 'OpenStack-API-Version' not in client(None).get_headers()


@pytest.mark.parametrize('asked, served, ok', [
    ('1.5', 'memcanal 1.5', True),
    ('1.5', 'memcanal 1.4', False),
    ('latest', 'memcanal 1.5', True),
])
def test_an_answer_at_another_version_is_refused(asked, served, ok):
    # tempest's responses: headers by lower-case name, and a status.
    answer = type('Response', (dict,), {'status': 200})(
        {'openstack-api-version': served})
    with mock.patch.object(rest_client.RestClient, 'request',
                           return_value=(answer, b'{}')):
        if ok:
            assert client(asked).request('GET', 'hosts')[1] == b'{}'
        else:
            with pytest.raises(lib_exc.InvalidHTTPResponseHeader):
                client(asked).request('GET', 'hosts')


def test_next_page_params_keep_only_the_query():
    page = {'instances': [], 'links': [
        {'rel': 'next',
         'href': '/memcanal/instances?host=h&limit=2&marker=m'}]}
    assert memcanal_client.next_page_params(page) == {
        'host': 'h', 'limit': '2', 'marker': 'm'}
    assert memcanal_client.next_page_params({'links': []}) is None
