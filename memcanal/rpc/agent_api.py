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

``[upgrade_levels] agent`` caps what the service sends (a release adding
1.3 sends 1.2 messages to agents still at 1.2 under a cap of 1.2); below
1.2 nothing can be sent (RPCVersionCapError).
"""

import oslo_messaging as messaging

from memcanal import rpc
from memcanal.rpc import freshness
from memcanal.rpc import signing


class AgentAPI:
    """What the central service may ask of the agent on one host, signed
    with ``signing_key`` (an Ed25519PrivateKey: [service] signing_key), at
    most at ``version_cap`` ([upgrade_levels] agent; None: VERSION)."""

    VERSION = '1.3'
    # The oldest version the service sends to (every message is signed
    # since): what an agent that does not say its version is taken for
    # under [upgrade_levels] agent = auto.
    OLDEST = '1.2'
    # Casts are stamped fresh since (memcanal.rpc.freshness).
    FRESH = '1.3'

    def __init__(self, signing_key, version_cap=None):
        target = messaging.Target(topic=rpc.AGENT_TOPIC,
                                  version=self.VERSION)
        self.version_cap = version_cap or self.VERSION
        self.client = rpc.get_client(target, version_cap=self.version_cap)
        self.signing_key = signing_key

    def apply_decision(self, ctxt, host, decision_uuid, actions):
        """Carry out the actions of one decision on ``host``.

        ``actions`` are dicts of uuid, instance_uuid, target_bytes and
        mechanism, and for a page action stores, lent_bytes and
        lease_tokens ({store: base64 token}). The agent shrinks before it
        grows, stops at the first failure, and answers with
        ServiceAPI.actions_done. Each action is applied once, however
        often it is delivered. The signature covers ``host``, so a
        message for one agent is refused by every other, and from 1.3
        when it was sent, so an agent refuses it once it is old.
        """
        args = {'host': host, 'decision_uuid': decision_uuid,
                'actions': actions}
        version = self.OLDEST
        if self.client.can_send_version(self.FRESH):
            version, args = self.FRESH, freshness.stamp(args)
        cctxt = self.client.prepare(server=host, version=version)
        cctxt.cast(ctxt, 'apply_decision', **signing.sign(
            self.signing_key, 'apply_decision', args))
