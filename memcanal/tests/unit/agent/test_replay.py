"""An attacker's replays of the service's casts (issue #36): a cast read
off the broker and sent again is refused once older than [rpc]
replay_window whatever the journal still holds, and within it by its
nonce (memcanal.rpc.freshness)."""

import pytest

from memcanal.rpc import agent_api
from memcanal.tests import captured
from memcanal.tests import keys
from memcanal.tests.unit.agent import test_identity
from memcanal.tests.unit.agent import test_manager
from memcanal.tests.unit.rpc.test_apis import transport  # noqa: F401
from memcanal.tests.unit.service.test_replay import clock  # noqa: F401

MIB = 2 ** 20
agent = test_identity.agent


def action(agent, uuid, target_mb):
    vm = agent.driver.list_instances()[0]
    return {'uuid': uuid, 'instance_uuid': vm.uuid,
            'target_bytes': target_mb * MIB, 'mechanism': 'balloon'}


def cast(agent, decision, *actions, cap=None):
    """apply_decision for compute-1 as the service's client sends it
    (capped at ``cap``), taken off the wire."""
    return captured.sent(agent_api.AgentAPI(keys.SERVICE_KEY, cap),
                         'apply_decision', 'compute-1', decision,
                         list(actions))


def applied_then_forgotten(agent):
    """A cast applied, then pushed out of the journal by newer actions
    (as 4,096 did in the audit): the cast as captured, and the resizes
    done."""
    done = test_manager.resize_recorder(agent)
    shrink = cast(agent, 'decision-1', action(agent, 'action-1', 32))
    agent.apply_decision(None, **shrink)
    agent.journal.kept = 1
    agent.apply_decision(None, **cast(agent, 'decision-2',
                                      action(agent, 'action-2', 40)))
    assert agent.journal.get('action-1') is None
    assert len(done) == 2
    return shrink, done


@pytest.mark.parametrize('seconds, code', [
    # The audit's cast: applied again once newer actions had pushed it
    # out of the journal. Refused as stale after the window...
    (301, 'rpc.stale'),
    # ... and by its nonce within it.
    (60, 'rpc.replayed')])
def test_a_replayed_cast_the_journal_forgot_is_refused(
        transport, agent, clock, seconds, code):  # noqa: F811
    shrink, done = applied_then_forgotten(agent)
    clock(seconds)
    assert agent.apply_decision(None, **shrink) is None
    assert len(done) == 2
    assert agent.journal.get('action-1') is None
    assert agent.metrics.refused_count(code) == 1


def test_a_cast_within_the_clock_skew_is_applied_beyond_it_refused(
        transport, agent, clock):  # noqa: F811
    """The window is either way of the agent's clock: a service whose
    clock is ahead by less than it still gets through."""
    done = test_manager.resize_recorder(agent)
    clock(250)
    ahead = cast(agent, 'decision-1', action(agent, 'action-1', 32))
    clock(400)
    too_far = cast(agent, 'decision-2', action(agent, 'action-2', 40))
    clock(0)
    assert agent.apply_decision(None, **ahead)[0]['state'] == 'applied'
    assert agent.apply_decision(None, **too_far) is None
    assert len(done) == 1
    assert agent.metrics.refused_count('rpc.stale') == 1


def test_unstamped_casts_are_taken_until_the_service_stamps_no_replay(
        transport, agent, conf, clock):  # noqa: F811
    """Rolling upgrade: a service capped at agent RPC 1.2 casts
    unstamped, and the agent takes them; once it has received a stamped
    cast (the service's cap rose), an unstamped one is a replay of a
    cast from before, refused, also after the agent restarts."""
    done = test_manager.resize_recorder(agent)
    old = cast(agent, 'decision-1', action(agent, 'action-1', 32),
               cap='1.2')
    assert 'sent_at' not in old and 'nonce' not in old
    assert agent.apply_decision(None, **old)[0]['state'] == 'applied'
    agent.apply_decision(None, **cast(agent, 'decision-2',
                                      action(agent, 'action-2', 40)))
    assert len(done) == 2
    replayed = cast(agent, 'decision-3', action(agent, 'action-3', 48),
                    cap='1.2')
    assert agent.apply_decision(None, **replayed) is None
    restarted = test_manager.make_agent(conf)
    done = test_manager.resize_recorder(restarted)
    assert restarted.apply_decision(None, **replayed) is None
    assert done == []
    assert restarted.metrics.refused_count('rpc.unstamped') == 1
