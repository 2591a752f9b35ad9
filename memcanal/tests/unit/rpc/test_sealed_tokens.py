"""Lease tokens off the broker (issue #36): a broker user who reads the
service's casts gets no token it could present to a memory server
before the token expires. Before #36 they travelled in clear as
arguments of apply_decision."""

import json

from cryptography.hazmat.primitives.asymmetric import ed25519
import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal import rpc
from memcanal.rpc import agent_api
from memcanal.rpc import sealing
from memcanal.rpc import signing
from memcanal.service import lease_tokens
from memcanal.tests import keys
from memcanal.tests.unit.rpc import test_apis
from memcanal.tests.unit.rpc.test_apis import transport  # noqa: F401

HOST_KEY = ed25519.Ed25519PrivateKey.generate()
STORE = 'tls:10.0.0.2:7000'
TOKEN = lease_tokens.encode(lease_tokens.sign(
    keys.SERVICE_KEY, '7b1f2a56-04c4-4f3e-8d5c-0e4e6c1b6a11', 42, 16, 'h2',
    '10.0.0.2:7000', 1_700_000_000, 3600))
ACTION = {'uuid': 'action-9', 'instance_uuid': 'vm-1',
          'target_bytes': 2 ** 30, 'mechanism': 'paging',
          'stores': [STORE], 'lent_bytes': 16 * 4096,
          'lease_tokens': {STORE: TOKEN}}


class Listener(test_apis.Recorder):
    """A broker user on h2's queue: reads whatever is cast there."""

    @messaging.expose
    def renew_leases(self, context, **kwargs):
        self.calls.append(('renew_leases', context, kwargs))
        self.arrived.set()


def overheard(send):
    """What a broker user listening on h2's queue reads of the cast
    ``send(context)`` makes."""
    listener = Listener()
    server = test_apis.serve(rpc.AGENT_TOPIC, 'h2', listener)
    try:
        send(memcanal_context.get_admin_context())
        assert listener.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    [(name, _context, kwargs)] = listener.calls
    return name, kwargs


def readable(kwargs):
    wire = json.dumps(kwargs)
    raw = lease_tokens.decode(TOKEN)
    return TOKEN in wire or raw.hex() in wire or raw[:32].decode(
        'latin-1') in wire


def test_a_broker_user_cannot_read_a_token_before_it_expires(transport):
    """apply_decision carries the token sealed to the agent's host key:
    the listener reads ciphertext; only the host's key opens it."""
    api = agent_api.AgentAPI(keys.SERVICE_KEY)
    name, kwargs = overheard(lambda ctx: api.apply_decision(
        ctx, 'h2', 'decision-1', [ACTION],
        host_public_key=signing.public_text(HOST_KEY)))
    assert name == 'apply_decision'
    assert not readable(kwargs)
    [sent] = kwargs['actions']
    assert 'lease_tokens' not in sent
    assert signing.verify(keys.SERVICE_KEY.public_key(), 'apply_decision',
                          kwargs)
    assert agent_api.unsealed(sent, HOST_KEY) == ACTION
    with pytest.raises(sealing.SealError):
        agent_api.unsealed(sent, ed25519.Ed25519PrivateKey.generate())


def test_a_renewed_token_is_sealed_too_before_it_expires(transport):
    api = agent_api.AgentAPI(keys.SERVICE_KEY)
    renewal = {'instance_uuid': 'vm-1', 'lease_tokens': {STORE: TOKEN}}
    name, kwargs = overheard(lambda ctx: api.renew_leases(
        ctx, 'h2', [renewal], signing.public_text(HOST_KEY)))
    assert name == 'renew_leases'
    assert not readable(kwargs)
    [sent] = kwargs['renewals']
    assert agent_api.unsealed(sent, HOST_KEY) == renewal


def test_no_token_goes_to_a_host_without_a_key_before_it_expires(
        transport):
    api = agent_api.AgentAPI(keys.SERVICE_KEY)
    with pytest.raises(ValueError):
        api.apply_decision(memcanal_context.get_admin_context(), 'h2',
                           'decision-1', [ACTION], host_public_key=None)


def test_an_agent_capped_below_1_4_still_gets_its_token_until_it_expires(
        transport):
    """[upgrade_levels] agent = 1.3 (agents of the release before):
    the token goes in clear, as then; only its lifetime bounds it."""
    api = agent_api.AgentAPI(keys.SERVICE_KEY, '1.3')
    _name, kwargs = overheard(lambda ctx: api.apply_decision(
        ctx, 'h2', 'decision-1', [ACTION],
        host_public_key=signing.public_text(HOST_KEY)))
    assert kwargs['actions'] == [ACTION]
    assert not api.can_end_leases
