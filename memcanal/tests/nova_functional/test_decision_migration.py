"""A migration decision carried out end to end: memcanal's service
(ActionDispatcher with its NovaMigrator, in a child process: see
memcanal_service) live-migrates the VM through nova's real API, served
here on a real port, and records the outcome on the decision and on
where memcanal says the VM is."""

import threading
from wsgiref import simple_server

from memcanal.tests.nova_functional import base
from memcanal.tests.nova_functional import memcanal_service


class _Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class TestMigrationDecision(base.MemCanalNovaTestCase):

    def serve_nova_api(self):
        """nova's API (the app the API fixture intercepts) on a port of
        127.0.0.1; returns its URL. Every request is the admin of the
        test's project: these headers are what nova's stubbed keystone
        context reads, as keystonemiddleware would set them."""
        app = self.api_fixture.app()
        identity = {'HTTP_X_AUTH_USER': 'admin', 'HTTP_X_USER_ID': 'admin',
                    'HTTP_X_AUTH_PROJECT_ID': self.api_fixture.project_id,
                    'HTTP_X_ROLES': 'admin,member,reader'}

        def as_admin(environ, start_response):
            environ.update(identity)
            return app(environ, start_response)

        server = simple_server.make_server('127.0.0.1', 0, as_admin,
                                           handler_class=_Quiet)
        threading.Thread(target=server.serve_forever, args=(0.05,),
                         daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return 'http://127.0.0.1:%d/v2.1' % server.server_port

    def test_decision_applied_by_nova_live_migration(self):
        flavor = self.flavor('medium', 4096)
        server = self.boot(flavor, host='host1')
        # The VM as host1's agent reports it: memcanal knows it there.
        self.memcanal.report('host1', [{
            'uuid': server['id'], 'project_id': server['tenant_id'],
            'allocated_bytes': 4096 * base.MIB,
            'flavor': server['flavor']['original_name'],
            'wss': {'prl': base.GIB}}])

        answer = memcanal_service.migrate(
            self.memcanal_directory, self.serve_nova_api(), server['id'],
            'host2')

        decision = answer['decision']
        self.assertEqual('applied', decision['state'])
        [action] = decision['actions']
        self.assertEqual(('migrate', 'applied', 'host1', 'host2'),
                         (action['kind'], action['state'],
                          action['source_host'], action['destination_host']))
        self.assertEqual(decision['peer_host_uuid'],
                         answer['instance']['host_uuid'])
        self.assertEqual('host2', self.host_of(server))
        [migration] = [m for m in self.admin_api.get_migrations()
                       if m['instance_uuid'] == server['id']]
        self.assertEqual(('live-migration', 'completed', 'host2'),
                         (migration['migration_type'], migration['status'],
                          migration['dest_compute']))
