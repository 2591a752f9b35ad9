"""What a member of a project may do: read its own project's instances,
and nothing of the cloud's infrastructure or the operator's.

os_primary is a member (keystone's member role, implying reader) of a
project of its own (dynamic credentials): the cloud's instances belong
to other projects, which it may neither list, show nor change.
"""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.tests import base

DENIED = 'memcanal.policy.denied'


class ProjectMemberTest(base.BaseMemcanalTest):

    credentials = ['primary', 'admin']
    min_microversion = '1.1'

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.member_client = cls.client_at(cls.os_primary,
                                          cls.request_microversion)

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        own = cls.os_primary.credentials.project_id
        cls.foreign = next(
            (i for i in cls.admin_client.list_instances()['instances']
             if i['project_id'] != own), None)
        if cls.foreign is None:
            raise cls.skipException('no instance of another project')

    def assert_denied(self, call, *args, **kwargs):
        self.assert_error(lib_exc.Forbidden, DENIED, call, *args, **kwargs)

    @decorators.idempotent_id('2c579eec-6993-4ad2-9399-538597535591')
    def test_lists_only_its_own_project(self):
        own = self.os_primary.credentials.project_id
        listed = self.member_client.list_instances()['instances']
        self.assertEqual({own} if listed else set(),
                         {i['project_id'] for i in listed})
        self.assertEqual(listed, self.member_client.list_instances(
            project_id=own)['instances'])
        self.assert_denied(self.member_client.list_instances,
                           project_id=self.foreign['project_id'])

    @decorators.idempotent_id('c6ce0e5e-638c-4863-8ad5-5e90345baed8')
    def test_may_not_see_another_projects_instance(self):
        self.assert_denied(self.member_client.show_instance,
                           self.foreign['uuid'])
        self.assert_denied(self.member_client.list_instance_reports,
                           self.foreign['uuid'])

    @decorators.idempotent_id('61d3d153-d433-4381-97ed-dfa2995a157c')
    def test_may_not_change_settings(self):
        self.assert_denied(self.member_client.update_instance,
                           self.foreign['uuid'], opt_out=True)
        shown = self.admin_client.show_instance(self.foreign['uuid'])
        self.assertEqual(self.foreign['opt_out'], shown['opt_out'])

    @decorators.idempotent_id('1ecde244-8747-48b7-9d45-c24052a22da0')
    def test_may_not_see_hosts(self):
        self.assert_denied(self.member_client.list_hosts)
        self.assert_denied(self.member_client.show_host,
                           self.foreign['host_uuid'])

    @decorators.idempotent_id('360e9c44-943e-4054-ae7a-5ef3654ac166')
    def test_may_not_see_or_decide_decisions(self):
        decisions = self.admin_client.list_decisions(limit=1)['decisions']
        self.assert_denied(self.member_client.list_decisions)
        if decisions:
            self.assert_denied(self.member_client.show_decision,
                               decisions[0]['uuid'])
            self.assert_denied(self.member_client.approve_decision,
                               decisions[0]['uuid'])

    @decorators.idempotent_id('6f793df1-a23a-41c0-9d5c-fb4022bf0441')
    def test_may_not_see_demand_ratios(self):
        self.assert_denied(
            self.client_since(self.os_primary, '1.4').show_demand_ratios)

    @decorators.idempotent_id('e74c34bd-bb53-45a5-bdca-7a70ad37a7cb')
    def test_may_not_see_memory_servers(self):
        self.assert_denied(
            self.client_since(self.os_primary, '1.5').list_memory_servers)

    @decorators.idempotent_id('9d3e0c57-2a61-4b8e-a0d4-7f5b8c1e6a34')
    def test_may_not_enable_memory_servers(self):
        servers = self.client_since(
            self.os_admin, '1.6').list_memory_servers()['memory_servers']
        if not servers:
            raise self.skipException('no host registered a memory server')
        self.assert_denied(
            self.client_since(self.os_primary, '1.6').update_memory_server,
            servers[0]['uuid'], True)
