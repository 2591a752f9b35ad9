"""``GET /memory_servers`` (admin, 1.5): who lends memory to whom; and
``PATCH /memory_servers/{uuid}`` (admin, 1.6): which servers may lend."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.tests import base


class MemoryServersTest(base.BaseMemcanalTest):

    min_microversion = '1.5'

    @decorators.idempotent_id('7b9c4a59-cb9b-426f-8f3a-bcfcae02f75a')
    def test_lending_adds_up(self):
        servers = self.admin_client.list_memory_servers()['memory_servers']
        hosts = {host['uuid']: host for host in
                 self.admin_client.list_hosts()['hosts']}
        names = [server['host_name'] for server in servers]
        self.assertEqual(sorted(names), names)
        for server in servers:
            self.assertEqual(hosts[server['host_uuid']]['name'],
                             server['host_name'])
            self.assertEqual(sum(lease['lent_bytes']
                                 for lease in server['leases']),
                             server['lent_bytes'])
            self.assertEqual(hosts[server['host_uuid']]['lent_bytes'],
                             server['lent_bytes'])
            # Nothing while disabled (1.6 says which are).
            self.assertIn(server['free_bytes'], (
                0, max(server['capacity_bytes'] - server['lent_bytes'], 0)))


class EnableMemoryServersTest(base.BaseMemcanalTest):

    min_microversion = '1.6'

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        servers = cls.admin_client.list_memory_servers()['memory_servers']
        if not servers:
            raise cls.skipException('no host registered a memory server')
        cls.server = servers[0]

    @decorators.idempotent_id('0b3f6ad2-6f0e-4c1e-9a57-3c4d0c7f1e21')
    def test_an_enabled_server_lends_a_disabled_one_nothing(self):
        self.require_changing_existing()
        self.addCleanup(self.admin_client.update_memory_server,
                        self.server['uuid'], self.server['enabled'])
        free = max(self.server['capacity_bytes']
                   - self.server['lent_bytes'], 0)
        for enabled, lendable in ((True, free), (False, 0)):
            changed = self.admin_client.update_memory_server(
                self.server['uuid'], enabled)
            self.assertEqual((self.server['uuid'], enabled, lendable),
                             (changed['uuid'], changed['enabled'],
                              changed['free_bytes']))
            [listed] = [s for s in self.admin_client.list_memory_servers()[
                'memory_servers'] if s['uuid'] == self.server['uuid']]
            self.assertEqual(enabled, listed['enabled'])

    @decorators.idempotent_id('4a1f2a43-3c0a-4a5e-8f0b-2f8e6b7c9d10')
    def test_an_unknown_server_or_body_is_refused(self):
        self.assert_error(lib_exc.NotFound,
                          'memcanal.memory_server.not_found',
                          self.admin_client.update_memory_server,
                          '00000000-0000-4000-8000-000000000000', True)
        self.assert_error(lib_exc.BadRequest, 'memcanal.body.invalid',
                          self.admin_client.update_memory_server,
                          self.server['uuid'], 'yes')
