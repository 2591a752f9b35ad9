"""The entry point tempest finds (``tempest.test_plugins: memcanal``)."""

import os

from tempest import config
from tempest.test_discover import plugins

from memcanal_tempest_plugin import config as memcanal_config

CLIENTS_MODULE = 'memcanal_tempest_plugin.services.memcanal_client'


class MemcanalTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        """The tests' directory and the top of the package tree above it,
        so their module names start with ``memcanal_tempest_plugin.``."""
        top_level = os.path.dirname(os.path.dirname(os.path.abspath(
            __file__)))
        return (os.path.join(top_level, 'memcanal_tempest_plugin', 'tests'),
                top_level)

    def register_opts(self, conf):
        conf.register_opt(memcanal_config.service_available,
                          group='service_available')
        config.register_opt_group(conf, memcanal_config.memcanal_group,
                                  memcanal_config.MemcanalGroup)

    def get_opt_lists(self):
        return [
            (memcanal_config.memcanal_group.name,
             memcanal_config.MemcanalGroup),
            ('service_available', [memcanal_config.service_available]),
        ]

    def get_service_clients(self):
        """MemcanalClient, built for each credential as
        ``os_admin.memcanal.MemcanalClient()``, from ``[memcanal]``."""
        params = {
            'name': 'memcanal',
            'service_version': 'memcanal',
            'module_path': CLIENTS_MODULE,
            'client_names': ['MemcanalClient'],
        }
        params.update(config.service_client_config('memcanal'))
        return [params]
