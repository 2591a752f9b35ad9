"""``GET /memory_servers`` (admin, 1.5): who lends memory to whom."""

from tempest.lib import decorators

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
            self.assertEqual(
                max(server['capacity_bytes'] - server['lent_bytes'], 0),
                server['free_bytes'])
