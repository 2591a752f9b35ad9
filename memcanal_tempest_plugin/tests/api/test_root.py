"""``GET /`` and microversion negotiation."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.services import memcanal_client
from memcanal_tempest_plugin.tests import base


class RootTest(base.BaseMemcanalTest):

    @decorators.idempotent_id('6b086416-b5b0-4d0a-996f-4efb5727d89b')
    def test_versions_document(self):
        """One CURRENT version whose range's both ends are served."""
        [version] = self.admin_client.show_root()['versions']
        self.assertEqual('CURRENT', version['status'])
        self.assertEqual('1.0', version['min_version'])
        self.assertEqual('v%s' % version['min_version'], version['id'])
        for end in (version['min_version'], version['max_version']):
            # The client checks the answer was served at ``end``.
            self.client_at(self.os_admin, end).list_instances(limit=1)

    @decorators.idempotent_id('4a02bd9e-1c46-420a-92d4-755fc56b0df0')
    def test_version_outside_the_range_is_406_naming_the_range(self):
        [version] = self.admin_client.show_root()['versions']
        client = self.client_at(self.os_admin, '99.0')
        error = self.assert_error(lib_exc.NotAcceptable,
                                  'memcanal.microversion.not_acceptable',
                                  client.list_instances)
        self.assertEqual(
            (version['min_version'], version['max_version']),
            (error['min_version'], error['max_version']))

    @decorators.idempotent_id('ac9206b7-8538-4743-80f4-9ff2c8cf44f7')
    def test_malformed_version_is_400(self):
        client = self.client_at(self.os_admin, 'one.two')
        self.assert_error(lib_exc.BadRequest, 'memcanal.microversion.invalid',
                          client.list_instances)

    @decorators.idempotent_id('1624b775-5715-408b-9aba-19db2debe21e')
    def test_unknown_path_is_404(self):
        self.assert_error(lib_exc.NotFound, 'memcanal.route.not_found',
                          self.admin_client.get, 'nowhere')

    @decorators.idempotent_id('1a246bbc-39cf-447f-94d1-63a0579267e5')
    def test_fields_follow_the_requested_version(self):
        """1.0 shows an instance without the settings 1.1 added; the
        client checks each answer says the version it was asked."""
        uuid = self.any_instance()['uuid']
        old = self.client_at(self.os_admin, '1.0').show_instance(uuid)
        new = self.client_at(self.os_admin, '1.1').show_instance(uuid)
        self.assertNotIn('mechanism', old)
        self.assertIn('mechanism', new)
        self.assertEqual('memcanal 1.1',
                         new.response[memcanal_client.VERSION_HEADER.lower()])
