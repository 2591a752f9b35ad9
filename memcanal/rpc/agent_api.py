"""Client side of the service -> agent RPC API.

API version history:

* 1.0 - Initial version: apply_memory_target (cast).
* 1.1 - apply_decision (cast): a decision's targets in one message.
* 1.2 - apply_decision is signed by the service (memcanal.rpc.signing):
        it carries ``host`` (the agent it is for) and ``signature``, and
        a page action ``lease_tokens`` beside its ``stores``. Agents
        refuse every unsigned message, so apply_memory_target, which
        the service never signed, is gone.
* 1.3 - apply_decision carries ``sent_at`` and ``nonce``
        (memcanal.rpc.freshness), signed with the rest: the agent
        refuses a cast sent outside ``[rpc] replay_window`` or seen
        before, whatever its journal holds. Casts without them (a
        service capped at 1.2) are taken until the agent has received
        one with them.
* 1.4 - Leases that end (issue #36): a page action's tokens travel
        sealed to the agent's host key (memcanal.rpc.sealing) as
        ``sealed_lease_tokens``, never ``lease_tokens`` in clear;
        renew_leases (cast) brings a borrower's pagers their leases'
        renewed tokens, sealed the same way; revoke_leases (cast) has a
        lender's agent end leases on its memory server. Under a cap
        below 1.4 tokens travel in clear as before, and nothing is
        renewed or revoked by cast (tokens expire on their own).

``[upgrade_levels] agent`` caps what the service sends (a release adding
1.3 sends 1.2 messages to agents still at 1.2 under a cap of 1.2); below
1.2 nothing can be sent (RPCVersionCapError).
"""

import oslo_messaging as messaging
from oslo_utils import versionutils

from memcanal import rpc
from memcanal.rpc import freshness
from memcanal.rpc import sealing
from memcanal.rpc import signing


class AgentAPI:
    """What the central service may ask of the agent on one host, signed
    with ``signing_key`` (an Ed25519PrivateKey: [service] signing_key), at
    most at ``version_cap`` ([upgrade_levels] agent; None: VERSION)."""

    VERSION = '1.4'
    # The oldest version the service sends to (every message is signed
    # since): what an agent that does not say its version is taken for
    # under [upgrade_levels] agent = auto.
    OLDEST = '1.2'
    # Casts are stamped fresh since (memcanal.rpc.freshness).
    FRESH = '1.3'
    # Lease tokens are sealed to the agent's host key since, and leases
    # are renewed and revoked by cast.
    LEASES = '1.4'

    def __init__(self, signing_key, version_cap=None):
        target = messaging.Target(topic=rpc.AGENT_TOPIC,
                                  version=self.VERSION)
        self.version_cap = version_cap or self.VERSION
        self.client = rpc.get_client(target, version_cap=self.version_cap)
        self.signing_key = signing_key

    @property
    def can_end_leases(self):
        """Whether renew_leases and revoke_leases may be sent."""
        return self.client.can_send_version(self.LEASES)

    def apply_decision(self, ctxt, host, decision_uuid, actions,
                       host_public_key=None):
        """Carry out the actions of one decision on ``host``.

        ``actions`` are dicts of uuid, instance_uuid, target_bytes and
        mechanism, and for a page action stores, lent_bytes and
        lease_tokens ({store: base64 token}). From 1.4 the tokens go
        sealed to ``host_public_key`` (the host's pinned key,
        memcanal.rpc.signing.public_text) as ``sealed_lease_tokens``;
        ValueError if a token is to be sealed and the host has no key.
        The agent shrinks before it grows, stops at the first failure,
        and answers with ServiceAPI.actions_done. Each action is applied
        once, however often it is delivered. The signature covers
        ``host``, so a message for one agent is refused by every other,
        and from 1.3 when it was sent, so an agent refuses it once it is
        old.
        """
        version = self.OLDEST
        if self.client.can_send_version(self.LEASES):
            version = self.LEASES
            actions = [_sealed(action, host, host_public_key)
                       for action in actions]
        elif self.client.can_send_version(self.FRESH):
            version = self.FRESH
        self._cast(ctxt, host, version, 'apply_decision', {
            'host': host, 'decision_uuid': decision_uuid,
            'actions': actions})

    def renew_leases(self, ctxt, host, renewals, host_public_key):
        """1.4: hand ``host``'s pagers renewed lease tokens before their
        old ones expire. ``renewals`` are dicts of instance_uuid and
        lease_tokens ({store: base64 token}), sealed here to
        ``host_public_key`` as for apply_decision."""
        self._cast(ctxt, host, self.LEASES, 'renew_leases', {
            'host': host,
            'renewals': [_sealed(renewal, host, host_public_key)
                         for renewal in renewals]})

    def revoke_leases(self, ctxt, host, revocations):
        """1.4: have the memory server of ``host`` (a lender) end
        leases: ``revocations`` are dicts of instance_uuid and
        revoked_at (unix seconds): the VM's pages there go, and its
        tokens issued until then are refused."""
        self._cast(ctxt, host, self.LEASES, 'revoke_leases', {
            'host': host, 'revocations': revocations})

    def _cast(self, ctxt, host, version, method, args):
        if versionutils.is_compatible(self.FRESH, version):
            args = freshness.stamp(args)
        cctxt = self.client.prepare(server=host, version=version)
        cctxt.cast(ctxt, method, **signing.sign(
            self.signing_key, method, args))


def _sealed(action, host, public_key):
    """``action`` with its lease tokens sealed to ``public_key``."""
    tokens = action.get('lease_tokens')
    if not tokens:
        return action
    if not public_key:
        raise ValueError('host %s has no key to seal lease tokens to '
                         '(it never registered one)' % host)
    sealed = dict(action, sealed_lease_tokens={
        store: sealing.seal(public_key, token.encode())
        for store, token in tokens.items()})
    del sealed['lease_tokens']
    return sealed


def unsealed(action, private_key):
    """The agent's side of _sealed: ``action`` with ``lease_tokens``
    (base64 text, as before 1.4) opened with the host's
    ``private_key``; memcanal.rpc.sealing.SealError if one does not
    open."""
    sealed = action.get('sealed_lease_tokens')
    if not sealed:
        return action
    opened = {k: v for k, v in action.items() if k != 'sealed_lease_tokens'}
    opened['lease_tokens'] = {
        store: sealing.unseal(private_key, token).decode()
        for store, token in sealed.items()}
    return opened
