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
* 1.9 - register_host takes the ``agent_version`` the agent serves
        (memcanal.rpc.agent_api), stored for ``[upgrade_levels] agent =
        auto``, and answers the oldest ``service_version`` of the
        running service processes, which an agent under
        ``[upgrade_levels] service = auto`` caps its messages at.
* 1.10 - Every message carries ``sent_at`` and ``nonce``
        (memcanal.rpc.freshness), signed with the rest: the service
        refuses one sent outside ``[rpc] replay_window`` or seen before.
        Messages without them (agents at 1.9 and before, or capped
        there) are still taken until their host has sent one with them.

Each method is sent at the oldest version that carries it as this
release sends it (1.5: signed; 1.10 once the cap allows it: stamped
fresh), register_host with a hypervisor type at
1.6 and a report with 95 % intervals at 1.7, so that an agent capped by
``[upgrade_levels] service`` (an agent upgraded before the service)
still reaches an older service: under a cap below 1.7 its reports go
without the intervals, below 1.6 its registration without the type.

Under ``auto`` an agent registers at VERSION and caps what it sends next
at the ``service_version`` the service answers; a service older than
VERSION refuses the registration (UnsupportedVersion), and the agent
registers again at 1.9, and if refused again at 1.5, and caps there: a
service that cannot say its version is taken for the oldest that reads
signed messages.
"""

import oslo_messaging as messaging

from memcanal.conf import upgrade_levels
from memcanal import rpc
from memcanal.rpc import freshness
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

    VERSION = '1.10'
    # Every message is signed since 1.5; the service refuses others.
    SIGNED = '1.5'
    # Since 1.9 register_host answers the service's version.
    ANSWERS = '1.9'
    # Since 1.10 every message is stamped fresh (memcanal.rpc.freshness).
    FRESH = '1.10'

    def __init__(self, host, host_key, version_cap=None):
        self.auto = version_cap == upgrade_levels.AUTO
        self._cap(self.VERSION if self.auto else version_cap or self.VERSION)
        self.host = host
        self.host_key = host_key

    def _cap(self, version_cap):
        target = messaging.Target(topic=rpc.SERVICE_TOPIC,
                                  version=self.VERSION)
        self.version_cap = version_cap
        self.client = rpc.get_client(target, version_cap=version_cap)

    def _fresh(self, version):
        """FRESH if the cap allows it (messages are then stamped), else
        ``version``."""
        return (self.FRESH if self.client.can_send_version(self.FRESH)
                else version)

    def _signed(self, version, method, **args):
        """The signed arguments of ``method`` sent at ``version``:
        stamped fresh from FRESH on."""
        args = dict(args, host=self.host)
        if version == self.FRESH:
            args = freshness.stamp(args)
        return signing.sign(self.host_key, method, args)

    def register_host(self, ctxt, memory_total_bytes, memory_reserved_bytes,
                      report_interval, timeout=None, hypervisor_type=None,
                      agent_version=None):
        """Register (or refresh) this host; returns its uuid and last
        sequence.

        A call, so the agent knows where to resume numbering its reports.
        A service before 1.6 (under a cap) is not told the hypervisor
        type: it keeps the one it has; one before 1.9 not the
        ``agent_version``. Under ``auto``, caps what follows at the
        service's answer.
        """
        args = dict(name=self.host, memory_total_bytes=memory_total_bytes,
                    memory_reserved_bytes=memory_reserved_bytes,
                    report_interval=report_interval,
                    public_key=signing.public_text(self.host_key),
                    hypervisor_type=hypervisor_type,
                    agent_version=agent_version)
        if self.auto:
            # The newest first; a service that refuses it (older) is
            # asked at the next older version that answers the
            # service_version, then as the oldest that reads signed.
            for version in (self.VERSION, self.ANSWERS, self.SIGNED):
                self._cap(version)
                try:
                    registered = self._register(ctxt, timeout, args)
                except (messaging.UnsupportedVersion,
                        messaging.RemoteError) as e:
                    if (version == self.SIGNED or (
                            isinstance(e, messaging.RemoteError)
                            and e.exc_type != 'UnsupportedVersion')):
                        raise
                    continue
                self._cap(registered.get('service_version') or self.SIGNED)
                return registered
        return self._register(ctxt, timeout, args)

    def _register(self, ctxt, timeout, args):
        """register_host at the newest version the cap allows for what
        ``args`` carry, without the arguments it does not allow."""
        version = self.SIGNED
        args = dict(args)
        for newer, argument in (('1.6', 'hypervisor_type'),
                                ('1.9', 'agent_version')):
            if args[argument] is None or not self.client.can_send_version(
                    newer):
                del args[argument]
            else:
                version = newer
        version = self._fresh(version)
        cctxt = self.client.prepare(version=version, timeout=timeout,
                                    retry=RETRIES)
        return cctxt.call(ctxt, 'register_host', **self._signed(
            version, 'register_host', **args))

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
        version = self._fresh(version)
        cctxt = self.client.prepare(version=version, retry=RETRIES)
        cctxt.cast(ctxt, 'report', **self._signed(version, 'report',
                                                  report=report))

    def stored_reports(self, ctxt, host_uuid, sequences, timeout=None):
        """Which of ``sequences`` of the host the service has: a dict of
        'stored' and 'rejected' sequences, read from its database (a
        report taken off the queue but not yet committed is neither)."""
        version = self._fresh(self.SIGNED)
        cctxt = self.client.prepare(version=version, timeout=timeout,
                                    retry=RETRIES)
        return cctxt.call(ctxt, 'stored_reports', **self._signed(
            version, 'stored_reports', host_uuid=host_uuid,
            sequences=sequences))

    def actions_done(self, ctxt, decision_uuid, results):
        """Report the outcome of a decision's actions: dicts of uuid,
        state (applied, failed or skipped), error and result.

        Like a report, fails rather than waits for a broker that is down:
        the service sends the decision again and the agent answers again
        from its journal.
        """
        # An older service stores a result's reached_bytes and lagged
        # as it stores any result: only the version says they mean 1.8's.
        version = self._fresh('1.8' if self.client.can_send_version('1.8')
                              else self.SIGNED)
        cctxt = self.client.prepare(version=version, retry=RETRIES)
        cctxt.cast(ctxt, 'actions_done', **self._signed(
            version, 'actions_done', decision_uuid=decision_uuid,
            results=results))
