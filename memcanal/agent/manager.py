"""The compute agent: collect from the hypervisor, estimate, report.

Every report interval the agent collects a Sample per VM from its driver,
runs it through that VM's estimators (memcanal.agent.collector), and casts
one report for the whole host to the service. The report doubles as the
host's heartbeat.
"""

import collections
import dataclasses
import os

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_utils import timeutils

from memcanal.agent import collector
from memcanal.agent import sequence
from memcanal import context as memcanal_context
from memcanal import exception
from memcanal.rpc import service_api

LOG = logging.getLogger(__name__)

# Remembered action ids; far more than one host receives between restarts.
APPLIED_ACTIONS_KEPT = 4096


class AgentManager:
    """Endpoint for memcanal.rpc.agent_api.AgentAPI (version 1.x)."""

    target = messaging.Target(version='1.1')

    def __init__(self, conf, host, hypervisor):
        self.conf = conf
        self.host = host
        self.driver = hypervisor
        self.host_uuid = None
        self.sequence = sequence.SequenceCounter(
            os.path.join(conf.state_path, 'agent-%s.sequence' % host))
        self._service_api = None
        self._applied_actions = collections.OrderedDict()
        self._collectors = {}
        self._can_trace = True

    @property
    def service_api(self):
        # Made on first use: the transport exists only once the RPC
        # service has started, after oslo.service forked.
        if self._service_api is None:
            self._service_api = service_api.ServiceAPI()
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
                memcanal_context.get_admin_context(), self.host,
                info.memory_total_bytes, info.memory_reserved_bytes,
                self.conf.agent.report_interval,
                timeout=self.conf.agent.register_timeout)
        except messaging.MessagingTimeout:
            LOG.warning('The memcanal service did not answer the '
                        'registration of %s within %ds; retrying',
                        self.host, self.conf.agent.register_timeout)
            return False
        self.host_uuid = host['uuid']
        self.sequence.resume_after(host['last_sequence'])
        LOG.info('Registered %s as %s; reports continue after %d',
                 self.host, self.host_uuid, self.sequence.last)
        return True

    def build_report(self):
        """One report of every VM on this host, numbered."""
        samples = []
        instances = self.driver.list_instances()
        # Estimator state goes with the VM; a VM that left starts afresh.
        self._collectors = {instance.uuid: self._collectors.get(
            instance.uuid) for instance in instances}
        for instance in instances:
            sample = self.driver.collect(instance.uuid)
            if self._collectors[instance.uuid] is None:
                self._collectors[instance.uuid] = collector.InstanceCollector(
                    self.conf, instance.uuid, instance.allocated_bytes,
                    sample.page_size)
            summary = self._collectors[instance.uuid].collect(sample)
            self._step_tracing(instance,
                               self._collectors[instance.uuid].tracing)
            samples.append(dict(
                summary, uuid=instance.uuid, project_id=instance.project_id,
                allocated_bytes=instance.allocated_bytes,
                observed_bytes=instance.target_bytes))
        return {
            'host_uuid': self.host_uuid,
            'sequence': self.sequence.next(),
            'collected_at': timeutils.utcnow().isoformat() + 'Z',
            'instances': samples,
        }

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
        """Periodic job: register if needed, then send one report."""
        if self.host_uuid is None and not self.register():
            return None
        report = self.build_report()
        self.service_api.report(memcanal_context.get_admin_context(), report)
        LOG.debug('Sent report %d with %d instances', report['sequence'],
                  len(report['instances']))
        return report

    def apply_memory_target(self, context, instance_uuid, target_bytes,
                            action_id):
        """RPC 1.0: resize one VM by balloon; an action id already applied
        is not applied again."""
        self._apply({'uuid': action_id, 'instance_uuid': instance_uuid,
                     'target_bytes': target_bytes, 'mechanism': 'balloon'})

    def apply_decision(self, context, decision_uuid, actions):
        """RPC 1.1: carry out a decision's actions, then report them.

        VMs shrink before others grow, so the host never holds more than
        the decision planned. One failed action does not stop the others:
        a VM that vanished frees its memory anyway, and for a shrink that
        failed on a VM still there, only the growth its memory would have
        paid for is skipped (largest growths first), each skipped VM
        keeping its previous target.
        """
        current = {instance.uuid: instance.target_bytes
                   or instance.allocated_bytes
                   for instance in self.driver.list_instances()}

        def change(action):
            return action['target_bytes'] - (
                current.get(action['instance_uuid']) or 0)

        ordered = sorted(actions, key=change)
        shrinks = [a for a in ordered if change(a) < 0]
        growths = [a for a in ordered if change(a) >= 0]
        results = [self._apply(action) for action in shrinks]
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
                results.append(self._apply(action))
        results = [{key: value for key, value in result.items()
                    if key != 'vanished'} for result in results]
        self.service_api.actions_done(
            memcanal_context.get_admin_context(), decision_uuid, results)
        return results

    def _apply(self, action):
        """Apply one action once; a redelivered one gets its first outcome
        again."""
        known = self._applied_actions.get(action['uuid'])
        if known is not None:
            LOG.info('Action %s was already applied; ignoring',
                     action['uuid'])
            return known
        try:
            resize = self.driver.apply_memory_target(
                action['instance_uuid'], action['target_bytes'],
                action['mechanism'])
        except (exception.ResizeFailed, exception.InstanceNotFound) as error:
            LOG.warning('Action %s failed: %s', action['uuid'], error)
            result = {'uuid': action['uuid'], 'state': 'failed',
                      'error': str(error), 'result': None,
                      'vanished': isinstance(error,
                                             exception.InstanceNotFound)}
        else:
            LOG.info('Applied action %s: %s -> %d bytes by %s in %.3fs',
                     action['uuid'], action['instance_uuid'],
                     resize.target_bytes, resize.mechanism, resize.seconds)
            result = {'uuid': action['uuid'], 'state': 'applied',
                      'error': None, 'result': dataclasses.asdict(resize)}
        self._applied_actions[action['uuid']] = result
        while len(self._applied_actions) > APPLIED_ACTIONS_KEPT:
            self._applied_actions.popitem(last=False)
        return result
