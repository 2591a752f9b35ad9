"""``/decisions`` (1.1): the optimizer's decisions and the operator's
approve, reject and rollback.

The transitions act on decisions the cloud offers in the needed state,
each test on a different one: an applied one to roll back, a recommended
one of another host to approve (approving makes its host busy, which
would refuse that rollback), any other recommended one to reject. A
cloud without such a decision skips the test, as does one whose
tempest.conf does not allow changing its resources.
"""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.tests import base

UNKNOWN = '99999999-0000-4000-8000-000000000099'
STATE_CONFLICT = 'memcanal.decision.state_conflict'


class DecisionsTest(base.BaseMemcanalTest):

    min_microversion = '1.1'

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        decisions = cls.admin_client.list_decisions()['decisions']
        if not decisions:
            raise cls.skipException('the cloud has no decision')
        cls.oldest = decisions[-1]
        cls.to_roll_back = next(
            (d for d in decisions if d['state'] == 'applied'), None)
        busy_host = cls.to_roll_back and cls.to_roll_back['host_uuid']
        recommended = [d for d in decisions if d['state'] == 'recommended']
        cls.to_approve = next((d for d in recommended
                               if d['host_uuid'] != busy_host), None)
        cls.to_reject = next((d for d in recommended
                              if d is not cls.to_approve), None)

    @decorators.idempotent_id('a3d920c1-8800-4904-986a-4664480eae9e')
    def test_list_newest_first_and_filtered(self):
        decisions = self.admin_client.list_decisions()['decisions']
        created = [decision['created_at'] for decision in decisions]
        self.assertEqual(sorted(created, reverse=True), created)
        newest = decisions[0]
        by_state = self.admin_client.list_decisions(
            state=newest['state'])['decisions']
        self.assertIn(newest['uuid'], [d['uuid'] for d in by_state])
        self.assertEqual({newest['state']}, {d['state'] for d in by_state})
        by_host = self.admin_client.list_decisions(
            host=newest['host_uuid'])['decisions']
        self.assertIn(newest['uuid'], [d['uuid'] for d in by_host])
        self.assertEqual({newest['host_uuid']},
                         {d['host_uuid'] for d in by_host})
        page = self.admin_client.list_decisions(limit=1)['decisions']
        self.assertEqual([newest['uuid']], [d['uuid'] for d in page])

    @decorators.idempotent_id('5f298a34-ae41-4507-bcc9-1159422e51fe')
    def test_show_has_inputs_actions_and_history(self):
        shown = self.admin_client.show_decision(self.oldest['uuid'])
        for field in ('uuid', 'host_uuid', 'kind', 'policy', 'created_at'):
            self.assertEqual(self.oldest[field], shown[field], field)
        self.assertIn('inputs', shown)
        self.assertNotEqual([], shown['actions'])
        self.assertEqual('recommended', shown['events'][0]['to_state'])

    @decorators.idempotent_id('57ca5b06-8bae-4bbd-9cf7-055c0328637d')
    def test_unknown_decision_is_404(self):
        for call in (self.admin_client.show_decision,
                     self.admin_client.approve_decision,
                     self.admin_client.reject_decision,
                     self.admin_client.rollback_decision):
            self.assert_error(lib_exc.NotFound, 'memcanal.decision.not_found',
                              call, UNKNOWN)

    @decorators.idempotent_id('6b55c2af-0335-4c13-abfd-a7087d75c8f5')
    def test_bad_query_is_400(self):
        self.assert_error(lib_exc.BadRequest, 'memcanal.query.invalid',
                          self.admin_client.list_decisions, state='happy')

    def take(self, decision, state):
        self.require_changing_existing()
        if decision is None:
            raise self.skipException('the cloud has no %s decision to '
                                     'spare' % state)
        return decision['uuid']

    def assert_moved(self, decision, from_state, to_state, reason):
        """``decision`` is in ``to_state``, its last event saying the
        admin moved it there from ``from_state`` for ``reason``."""
        self.assertEqual(to_state, decision['state'])
        event = decision['events'][-1]
        self.assertEqual(
            (from_state, to_state, reason,
             self.os_admin.credentials.user_id,
             self.os_admin.credentials.project_id),
            (event['from_state'], event['to_state'], event['reason'],
             event['user_id'], event['project_id']))

    @decorators.idempotent_id('4cda479c-b0f2-4f2d-b307-18901a604c4c')
    def test_approve(self):
        uuid = self.take(self.to_approve, 'recommended')
        approved = self.admin_client.approve_decision(uuid, 'tempest')
        self.assert_moved(approved, 'recommended', 'approved', 'tempest')
        self.assertEqual(approved['state'],
                         self.admin_client.show_decision(uuid)['state'])
        self.assert_error(lib_exc.Conflict, STATE_CONFLICT,
                          self.admin_client.reject_decision, uuid)

    @decorators.idempotent_id('fca16477-fc61-4656-b68c-f5ff36432bcb')
    def test_reject(self):
        uuid = self.take(self.to_reject, 'recommended')
        rejected = self.admin_client.reject_decision(uuid)
        self.assert_moved(rejected, 'recommended', 'rejected', None)
        for call in (self.admin_client.approve_decision,
                     self.admin_client.rollback_decision):
            self.assert_error(lib_exc.Conflict, STATE_CONFLICT, call, uuid)

    @decorators.idempotent_id('269141bf-241c-4ce1-9f74-785f16da40c2')
    def test_rollback(self):
        uuid = self.take(self.to_roll_back, 'applied')
        rolling_back = self.admin_client.rollback_decision(uuid, 'undo')
        self.assert_moved(rolling_back, 'applied', 'rolling_back', 'undo')
        self.assertEqual(
            {'restore'},
            {action['kind'] for action in rolling_back['actions']
             if action['state'] == 'pending'})
        self.assert_error(lib_exc.Conflict, STATE_CONFLICT,
                          self.admin_client.approve_decision, uuid)
