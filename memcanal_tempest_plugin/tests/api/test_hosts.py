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


class AdmitHostsTest(base.BaseMemcanalTest):
    """``PATCH /hosts/{uuid}`` (admin, 1.10): which hosts take part in
    memory pooling."""

    min_microversion = '1.10'

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        hosts = cls.admin_client.list_hosts()['hosts']
        if not hosts:
            raise cls.skipException('the cloud has no memcanal agent')
        cls.host = hosts[0]

    @decorators.idempotent_id('ace59b39-74ad-4229-bcc2-284a134f6483')
    def test_an_admin_admits_and_stops_a_host(self):
        self.require_changing_existing()
        self.addCleanup(self.admin_client.update_host, self.host['uuid'],
                        self.host['pooling_admitted'])
        for admitted in (True, False):
            changed = self.admin_client.update_host(self.host['uuid'],
                                                    admitted)
            self.assertEqual((self.host['uuid'], admitted),
                             (changed['uuid'], changed['pooling_admitted']))

    @decorators.idempotent_id('9889936a-388a-472c-8dbb-c924d141682a')
    def test_an_unknown_host_or_body_is_refused(self):
        self.assert_error(lib_exc.NotFound, 'memcanal.host.not_found',
                          self.admin_client.update_host, UNKNOWN, True)
        self.assert_error(lib_exc.BadRequest, 'memcanal.body.invalid',
                          self.admin_client.update_host, self.host['uuid'],
                          'yes')
