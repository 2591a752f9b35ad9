"""Client side of the agent -> service RPC API.

API version history:

* 1.0 - Initial version: register_host (call), report (cast).
* 1.1 - actions_done (cast): what an agent did with a decision.
* 1.2 - register_host takes the agent's report_interval, from which the
        service derives whether the host is up.
* 1.3 - stored_reports (call): which of a host's report sequences the
        service stored or rejected, so the agent sends the others again.
* 1.4 - report's miss-ratio curves are packed strings
        (memcanal.estimation.packed_curve); lists are still accepted.
* 1.5 - Every message is signed by the host's key
        (memcanal.rpc.signing): it carries ``host`` (the agent's host
        name) and ``signature``; register_host also the ``public_key``
        the service pins at the host's first registration. The service
        refuses unsigned messages, so only 1.5 is sent.
* 1.6 - register_host takes the host's ``hypervisor_type``
        (memcanal.hypervisors); upgrade the service before its agents.
* 1.7 - report's instances may carry ``wss_bounds`` and ``mrc_bands``,
        the 95 % intervals of sampled estimates (memcanal.rpc.reports);
        reports without them (agents at 1.6) are still accepted.
* 1.8 - actions_done: an applied memory target's result carries what
        the guest reached (``reached_bytes``, read back after the
        target was set: memcanal.agent.settle), whether it still lagged
        the target (``lagged``) and how long the agent waited
        (``settle_seconds``); results without them (older agents) are
        taken as before. Upgrade the service before its agents.

Each method is sent at the oldest version that carries it as this
release sends it (1.5: signed), register_host with a hypervisor type at
1.6 and a report with 95 % intervals at 1.7, so that an agent capped by
``[upgrade_levels] service`` (an agent upgraded before the service)
still reaches an older service: under a cap below 1.7 its reports go
without the intervals, below 1.6 its registration without the type.
"""

import oslo_messaging as messaging

from memcanal import rpc
from memcanal.rpc import signing

# Reconnections a message to the service waits for before it fails
# (oslo.messaging's default is to wait for the broker forever). Every
# method passes it: a pooled connection keeps the retries of the message
# that opened it for its own reconnections.
RETRIES = 2
# What a report's instances carry since 1.7.
INTERVALS = frozenset(['wss_bounds', 'mrc_bands'])


class ServiceAPI:
    """What the agent of ``host`` may ask of the central service, signed
    with ``host_key`` (an Ed25519PrivateKey: [agent] host_key), at most
    at ``version_cap`` ([upgrade_levels] service; None: VERSION)."""

    VERSION = '1.8'
    # Every message is signed since 1.5; the service refuses others.
    SIGNED = '1.5'

    def __init__(self, host, host_key, version_cap=None):
        target = messaging.Target(topic=rpc.SERVICE_TOPIC,
                                  version=self.VERSION)
        self.client = rpc.get_client(target,
                                     version_cap=version_cap or self.VERSION)
        self.host = host
        self.host_key = host_key

    def _signed(self, method, **args):
        return signing.sign(self.host_key, method, dict(args, host=self.host))

    def register_host(self, ctxt, memory_total_bytes, memory_reserved_bytes,
                      report_interval, timeout=None, hypervisor_type=None):
        """Register (or refresh) this host; returns its uuid and last
        sequence.

        A call, so the agent knows where to resume numbering its reports.
        A service before 1.6 (under a cap) is not told the hypervisor
        type: it keeps the one it has.
        """
        version = self.SIGNED
        if hypervisor_type is not None and self.client.can_send_version(
                '1.6'):
            version = '1.6'
        else:
            hypervisor_type = None
        cctxt = self.client.prepare(version=version, timeout=timeout,
                                    retry=RETRIES)
        args = dict(name=self.host, memory_total_bytes=memory_total_bytes,
                    memory_reserved_bytes=memory_reserved_bytes,
                    report_interval=report_interval,
                    public_key=signing.public_text(self.host_key))
        if hypervisor_type is not None:
            args['hypervisor_type'] = hypervisor_type
        return cctxt.call(ctxt, 'register_host', **self._signed(
            'register_host', **args))

    def report(self, ctxt, report):
        """Send one host report (see memcanal.rpc.reports for its schema).

        Raises MessageDeliveryFailure rather than waiting for a broker
        that is down: the agent's outbox sends the report again.
        """
        version = self.SIGNED
        samples = report.get('instances', ())
        if any(INTERVALS & set(sample) for sample in samples):
            if self.client.can_send_version('1.7'):
                version = '1.7'
            else:
                report = dict(report, instances=[
                    {key: value for key, value in sample.items()
                     if key not in INTERVALS}
                    for sample in samples])
        cctxt = self.client.prepare(version=version, retry=RETRIES)
        cctxt.cast(ctxt, 'report', **self._signed('report', report=report))

    def stored_reports(self, ctxt, host_uuid, sequences, timeout=None):
        """Which of ``sequences`` of the host the service has: a dict of
        'stored' and 'rejected' sequences, read from its database (a
        report taken off the queue but not yet committed is neither)."""
        cctxt = self.client.prepare(version=self.SIGNED, timeout=timeout,
                                    retry=RETRIES)
        return cctxt.call(ctxt, 'stored_reports', **self._signed(
            'stored_reports', host_uuid=host_uuid, sequences=sequences))

    def actions_done(self, ctxt, decision_uuid, results):
        """Report the outcome of a decision's actions: dicts of uuid,
        state (applied, failed or skipped), error and result.

        Like a report, fails rather than waits for a broker that is down:
        the service sends the decision again and the agent answers again
        from its journal.
        """
        # An older service stores a result's reached_bytes and lagged
        # as it stores any result: only the version says they mean 1.8's.
        version = '1.8' if self.client.can_send_version('1.8') else (
            self.SIGNED)
        cctxt = self.client.prepare(version=version, retry=RETRIES)
        cctxt.cast(ctxt, 'actions_done', **self._signed(
            'actions_done', decision_uuid=decision_uuid, results=results))
