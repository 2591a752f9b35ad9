"""The agent's side of leases that end (issue #36, agent RPC 1.4): a
page action's tokens come sealed to this host's key and reach the pager
opened; renewed tokens reach the VM's pager; a lender revokes ended
leases on its memory server. Each cast is checked as apply_decision's
is: a forged or replayed one does nothing."""

from unittest import mock

from cryptography.hazmat.primitives.asymmetric import ed25519

from memcanal.agent import leases
from memcanal.agent import memserver
from memcanal.agent import paging
from memcanal.rpc import agent_api
from memcanal.rpc import signing
from memcanal.tests import captured
from memcanal.tests import keys
from memcanal.tests.unit.agent import test_identity
from memcanal.tests.unit.agent import test_manager
from memcanal.tests.unit.rpc.test_apis import transport  # noqa: F401

agent = test_identity.agent
STORE = 'tls:10.0.0.5:7400'
VM = '5f0c1d4e-2b7a-4c1e-9a4b-3c2d1e0f9a8b'


def api():
    return agent_api.AgentAPI(keys.SERVICE_KEY)


def test_a_sealed_token_reaches_the_driver_opened_not_before_it_expires(
        agent, transport):
    tokens = []
    test_manager.resize_recorder(agent)
    resize = agent.driver.apply_memory_target

    def page(uuid, target, mechanism='balloon', stores=(),
             lease_tokens=None):
        tokens.append(lease_tokens)
        return resize(uuid, target, mechanism, stores, lease_tokens)
    agent.driver.apply_memory_target = page
    action = test_identity.paging_action(agent)
    sent = captured.sent(api(), 'apply_decision', 'compute-1', 'd-1',
                         [action], host_public_key=signing.public_text(
                             agent.host_key))
    assert 'lease_tokens' not in sent['actions'][0]
    [result] = agent.apply_decision(None, **sent)
    assert result['state'] == 'applied'
    assert tokens == [action['lease_tokens']]


def test_a_token_sealed_to_another_host_is_refused_before_it_expires(
        agent, transport):
    done = test_manager.resize_recorder(agent)
    sent = captured.sent(
        api(), 'apply_decision', 'compute-1', 'd-1',
        [test_identity.paging_action(agent)],
        host_public_key=signing.public_text(
            ed25519.Ed25519PrivateKey.generate()))
    assert agent.apply_decision(None, **sent) is None
    assert done == []
    assert agent.metrics.refused_count('rpc.unsealable') == 1


def test_renewed_tokens_reach_the_pager_before_the_old_expire(agent,
                                                             transport):
    vm = agent.driver.list_instances()[0].uuid
    agent.driver.renew_lease_tokens = mock.Mock()
    renewal = {'instance_uuid': vm, 'lease_tokens': {STORE: 'bmV3'}}
    sent = captured.sent(api(), 'renew_leases', 'compute-1', [renewal],
                         signing.public_text(agent.host_key))
    agent.renew_leases(None, **sent)
    agent.driver.renew_lease_tokens.assert_called_once_with(
        vm, {STORE: 'bmV3'})
    # The same cast again (a replay) or for another host does nothing.
    agent.renew_leases(None, **sent)
    agent.renew_leases(None, **dict(sent, host='compute-2'))
    assert agent.driver.renew_lease_tokens.call_count == 1


def test_a_lender_revokes_ended_leases_on_its_memory_server(agent,
                                                          transport):
    revocation = {'instance_uuid': VM, 'revoked_at': 1764140000}
    sent = captured.sent(api(), 'revoke_leases', 'compute-1', [revocation])
    admin = mock.MagicMock()
    admin.__enter__.return_value.revoke.return_value = (memserver.OK, 4)
    with mock.patch.object(memserver, 'connect_admin',
                           return_value=admin) as connect:
        agent.revoke_leases(None, **sent)
        forged = captured.sent(agent_api.AgentAPI(
            ed25519.Ed25519PrivateKey.generate()), 'revoke_leases',
            'compute-1', [revocation])
        agent.revoke_leases(None, **forged)
    connect.assert_called_once_with(
        agent.conf.pooling.memserver_admin_socket)
    admin.__enter__.return_value.revoke.assert_called_once_with(
        paging.owner_of(VM), 1764140000)


def test_a_revocation_the_server_cannot_take_is_only_logged(tmp_path):
    leases.revoke(str(tmp_path / 'no-such-socket'),
                  [{'instance_uuid': VM, 'revoked_at': 1}])
