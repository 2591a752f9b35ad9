"""NovaMigrator against the real nova API (its openstacksdk Connection,
built from [nova] options, reaches the in-process API through nova's
wsgi-intercept): a live migration is started and polled to 'applied';
one to a host that refuses is refused by nova at once (start raises)
and polls 'failed'."""

import tempfile
import time

from keystoneauth1 import loading as ks_loading
from openstack import exceptions as sdk_exc
from oslo_config import cfg

from memcanal.service import nova_migration
from memcanal.tests.nova_functional import base

TIMEOUT = 20


def _register_nova_opts(conf):
    """memcanal.conf.nova's [nova] options (keystoneauth's, service type
    compute). Importing memcanal.conf here would register every memcanal
    option on oslo.config's global CONF, where nova's own options
    already are ([DEFAULT] host...)."""
    group = cfg.OptGroup('nova')
    conf.register_group(group)
    ks_loading.register_session_conf_options(conf, 'nova')
    ks_loading.register_auth_conf_options(conf, 'nova')
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(opts, service_type='compute')
    conf.register_opts(opts, group=group)


class TestNovaMigrator(base.MemCanalNovaTestCase):

    def migrator(self, tmp_dir):
        """A NovaMigrator from a memcanal config file naming nova's API."""
        path = '%s/memcanal.conf' % tmp_dir
        with open(path, 'w') as f:
            f.write('[nova]\nauth_type = admin_token\n'
                    'endpoint = %s\ntoken = unused\n'
                    % self.admin_api.base_url)
        conf = cfg.ConfigOpts()
        _register_nova_opts(conf)
        conf(['--config-file', path], default_config_files=[])
        migrator = nova_migration.NovaMigrator.from_conf(conf)
        # nova's test API takes its caller from these headers, as
        # keystonemiddleware would from a token.
        migrator.connection.session.additional_headers.update({
            'X-Auth-User': 'admin', 'X-User-Id': 'admin',
            'X-Auth-Project-Id': self.api_fixture.project_id,
            'X-Roles': 'admin,member,reader'})
        return migrator

    def settle(self, migrator, server, host):
        deadline = time.monotonic() + TIMEOUT
        while True:
            state = migrator.poll(server['id'], host)
            if state[0] != 'in_progress' or time.monotonic() > deadline:
                return state
            time.sleep(0.1)

    def live_migrations(self, server):
        return [m for m in self.admin_api.get_migrations()
                if m['instance_uuid'] == server['id']]

    def test_live_migration_applied_then_refused(self):
        directory = tempfile.TemporaryDirectory(prefix='mc-nova-')
        self.addCleanup(directory.cleanup)
        migrator = self.migrator(directory.name)
        server = self.boot(self.flavor('medium', 4096), host='host1')

        migrator.start(server['id'], 'host2')
        self.assertEqual(('applied', None),
                         self.settle(migrator, server, 'host2'))
        self.assertEqual('host2', self.host_of(server))
        # Started again once there: nothing more is asked of nova.
        migrator.start(server['id'], 'host2')
        self.assertEqual(1, len(self.live_migrations(server)))

        # host3's compute service is disabled: nova's scheduler refuses
        # it, before the API answers.
        [service] = self.admin_api.get_services(binary='nova-compute',
                                                host='host3')
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        with self.assertRaisesRegex(sdk_exc.BadRequestException,
                                    'No valid host'):
            migrator.start(server['id'], 'host3')
        state, error = self.settle(migrator, server, 'host3')
        self.assertEqual('failed', state)
        self.assertEqual('server is ACTIVE on host2, not on host3', error)
        self.assertEqual('host2', self.host_of(server))
