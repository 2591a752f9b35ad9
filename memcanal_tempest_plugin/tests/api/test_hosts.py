"""``/hosts``: the compute hosts running a memcanal agent (admin)."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.tests import base

UNKNOWN = '99999999-0000-4000-8000-000000000099'


class HostsTest(base.BaseMemcanalTest):

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.hosts = cls.admin_client.list_hosts()['hosts']
        if not cls.hosts:
            raise cls.skipException('the cloud has no memcanal agent')

    @decorators.idempotent_id('66faa502-7fa7-4a2e-97e0-7819d7fdeea9')
    def test_list_is_ordered_by_name(self):
        names = [host['name'] for host in self.hosts]
        self.assertEqual(sorted(names), names)
        for host in self.hosts:
            self.assertIn(host['state'], ('up', 'down'))
            self.assertGreater(host['memory_total_bytes'],
                               host['memory_reserved_bytes'])
            self.assertGreaterEqual(host['instance_count'], 0)

    @decorators.idempotent_id('d491f66f-10f1-42d8-83c9-823a3cd8acff')
    def test_show_is_the_listed_host(self):
        listed = self.hosts[-1]
        shown = self.admin_client.show_host(listed['uuid'])
        for field in ('uuid', 'name', 'memory_total_bytes',
                      'memory_reserved_bytes', 'created_at'):
            self.assertEqual(listed[field], shown[field], field)

    @decorators.idempotent_id('89135624-17ff-4ea5-adcb-7d9d060584d9')
    def test_unknown_host_is_404(self):
        for uuid in (UNKNOWN, 'not-a-uuid'):
            self.assert_error(lib_exc.NotFound, 'memcanal.host.not_found',
                              self.admin_client.show_host, uuid)
