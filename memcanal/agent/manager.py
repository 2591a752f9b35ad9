"""The compute agent: collect from the hypervisor, estimate, report.

Every report interval the agent collects a Sample per VM from its driver,
runs it through that VM's estimators (memcanal.agent.collector), and casts
one report for the whole host to the service. The report doubles as the
host's heartbeat. Each report goes through the outbox
(memcanal.agent.outbox) and each action through the journal
(memcanal.agent.journal), so neither is lost nor done twice when the
agent, the broker, the service or its database stops (doc/delivery.md).
"""

import dataclasses
import os
import threading
import time

import numpy as np
import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import versionutils

from memcanal.agent import adaptive
from memcanal.agent import collector
from memcanal.agent import journal
from memcanal.agent import leases
from memcanal.agent import metrics
from memcanal.agent import outbox
from memcanal.agent import sequence
from memcanal.agent import settle
from memcanal import context as memcanal_context
from memcanal import estimation
from memcanal import exception
from memcanal.agent import durable
from memcanal.rpc import agent_api
from memcanal.rpc import freshness
from memcanal.rpc import sealing
from memcanal.rpc import service_api
from memcanal.rpc import signing

LOG = logging.getLogger(__name__)

# Actions the journal remembers; far more than one host receives while
# one is being redelivered.
APPLIED_ACTIONS_KEPT = 4096
# The RPC version whose reports carry the intervals of sampled estimates
# (wss_bounds, mrc_bands); an agent whose service API is older leaves
# them out, which such a service would reject.
INTERVALS_VERSION = '1.7'


def service_public_key(conf):
    """[agent] service_public_key, loaded; None (logged) when unset. A
    file that cannot be read stops the agent (KeyFileError)."""
    if not conf.agent.service_public_key:
        LOG.error('[agent] service_public_key is not set: every action '
                  'the service sends is refused.')
        return None
    return signing.load_public_key(conf.agent.service_public_key)


class AgentManager:
    """Endpoint for memcanal.rpc.agent_api.AgentAPI (version 1.x).

    What it sends is signed with the host's key ([agent] host_key, made
    on first start), which the service pins at the host's first
    registration; what it applies must be signed with the service's key
    ([agent] service_public_key), for this host.
    """

    target = messaging.Target(version='1.4')

    def __init__(self, conf, host, hypervisor):
        self.conf = conf
        self.host = host
        self.driver = hypervisor
        self.host_uuid = None
        self.host_key = signing.host_key(
            conf.agent.host_key
            or os.path.join(conf.state_path, 'agent-%s.key' % host))
        LOG.info('Host %s signs with key %s', host, signing.fingerprint(
            signing.public_text(self.host_key)))
        self.service_key = service_public_key(conf)
        self.sequence = sequence.SequenceCounter(
            os.path.join(conf.state_path, 'agent-%s.sequence' % host))
        self.outbox = outbox.Outbox(
            os.path.join(conf.state_path, 'agent-%s.outbox' % host),
            conf.agent.max_unconfirmed_reports)
        self.journal = journal.ActionJournal(
            os.path.join(conf.state_path, 'agent-%s.actions' % host),
            APPLIED_ACTIONS_KEPT)
        # Casts are refused once older than [rpc] replay_window, or seen
        # within it (memcanal.rpc.freshness); once the service has
        # stamped one (agent RPC 1.3), unstamped ones are refused, across
        # restarts.
        self.window = freshness.Window(conf.rpc.replay_window)
        self._stamped_path = os.path.join(conf.state_path,
                                          'agent-%s.stamped' % host)
        self._service_stamps = os.path.exists(self._stamped_path)
        # One action at a time: a redelivery waits for the delivery being
        # applied, then finds its outcome in the journal.
        self._apply_lock = threading.Lock()
        self._service_api = None
        self._collectors = {}
        self.sampling_rates = adaptive.SamplingRates(conf.sampling)
        self._can_trace = True
        # What the node's collections saw ([agent] metrics_port).
        self.metrics = metrics.AgentMetrics()

    @property
    def service_api(self):
        # Made on first use: the transport exists only once the RPC
        # service has started, after oslo.service forked.
        if self._service_api is None:
            self._service_api = service_api.ServiceAPI(
                self.host, self.host_key, self.conf.upgrade_levels.service)
        return self._service_api

    def estimators(self, instance_uuid):
        """The estimators (a memcanal.estimation.observer.VmObserver) the
        agent keeps for a VM it has reported."""
        return self._collectors[instance_uuid].observer

    def register(self):
        """Register this host; return True once the service has answered."""
        info = self.driver.host_info()
        try:
            host = self.service_api.register_host(
                memcanal_context.get_admin_context(),
                info.memory_total_bytes, info.memory_reserved_bytes,
                self.conf.agent.report_interval,
                timeout=self.conf.agent.register_timeout,
                hypervisor_type=self.driver.hypervisor_type,
                agent_version=self.target.version)
        except messaging.RemoteError as error:
            # The service refused it: this host registered with another
            # key before, or the registration is not fresh (a clock
            # outside [rpc] replay_window, or stepped back before the
            # host's newest registration); its log says which.
            LOG.error('The memcanal service refused the registration of '
                      '%s: %s', self.host, error.value)
            return False
        except messaging.MessagingException as error:
            # No answer in time, no broker, or a service that could not
            # reach its database.
            LOG.warning('The memcanal service did not answer the '
                        'registration of %s within %ds (%s); retrying',
                        self.host, self.conf.agent.register_timeout,
                        type(error).__name__)
            return False
        self.host_uuid = host['uuid']
        self.sequence.resume_after(host['last_sequence'])
        LOG.info('Registered %s as %s; reports continue after %d; '
                 'service RPC version cap %s', self.host, self.host_uuid,
                 self.sequence.last, self.service_api.version_cap)
        return True

    def build_report(self):
        """One report of every VM on this host, numbered."""
        samples = []
        instances = self.driver.list_instances()
        # Estimator state goes with the VM; a VM that left starts afresh.
        self._collectors = {instance.uuid: self._collectors.get(
            instance.uuid) for instance in instances}
        for instance in instances:
            try:
                samples.append(self._instance_sample(instance))
            except exception.InstanceNotFound:
                # Migrated away or deleted since the listing: the rest of
                # the host's report still goes; the next listing drops it.
                LOG.info('%s left %s while being measured; not reported',
                         instance.uuid, self.host)
                del self._collectors[instance.uuid]
        self._adapt_sampling()
        report = {
            'host_uuid': self.host_uuid,
            'sequence': self.sequence.next(),
            'collected_at': timeutils.utcnow().isoformat() + 'Z',
            'availability_zone': self.conf.agent.availability_zone,
            'instances': samples,
        }
        server = self.driver.memory_server(
            self.conf.pooling.memserver_address)
        if server is not None:
            report['memserver'] = server
        return report

    def _adapt_sampling(self):
        """Set each sampled VM's rate (and salt) for its next intervals
        (memcanal.agent.adaptive)."""
        for uuid, (rate, salt) in self.sampling_rates.plan(
                self._collectors).items():
            try:
                self.driver.set_sampling(uuid, rate, salt)
            except exception.InstanceNotFound:
                pass                    # gone: the next listing drops it
            except exception.MemcanalException as error:
                LOG.warning('Cannot set the sampling rate of %s to %g: %s',
                            uuid, rate, error)

    def _instance_sample(self, instance):
        """The report's entry for one VM: its collector's summary of the
        driver's sample, what it is, and its paging when paged."""
        sample = self.driver.collect(instance.uuid)
        if self._collectors[instance.uuid] is None:
            self._collectors[instance.uuid] = collector.InstanceCollector(
                self.conf, instance.uuid, instance.allocated_bytes,
                sample.page_size)
        summary = self._collectors[instance.uuid].collect(sample)
        self._step_tracing(instance, self._collectors[instance.uuid].tracing)
        if not versionutils.is_compatible(INTERVALS_VERSION,
                                          service_api.ServiceAPI.VERSION):
            summary = {key: value for key, value in summary.items()
                       if key not in ('wss_bounds', 'mrc_bands')}
        entry = dict(
            summary, uuid=instance.uuid, project_id=instance.project_id,
            allocated_bytes=instance.allocated_bytes,
            observed_bytes=instance.target_bytes, flavor=instance.flavor)
        if instance.resident_bytes is not None:
            entry['paging'] = _paging(instance, sample)
        return entry

    def _step_tracing(self, instance, tracing):
        """End a VM's tracing window once complete, or start one when due
        (memcanal.agent.tracing)."""
        if not self._can_trace:
            return
        try:
            if tracing.window_complete:
                self.driver.stop_tracing(instance.uuid)
                tracing.stop()
            elif tracing.due():
                self.driver.start_tracing(instance.uuid, int(
                    instance.allocated_bytes * tracing.cache_fraction))
                tracing.start()
        except exception.TracingNotSupported as error:
            LOG.warning('%s Hypervisor-cache tracing is off on %s.', error,
                        self.host)
            self._can_trace = False

    def report(self):
        """Periodic job: register if needed, then send one report, and
        settle the outbox.

        The report is on disk before it is sent, so whatever happens to
        the cast, it is sent again until the service has stored it.
        """
        if self.host_uuid is None and not self.register():
            return None
        started = time.monotonic()
        report = self.build_report()
        self.metrics.observe(report, time.monotonic() - started)
        self.outbox.add(report)
        if self._send(report):
            LOG.debug('Sent report %d with %d instances',
                      report['sequence'], len(report['instances']))
            # Not without a broker: the question would fail as well.
            self.confirm_reports()
        return report

    def _send(self, report):
        try:
            self.service_api.report(memcanal_context.get_admin_context(),
                                    report)
        except messaging.MessagingException as error:
            LOG.warning('Could not send report %d (%s); it stays in the '
                        'outbox', report['sequence'], error)
            return False
        self.outbox.sent(report['sequence'])
        return True

    def confirm_reports(self):
        """Drop the reports the service has, send the others again.

        Asks about the reports sent at least [agent] report_confirm_delay
        ago (and those left by an earlier run); the service answers from
        its database. Without an answer nothing is dropped: next interval
        asks again. Returns the sequences sent again.
        """
        due = self.outbox.due(self.conf.agent.report_confirm_delay)
        if not due:
            return []
        try:
            outcome = self.service_api.stored_reports(
                memcanal_context.get_admin_context(), self.host_uuid, due,
                timeout=self.conf.agent.register_timeout)
        except messaging.MessagingException as error:
            LOG.warning('Could not ask the service which of %d reports it '
                        'stored (%s); keeping them', len(due),
                        type(error).__name__)
            return []
        if outcome['rejected']:
            LOG.warning('The service rejected reports %s; see its log',
                        outcome['rejected'])
        self.outbox.drop(outcome['stored'] + outcome['rejected'])
        settled = set(outcome['stored']) | set(outcome['rejected'])
        missing = [number for number in due if number not in settled]
        resent = []
        for number in missing[:self.conf.agent.max_resent_reports]:
            LOG.info('Report %d is not stored; sending it again', number)
            if not self._send(self.outbox.load(number)):
                break
            resent.append(number)
        return resent

    @messaging.expose
    def apply_decision(self, context, decision_uuid, actions, host=None,
                       signature=None, sent_at=None, nonce=None):
        """RPC 1.2: carry out a decision's actions, then report them;
        only what the service signed for this host, and since 1.3 only
        when fresh (memcanal.rpc.freshness): sent within [rpc]
        replay_window and not seen before, whatever the journal holds.
        Anything else is logged, counted and dropped: nothing applied,
        nothing journalled, no answer (a forged or replayed message
        naming real actions must not settle them; the service sends
        unanswered actions again, signed anew). Since 1.4 a page
        action's lease tokens come sealed to this host's key."""
        args = {'decision_uuid': decision_uuid, 'actions': actions}
        if not self._accepted('apply_decision', args, host, signature,
                              sent_at, nonce, 'decision %s' % decision_uuid):
            return None
        try:
            actions = [agent_api.unsealed(action, self.host_key)
                       for action in actions]
        except sealing.SealError as error:
            LOG.error('Refused decision %s: its lease tokens are not '
                      'sealed to this host\'s key: %s', decision_uuid, error)
            self.metrics.refused('rpc.unsealable')
            return None
        return self._carry_out(decision_uuid, actions)

    @messaging.expose
    def renew_leases(self, context, renewals, host=None, signature=None,
                     sent_at=None, nonce=None):
        """RPC 1.4: hand the VMs' pagers their leases' renewed tokens
        (sealed to this host's key) before the old ones expire, once the
        cast is checked as apply_decision's is. A VM no longer paged
        here is skipped: its lease ends with it."""
        args = {'renewals': renewals}
        if not self._accepted('renew_leases', args, host, signature,
                              sent_at, nonce, 'a lease renewal'):
            return
        leases.renew(self.driver, self.host_key, renewals, self.metrics)

    @messaging.expose
    def revoke_leases(self, context, revocations, host=None, signature=None,
                      sent_at=None, nonce=None):
        """RPC 1.4: end leases of this host's memory server (the lender):
        each VM's pages there go, and its tokens issued until
        ``revoked_at`` are refused from now on (REVOKE on the admin
        socket). The service sends a revocation until the tokens it
        ends would have expired: one that fails now is tried again."""
        args = {'revocations': revocations}
        if not self._accepted('revoke_leases', args, host, signature,
                              sent_at, nonce, 'a lease revocation'):
            return
        leases.revoke(self.conf.pooling.memserver_admin_socket,
                      revocations)

    def _accepted(self, method, args, host, signature, sent_at, nonce, what):
        """Whether the service's cast of ``method`` with ``args`` is
        signed for this host and fresh; if not, it is logged and
        counted."""
        args = dict(args, host=host, **{signing.SIGNATURE: signature})
        for name, value in ((freshness.SENT_AT, sent_at),
                            (freshness.NONCE, nonce)):
            if value is not None:
                args[name] = value
        if host != self.host or not signing.verify(
                self.service_key, method, args):
            LOG.error('Refused %s: not signed by the service\'s key for %s '
                      '(signed: %s, for host %r)', what, self.host,
                      signature is not None, host)
            self.metrics.refused('rpc.bad_signature')
            return False
        stale = self._stale(args)
        if stale is not None:
            LOG.error('Refused %s: %s (%s)', what, stale[1], stale[0])
            self.metrics.refused(stale[0])
            return False
        return True

    def _stale(self, args):
        """None if the service's cast of ``args`` (signature verified)
        is fresh; else (code, detail). The first stamped one is recorded
        on disk: from then on unstamped casts are refused."""
        if not freshness.stamped(args):
            if self._service_stamps:
                return freshness.UNSTAMPED, (
                    'not stamped fresh, and the service stamps its casts '
                    '(remove %s if it was downgraded)' % self._stamped_path)
            return None
        stale = self.window.check('service', args)
        if stale is None and not self._service_stamps:
            durable.write(self._stamped_path, '1\n')
            self._service_stamps = True
            LOG.info('The service stamps its casts fresh: from now on '
                     'unstamped ones are refused')
        return stale

    def _carry_out(self, decision_uuid, actions):
        """Carry out a decision's actions, then report them.

        VMs shrink before others grow, so the host never holds more than
        the decision planned. One failed action does not stop the others:
        a VM that vanished frees its memory anyway, and for a shrink that
        failed on a VM still there, only the growth its memory would have
        paid for is skipped (largest growths first), each skipped VM
        keeping its previous target. The actions share one wait for their
        guests to reach their targets ([agent] target_settle_timeout), so
        a decision is answered within it however many VMs lag.
        """
        if any('destination_host' in action for action in actions):
            results = [self._migrate(action) for action in actions]
            self.service_api.actions_done(
                memcanal_context.get_admin_context(), decision_uuid, results)
            return results
        current = self._sizes()

        def change(action):
            return action['target_bytes'] - (
                self._size(current, action) or 0)

        settle_by = time.monotonic() + self.conf.agent.target_settle_timeout
        ordered = sorted(actions, key=change)
        shrinks = [a for a in ordered if change(a) < 0]
        growths = [a for a in ordered if change(a) >= 0]
        results = [self._apply(action, settle_by) for action in shrinks]
        shortfall = sum(-change(action) for action, result in zip(
            shrinks, results) if result['state'] == 'failed'
            and action['instance_uuid'] in current
            and not result.get('vanished'))
        skipped = set()
        for action in sorted(growths, key=change, reverse=True):
            if shortfall <= 0:
                break
            skipped.add(action['uuid'])
            shortfall -= change(action)
        for action in growths:
            if action['uuid'] in skipped:
                results.append({
                    'uuid': action['uuid'], 'state': 'skipped',
                    'error': 'A shrink that would have made room for it '
                             'failed.', 'result': None})
            else:
                results.append(self._apply(action, settle_by))
        results = [{key: value for key, value in result.items()
                    if key != 'vanished'} for result in results]
        self.service_api.actions_done(
            memcanal_context.get_admin_context(), decision_uuid, results)
        return results

    def _sizes(self):
        """Each VM's memory as its driver says now, by uuid, and for a
        'paging' action the memory of it resident on the host."""
        sizes = {}
        for instance in self.driver.list_instances():
            memory = instance.target_bytes or instance.allocated_bytes
            sizes[instance.uuid] = {'memory': memory,
                                    'resident': instance.resident_bytes
                                    or memory}
        return sizes

    def _size(self, sizes, action):
        """What ``action`` changes of its VM now; None if it is gone."""
        size = sizes.get(action['instance_uuid'])
        if size is None:
            return None
        return size['resident' if action['mechanism'] == 'paging'
                    else 'memory']

    def _apply(self, action, settle_by):
        """Apply one action once, whatever happens to this agent; a
        redelivered one gets its first outcome again.

        The intent is journalled before the resize and the outcome after.
        An intent without an outcome is an apply this agent was killed
        in: a VM already at the target (within a page, the drivers'
        rounding) was resized then and counts as applied; any other is
        resized now.
        """
        with self._apply_lock:
            entry = self.journal.get(action['uuid'])
            if entry is not None and entry['result'] is not None:
                LOG.info('Action %s was already applied; answering its '
                         'outcome again', action['uuid'])
                return entry['result']
            current = self._size(self._sizes(), action)
            if entry is None:
                previous = current
                self.journal.intend(action, previous)
                result = self._resize(action, settle_by)
            else:
                previous = entry['previous_bytes']
                if current is not None and abs(
                        current - action['target_bytes']) < (
                            estimation.PAGE_SIZE):
                    LOG.info('Action %s was being applied when the agent '
                             'stopped; %s is at its target', action['uuid'],
                             action['instance_uuid'])
                    result = {'uuid': action['uuid'], 'state': 'applied',
                              'error': None, 'result': {
                                  'mechanism': action['mechanism'],
                                  'previous_bytes': previous,
                                  'target_bytes': current, 'seconds': None,
                                  'reached_bytes': current, 'lagged': False,
                                  'settle_seconds': None}}
                else:
                    LOG.info('Action %s was being applied when the agent '
                             'stopped; applying it', action['uuid'])
                    result = self._resize(action, settle_by)
            self.journal.record(action, previous, result)
            return result

    def _migrate(self, action):
        """Move a VM to another host once (the simulated driver's hosts);
        a redelivered action gets its first outcome again, and one this
        agent was killed in is tried again: a VM already moved counts as
        moved."""
        with self._apply_lock:
            entry = self.journal.get(action['uuid'])
            if entry is not None and entry['result'] is not None:
                return entry['result']
            self.journal.intend(action, None)
            try:
                self.driver.migrate_instance(action['instance_uuid'],
                                             action['destination_host'])
                result = {'uuid': action['uuid'], 'state': 'applied',
                          'error': None, 'result': {
                              'destination_host': action['destination_host']}}
                LOG.info('Moved %s to %s', action['instance_uuid'],
                         action['destination_host'])
            except (exception.MigrationFailed,
                    exception.InstanceNotFound) as error:
                LOG.warning('Action %s failed: %s', action['uuid'], error)
                result = {'uuid': action['uuid'], 'state': 'failed',
                          'error': str(error), 'result': None}
            self.journal.record(action, None, result)
            return result

    def _resize(self, action, settle_by):
        """Resize a VM, then wait until ``settle_by`` (a monotonic time)
        at most for the guest to reach the target; the action's result."""
        try:
            resize = self.driver.apply_memory_target(
                action['instance_uuid'], action['target_bytes'],
                action['mechanism'], action.get('stores', ()),
                action.get('lease_tokens'))
        except (exception.ResizeFailed, exception.InstanceNotFound) as error:
            LOG.warning('Action %s failed: %s', action['uuid'], error)
            return {'uuid': action['uuid'], 'state': 'failed',
                    'error': str(error), 'result': None,
                    'vanished': isinstance(error,
                                           exception.InstanceNotFound)}
        resize = settle.settle(self.driver, action['instance_uuid'], resize,
                               max(0.0, settle_by - time.monotonic()))
        LOG.info('Applied action %s: %s -> %d bytes by %s in %.3fs; '
                 'reached %s bytes after %.1fs', action['uuid'],
                 action['instance_uuid'], resize.target_bytes,
                 resize.mechanism, resize.seconds, resize.reached_bytes,
                 resize.settle_seconds)
        if resize.lagged:
            LOG.warning('Action %s: %s lags its target of %d bytes: at %d '
                        'bytes after %.1fs ([agent] '
                        'target_settle_timeout)', action['uuid'],
                        action['instance_uuid'], resize.target_bytes,
                        resize.reached_bytes, resize.settle_seconds)
        return {'uuid': action['uuid'], 'state': 'applied',
                'error': None, 'result': dataclasses.asdict(resize)}


def _paging(instance, sample):
    """A paged VM's ``paging`` report field: its memory resident and paged
    out now, and the interval's faults (the driver's count, else the
    paging trace's reads) and pages swapped out."""
    trace = sample.paging_trace
    reads = 0 if trace is None else int(np.count_nonzero(trace.reads))
    return {'resident_bytes': instance.resident_bytes,
            'paged_bytes': instance.paged_bytes,
            'faults': int(sample.guest_stats.get('paging_faults', reads)),
            'swapped_out': 0 if trace is None else len(trace.reads) - reads}
