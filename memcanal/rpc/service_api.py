"""Client side of the agent -> service RPC API.

API version history:

* 1.0 - Initial version: register_host (call), report (cast).
* 1.1 - actions_done (cast): what an agent did with a decision.
* 1.2 - register_host takes the agent's report_interval, from which the
        service derives whether the host is up.
"""

import oslo_messaging as messaging

from memcanal import rpc


class ServiceAPI:
    """What a compute agent may ask of the central service."""

    VERSION = '1.2'

    def __init__(self):
        target = messaging.Target(topic=rpc.SERVICE_TOPIC,
                                  version=self.VERSION)
        self.client = rpc.get_client(target, version_cap=self.VERSION)

    def register_host(self, ctxt, name, memory_total_bytes,
                      memory_reserved_bytes, report_interval,
                      timeout=None):
        """Register (or refresh) a host; returns its uuid and last sequence.

        A call, so the agent knows where to resume numbering its reports.
        """
        cctxt = self.client.prepare(version='1.2', timeout=timeout)
        return cctxt.call(ctxt, 'register_host', name=name,
                          memory_total_bytes=memory_total_bytes,
                          memory_reserved_bytes=memory_reserved_bytes,
                          report_interval=report_interval)

    def report(self, ctxt, report):
        """Send one host report (see memcanal.rpc.reports for its schema)."""
        cctxt = self.client.prepare(version='1.0')
        cctxt.cast(ctxt, 'report', report=report)

    def actions_done(self, ctxt, decision_uuid, results):
        """Report the outcome of a decision's actions: dicts of uuid,
        state (applied, failed or skipped), error and result."""
        cctxt = self.client.prepare(version='1.1')
        cctxt.cast(ctxt, 'actions_done', decision_uuid=decision_uuid,
                   results=results)
