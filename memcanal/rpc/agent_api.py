"""Client side of the service -> agent RPC API.

API version history:

* 1.0 - Initial version: apply_memory_target (cast).
"""

import oslo_messaging as messaging

from memcanal import rpc


class AgentAPI:
    """What the central service may ask of the agent on one host."""

    VERSION = '1.0'

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
