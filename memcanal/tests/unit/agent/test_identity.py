"""The agent as its own host: its key, and only the service's signed
actions for it (memcanal.rpc.signing)."""

import os
import stat

from cryptography.hazmat.primitives.asymmetric import ed25519
import pytest

from memcanal.agent import manager
from memcanal.rpc import signing
from memcanal.tests import keys
from memcanal.tests.unit.agent import test_manager

MIB = 2 ** 20
TOKEN = 'dG9rZW4='


@pytest.fixture
def agent(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    keys.configure(conf, tmp_path)
    return test_manager.make_agent(conf)


def paging_action(agent):
    vm = agent.driver.list_instances()[0]
    return {'uuid': 'action-1', 'instance_uuid': vm.uuid,
            'target_bytes': 32 * MIB, 'mechanism': 'balloon',
            'stores': ['tls:10.0.0.5:7400'], 'lent_bytes': 32 * MIB,
            'lease_tokens': {'tls:10.0.0.5:7400': TOKEN}}


def test_the_host_key_is_made_once_for_the_host_alone(agent, conf,
                                                      tmp_path):
    path = tmp_path / 'agent-compute-1.key'
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = test_manager.make_agent(conf)
    assert signing.public_text(again.host_key) == signing.public_text(
        agent.host_key)


def test_an_action_the_service_signed_for_this_host_is_applied(agent):
    done = test_manager.resize_recorder(agent)
    action = paging_action(agent)
    [result] = agent.apply_decision(None, **keys.signed_decision(
        'compute-1', 'decision-1', [action]))
    assert result['state'] == 'applied'
    assert done == [(action['instance_uuid'], 32 * MIB, 'balloon')]
    # The lease tokens stay beside the stores, for the pager.
    assert agent.journal.get('action-1')['action']['lease_tokens'] == {
        'tls:10.0.0.5:7400': TOKEN}
    agent.service_api.actions_done.assert_called_once()


@pytest.mark.parametrize('forged', [
    # Unsigned, as an agent before 1.2 took them.
    lambda action: {'decision_uuid': 'decision-1', 'actions': [action]},
    # Signed by another key than the service's.
    lambda action: keys.signed_decision(
        'compute-1', 'decision-1', [action],
        key=ed25519.Ed25519PrivateKey.generate()),
    # The service's, but for another host.
    lambda action: dict(keys.signed_decision(
        'compute-2', 'decision-1', [action]), host='compute-2'),
    lambda action: dict(keys.signed_decision(
        'compute-2', 'decision-1', [action]), host='compute-1'),
    # The service's, with the target changed since.
    lambda action: dict(keys.signed_decision(
        'compute-1', 'decision-1', [action]),
        actions=[dict(action, target_bytes=MIB)]),
])
def test_anything_else_is_refused_without_a_trace(agent, forged):
    done = test_manager.resize_recorder(agent)
    assert agent.apply_decision(None, **forged(paging_action(agent))) is None
    assert done == []
    assert agent.journal.get('action-1') is None
    agent.service_api.actions_done.assert_not_called()


def test_without_the_services_public_key_every_action_is_refused(conf,
                                                                 tmp_path):
    conf.set_override('state_path', str(tmp_path))
    agent = test_manager.make_agent(conf)
    assert agent.service_key is None
    done = test_manager.resize_recorder(agent)
    assert agent.apply_decision(None, **keys.signed_decision(
        'compute-1', 'decision-1', [paging_action(agent)])) is None
    assert done == []


def test_an_unreadable_service_key_stops_the_agent(conf, tmp_path):
    conf.set_override('service_public_key', str(tmp_path / 'missing.pem'),
                      'agent')
    with pytest.raises(signing.KeyFileError, match='missing.pem'):
        manager.service_public_key(conf)
