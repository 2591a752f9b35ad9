"""Client side of the service -> agent RPC API.

API version history:

* 1.0 - Initial version: apply_memory_target (cast).
* 1.1 - apply_decision (cast): a decision's targets in one message.
"""

import oslo_messaging as messaging

from memcanal import rpc


class AgentAPI:
    """What the central service may ask of the agent on one host."""

    VERSION = '1.1'

    def __init__(self):
        target = messaging.Target(topic=rpc.AGENT_TOPIC,
                                  version=self.VERSION)
        self.client = rpc.get_client(target, version_cap=self.VERSION)

    def apply_memory_target(self, ctxt, host, instance_uuid, target_bytes,
                            action_id):
        """Resize one instance's memory on ``host``.

        Idempotent by ``action_id``: an agent applies each action once, so
        a redelivered cast does nothing more.
        """
        cctxt = self.client.prepare(server=host, version='1.0')
        cctxt.cast(ctxt, 'apply_memory_target',
                   instance_uuid=instance_uuid, target_bytes=target_bytes,
                   action_id=action_id)

    def apply_decision(self, ctxt, host, decision_uuid, actions):
        """Carry out the actions of one decision on ``host``.

        ``actions`` are dicts of uuid, instance_uuid, target_bytes and
        mechanism. The agent shrinks before it grows, stops at the first
        failure, and answers with ServiceAPI.actions_done. Each action is
        applied once, however often it is delivered.
        """
        cctxt = self.client.prepare(server=host, version='1.1')
        cctxt.cast(ctxt, 'apply_decision', decision_uuid=decision_uuid,
                   actions=actions)
