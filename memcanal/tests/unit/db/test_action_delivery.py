"""memcanal.db.action_delivery on SQLite: the batches a decision's
actions go out in, and the answers that end it."""

import datetime

from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions as flow

ctx = flow.ctx
host = flow.host
MIB = flow.MIB
decide = flow.decide
operator = flow.operator
results = flow.results


def test_approve_records_who_then_results_apply(ctx, host):
    decision = decide(ctx, host)
    approved = transitions.request_transition(
        operator(), decision['uuid'], 'approve', reason='looks right')
    event = approved['events'][-1]
    assert (event['from_state'], event['to_state'], event['user_id'],
            event['project_id'], event['reason']) == (
        'recommended', 'approved', 'alice', 'ops', 'looks right')
    assert decisions_db.host_busy(ctx, host)
    [batch] = action_delivery.actions_to_send(ctx)
    assert batch['host'] == 'compute-1'
    assert [a['target_bytes'] for a in batch['actions']] == [
        512 * MIB, 1024 * MIB]
    action_delivery.claim(ctx, [a['uuid'] for a in batch['actions']])
    assert action_delivery.actions_to_send(ctx) == []
    done = action_delivery.record_results(ctx, decision['uuid'],
                                          results(decision, 'applied',
                                                  'applied'))
    assert done['state'] == 'applied'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] == (
        512 * MIB)
    assert db_api.get_instance(ctx, stored.VM_1)['target_changed_at']
    # A redelivered result changes nothing.
    again = action_delivery.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'failed'))
    assert again['state'] == 'applied'
    assert not decisions_db.host_busy(ctx, host)


def test_a_guest_that_lagged_is_counted_at_what_it_reached(ctx, host):
    """VM_1's agent (RPC 1.8) read back 600 MiB of a 512 MiB target;
    VM_2's (older) said nothing of it: counted at its target. A VM is
    counted at what it reached by the host's memory and by the next
    decision's previous size."""
    decision = decide(ctx, host, mode='auto')
    answers = results(decision, 'applied', 'applied')
    answers[0]['result'] = {'mechanism': 'balloon',
                            'previous_bytes': 8192 * MIB,
                            'target_bytes': 512 * MIB, 'seconds': 0.1,
                            'reached_bytes': 600 * MIB, 'lagged': True,
                            'settle_seconds': 30.0}
    done = action_delivery.record_results(ctx, decision['uuid'], answers)
    assert done['state'] == 'applied'
    assert done['actions'][0]['result']['reached_bytes'] == 600 * MIB
    vm_1 = db_api.get_instance(ctx, stored.VM_1)
    vm_2 = db_api.get_instance(ctx, stored.VM_2)
    assert (vm_1['target_bytes'], vm_1['reached_bytes']) == (
        512 * MIB, 600 * MIB)
    assert (vm_2['target_bytes'], vm_2['reached_bytes']) == (
        1024 * MIB, None)
    assert db_api.get_host(ctx, host)['resident_bytes'] == 1624 * MIB
    again = decide(ctx, host, targets=(512, 1024))
    assert [(a['instance_uuid'], a['previous_bytes'], a['target_bytes'])
            for a in again['actions']] == [
        (stored.VM_1, 600 * MIB, 512 * MIB)]


def test_a_reached_size_that_is_no_size_is_not_taken():
    for result in (None, {}, {'reached_bytes': None},
                   {'reached_bytes': True}, {'reached_bytes': -1},
                   {'reached_bytes': '5'}, {'reached_bytes': 1.5}):
        assert action_delivery.reached_bytes(result) is None, result
    assert action_delivery.reached_bytes({'reached_bytes': 4096}) == 4096


def test_a_failure_fails_the_decision_and_keeps_the_old_target(ctx, host):
    decision = decide(ctx, host, mode='auto')
    done = action_delivery.record_results(ctx, decision['uuid'], results(
        decision, 'failed', 'skipped'))
    assert done['state'] == 'failed'
    assert db_api.get_instance(ctx, stored.VM_1)['target_bytes'] is None
    assert '2 of 2' in done['events'][-1]['reason']


def test_unanswered_actions_fail(ctx, host):
    decision = decide(ctx, host, mode='auto')
    action_delivery.claim(ctx, [a['uuid'] for a in decision['actions']])
    past = datetime.datetime(2000, 1, 1)
    assert action_delivery.fail_unanswered(ctx, past) == []
    future = datetime.datetime(2100, 1, 1)
    assert action_delivery.fail_unanswered(ctx, future) == [decision['uuid']]
    found = decisions_db.get_decision(ctx, decision['uuid'])
    assert found['state'] == 'failed'
    assert all(a['error'] for a in found['actions'])


def test_an_action_is_claimed_once_and_unclaimed_if_not_sent(ctx, host):
    decision = decide(ctx, host, mode='auto')
    uuids = [a['uuid'] for a in decision['actions']]
    assert action_delivery.claim(ctx, uuids) == set(uuids)
    # A second process claiming the same actions gets none of them.
    assert action_delivery.claim(ctx, uuids) == set()
    action_delivery.unclaim(ctx, uuids[:1])
    [batch] = action_delivery.actions_to_send(ctx)
    assert [a['uuid'] for a in batch['actions']] == uuids[:1]
    assert action_delivery.claim(ctx, uuids) == set(uuids[:1])
