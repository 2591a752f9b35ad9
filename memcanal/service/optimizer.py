"""The optimizer: each host's policy on its VMs' latest reports.

For every host that is up and has no decision being carried out, it
builds the policy's inputs from what the agents reported (memory,
working-set sizes, miss-ratio curves, guest statistics), runs the
host's policy (memcanal.policy), puts the result through the guardrails
and, when some VM is to change, records a decision with its inputs, its
policy and the miss ratio predicted for every VM.

Sampled estimates come with 95 % intervals (RPC 1.7): a VM's floor
counts the upper bound of its working set, a shrink on a curve whose
band is wider than the move's benefit is not made
(policy.benefit.held_by_band), and the decision's record names the
intervals it acted on.
"""

import dataclasses
import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal import exception
from memcanal.policy import base as policy_base
from memcanal.policy import benefit
from memcanal.policy import esx
from memcanal.policy import guardrails
from memcanal.policy import isolated
from memcanal.policy import utube

LOG = logging.getLogger(__name__)

MIB = 2 ** 20
# Curves by preference: the hypervisor cache's covers sizes below the
# VM's memory with misses as the guest counts them; the sampler's, the
# only one a stock host has, counts faults of first touches; a Xen
# host's write curve (xen_logdirty) sees writes only, so it comes last.
CURVE_METHODS = ('hcache', 'shards', 'exact', 'aet', 'sampled',
                 'xen_logdirty')
_EPOCH = datetime.datetime(1970, 1, 1)


def _seconds(moment):
    return (moment - _EPOCH).total_seconds() if moment else None


def _wss_bounds(report):
    """The 95 % interval of the report's preferred working set, (low,
    high), or None."""
    return guardrails.preferred_bounds(report['wss'],
                                       report.get('wss_bounds'))


def _as_list(bounds):
    return None if bounds is None else list(bounds)


def memory_of(instance):
    """What a VM has now: what its guest reached of the target memcanal
    set, else the target, else all its memory (db_api.memory_of). Of the
    database's instances, or the API's (memcanal-aio's summaries), which
    have no reached_bytes before microversion 1.9."""
    return db_api.memory_of(instance['target_bytes'],
                            instance['allocated_bytes'],
                            instance.get('reached_bytes'))


def first_curve(mrc):
    """(method, points) of a report's most trusted curve (CURVE_METHODS),
    or (None, None)."""
    for name in CURVE_METHODS:
        if mrc.get(name) is not None:
            return name, mrc[name]
    return None, None


@dataclasses.dataclass(frozen=True)
class PolicyCurve:
    """The curve the policies read for a VM: where it came from
    (``method``), the curve, and for a fault-rate curve the bound its
    faults are held to (``faults``, a policy.base.FaultBound)."""

    method: str | None = None
    curve: object = None
    faults: policy_base.FaultBound | None = None
    band: tuple | None = None

    def miss_floor(self, delta):
        return policy_base.miss_floor(self.faults, delta)

    def details(self, size):
        """What a decision says of the VM at ``size`` bytes: the curve
        it used and, for a fault-rate curve, the bound and the faults
        per minute (as a fraction of the working set) predicted there."""
        details = {'curve': self.method}
        if self.faults is not None:
            details.update(
                fault_rate_bound=self.faults.bound,
                predicted_fault_rate_per_min=float(
                    self.faults.per_minute(self.curve.at(size))))
        return details


def policy_curve(report, wss_bytes, flavor_bytes, fault_rate_bound):
    """The PolicyCurve of a VM of ``flavor_bytes`` whose latest report is
    ``report`` (None: it has none) and measured working set
    ``wss_bytes``, its faults held to ``fault_rate_bound`` ([optimizer]
    fault_rate_bound)."""
    if report is None:
        return PolicyCurve()
    method, points = first_curve(report['mrc'])
    if not points:
        return PolicyCurve(method)
    faults = policy_base.fault_bound(method, wss_bytes, report['guest_stats'],
                                     fault_rate_bound)

    def as_read(points):
        curve = policy_base.curve_from_points(points)
        if faults is not None:
            curve = policy_base.fault_curve(curve, flavor_bytes)
        return curve
    band = report.get('mrc_bands', {}).get(method)
    return PolicyCurve(method, as_read(points), faults, band and (
        as_read(band['low']), as_read(band['high'])))


class Optimizer:
    def __init__(self, conf):
        self.conf = conf
        options = conf.optimizer
        # Read at once: oslo.config checks a config file's values when
        # they are read, and a misspelled policy must stop the service
        # at start, not at its first decision.
        options.aggregate_policies  # noqa: B018
        self.rails = guardrails.Rails(
            kernel_bytes=options.kernel_mb * MIB,
            max_step_fraction=options.max_step_fraction,
            min_change_bytes=options.min_change_mb * MIB,
            hold_seconds=options.hold_seconds,
            min_change_fraction=options.min_change_percent / 100.0)

    def policy_of(self, host_name):
        """The host's aggregate's policy, else the global one."""
        options = self.conf.optimizer
        aggregate = options.host_aggregates.get(host_name)
        return options.aggregate_policies.get(aggregate, options.policy)

    def run(self, context):
        """Decide for every host that is up; returns the decisions made."""
        made = []
        for host in db_api.list_hosts(context):
            if host['state'] != 'up' or decisions_db.host_busy(
                    context, host['uuid']):
                continue
            decision = self.decide(context, host)
            if decision is not None:
                made.append(decision)
        return made

    def _mechanism(self, instance):
        return instance['mechanism'] or self.conf.optimizer.default_mechanism

    def _opted_out(self, instance):
        """Opted out by its owner, or paged by memory pooling: resizing a
        paged VM would discard pages its pager holds out of the guest's
        sight, so it is left alone until pooling takes it back."""
        return (instance['opt_out'] or instance['project_id']
                in self.conf.optimizer.opt_out_projects
                or instance['resident_target_bytes'] is not None)

    def _limits(self, instance, report):
        ceiling = instance['ceiling_bytes']
        if self._mechanism(instance) == 'balloon':
            # A balloon cannot give a VM more than it booted with.
            ceiling = min(ceiling or instance['allocated_bytes'],
                          instance['allocated_bytes'])
        return guardrails.Limits(
            memory_bytes=memory_of(instance),
            wss_bytes=guardrails.demand_wss(
                guardrails.preferred_wss(report['wss']), _wss_bounds(report)),
            floor_bytes=instance['floor_bytes'], ceiling_bytes=ceiling,
            opt_out=self._opted_out(instance),
            last_change_at=_seconds(instance['target_changed_at']))

    def _policy_vm(self, instance, report, limits):
        """The policy's VM; its faults are bounded relative to the
        working set's estimate, its floor counts the upper bound."""
        options = self.conf.optimizer
        curve = policy_curve(report, guardrails.preferred_wss(report['wss']),
                             instance['allocated_bytes'],
                             options.fault_rate_bound)
        return policy_base.VM(
            name=instance['uuid'], baseline_bytes=instance['allocated_bytes'],
            curve=curve.curve,
            min_bytes=guardrails.floor_of(limits, self.rails),
            max_bytes=limits.ceiling_bytes,
            memory_bytes=limits.memory_bytes,
            miss_floor=curve.miss_floor(options.delta),
            faults=curve.faults, band=curve.band), curve

    @staticmethod
    def _usage(instance, reports, limits):
        latest = reports[0]['guest_stats']
        before = reports[-1]['guest_stats']
        return utube.GuestUsage(
            name=instance['uuid'], memory_bytes=limits.memory_bytes,
            used_bytes=int(latest.get('used_bytes', limits.memory_bytes)),
            previous_used_bytes=int(before.get(
                'used_bytes', latest.get('used_bytes', limits.memory_bytes))),
            swap_bytes=int(latest.get('swap_bytes', 0)),
            previous_swap_bytes=int(before.get('swap_bytes', 0)),
            committed_bytes=int(latest.get('committed_bytes', 0)),
            max_bytes=limits.ceiling_bytes)

    def _allocate(self, policy, participants, free_bytes):
        """The policy's Allocation over the participating VMs."""
        options = self.conf.optimizer
        vms = [vm for vm, _, _ in participants.values()]
        total = sum(limits.memory_bytes
                    for _, limits, _ in participants.values())
        if policy == 'isolated_sharing':
            return isolated.isolated_sharing(
                vms, total, options.delta, unit_bytes=options.unit_mb * MIB)
        if policy == 'esx':
            return esx.esx_emulation(vms, total, tax_rate=options.tax_rate,
                                     unit_bytes=options.unit_mb * MIB)
        return utube.balance(
            [usage for _, _, usage in participants.values()],
            available_bytes=free_bytes)

    def _worth_making(self, policy, participants, allocation, changed):
        """isolated_sharing's benefit threshold (policy.benefit) over the
        VMs the decision would change (``changed``, after the guardrails),
        each at the policy's target: the guardrails' steps toward the
        targets are made while the whole move is worth it, but a VM they
        hold back (hold, opt-out, too small a change, no budget) lends
        the decision none of its gain, or a flat VM's shrink alone was
        made for the gain of a VM that was not to grow."""
        if policy != 'isolated_sharing':
            return True
        options = self.conf.optimizer
        return benefit.worth_making(
            [vm for uuid, (vm, _, _) in participants.items()
             if uuid in changed], allocation.targets,
            options.delta, options.min_benefit)

    def decide(self, context, host):
        """Run the host's policy; record and return a decision, or None
        when no VM is to change."""
        policy = self.policy_of(host['name'])
        if policy == 'none':
            return None
        instances = [i for i in db_api.host_policy_inputs(
            context, host['uuid']) if i['reports']]
        free = max(0, host['memory_total_bytes']
                   - host['memory_reserved_bytes']
                   - sum(memory_of(i) for i in instances))
        participants, curves, limits = {}, {}, {}
        for instance in instances:
            report = instance['reports'][0]
            limits[instance['uuid']] = self._limits(instance, report)
            if limits[instance['uuid']].opt_out:
                continue
            vm, curves[instance['uuid']] = self._policy_vm(
                instance, report, limits[instance['uuid']])
            participants[instance['uuid']] = (
                vm, limits[instance['uuid']],
                self._usage(instance, instance['reports'],
                            limits[instance['uuid']]))
        if not participants:
            return None
        try:
            allocation = self._allocate(policy, participants, free)
        except ValueError as error:
            LOG.warning('Policy %s found no allocation for host %s: %s',
                        policy, host['name'], error)
            return None
        guarded, weighed = self._guard(allocation, participants, limits,
                                       free)
        if not guarded.targets:
            LOG.debug('No decision for %s: the guardrails held every VM '
                      '(%s)', host['name'], guarded.reasons)
            return None
        if not self._worth_making(policy, participants, allocation,
                                  guarded.targets):
            LOG.debug('No decision for %s: the VMs it would change predict '
                      'less than [optimizer] min_benefit at their targets',
                      host['name'])
            return None
        by_uuid = {i['uuid']: i for i in instances}
        changes = [{'instance_uuid': uuid, 'target_bytes': int(target),
                    'previous_bytes': limits[uuid].memory_bytes,
                    'mechanism': self._mechanism(by_uuid[uuid])}
                   for uuid, target in sorted(guarded.targets.items())]
        outputs = self._outputs(allocation, guarded, participants, curves)
        outputs['predicted_benefit'] = weighed
        inputs = self._inputs(instances, limits, curves, free)
        try:
            decision = decisions_db.create_decision(
                context, host['uuid'], 'memory_targets', policy,
                self.conf.optimizer.mode, inputs, outputs, changes)
        except exception.HostBusy as busy:
            # An approval (or another optimizer) got there first.
            LOG.info('No decision for %s: %s', host['name'], busy)
            return None
        if decision is None:
            LOG.debug('No decision for %s: its VMs are at the sizes the '
                      'policy chose', host['name'])
            return None
        LOG.info('Decision %s for %s (%s, %s): %d VMs to resize',
                 decision['uuid'], host['name'], policy, decision['state'],
                 len(changes))
        return decision

    def _guard(self, allocation, participants, limits, free):
        """(guardrails.Guarded, the benefit the bands were weighed
        against) of the policy's targets: a shrink whose curve's band is
        wider than the move's benefit (policy.benefit.held_by_band) is
        held at the VM's memory, its reasons starting with 'band', and
        the growths it would have paid for are then scaled to what is
        left (the guardrails' budget)."""
        weighed, held = benefit.held_by_band(
            [vm for vm, _, _ in participants.values()], allocation.targets,
            self.conf.optimizer.min_benefit)
        proposed = {name: limits[name].memory_bytes if name in held
                    else target
                    for name, target in allocation.targets.items()}
        guarded = guardrails.apply(proposed, limits, self.rails,
                                   _seconds(timeutils.utcnow()),
                                   free_bytes=free)
        reasons = dict(guarded.reasons)
        for name in held:
            reasons[name] = ['band', *reasons.get(name, [])]
        return guardrails.Guarded(guarded.targets, reasons), weighed

    @staticmethod
    def _outputs(allocation, guarded, participants, curves):
        """Per VM: the target after the guardrails, its miss ratio there as
        the VM's curve predicts it (absolute, comparable with the guest's
        misses per access) and relative to its flavor memory; for a
        fault-rate curve, the bound and the faults predicted there
        (PolicyCurve.details)."""
        vms = {}
        for uuid, (vm, limits, _) in participants.items():
            target = guarded.targets.get(uuid, limits.memory_bytes)
            vms[uuid] = {
                'target_bytes': int(target),
                'policy_target_bytes': int(allocation.targets.get(
                    uuid, limits.memory_bytes)),
                **curves[uuid].details(target),
                'predicted_miss_ratio': (
                    float(vm.curve.at(target)) if vm.curve is not None
                    else None),
                'predicted_relative_miss_ratio': float(
                    vm.relative_miss_ratio(target)),
                'guardrails': guarded.reasons.get(uuid, []),
            }
            band = benefit.band_at(vm, vms[uuid]['policy_target_bytes'])
            if band is not None:
                # The band's [low, high] where the policy would have put
                # the VM: what held_by_band weighed.
                vms[uuid]['band_at_policy_target'] = list(band)
        return {'policy': allocation.as_json(), 'instances': vms}

    @staticmethod
    def _inputs(instances, limits, curves, free):
        methods = {uuid: curve.method for uuid, curve in curves.items()}
        return {
            'free_bytes': free,
            'instances': {
                i['uuid']: {
                    'memory_bytes': limits[i['uuid']].memory_bytes,
                    'allocated_bytes': i['allocated_bytes'],
                    'wss_bytes': guardrails.preferred_wss(
                        i['reports'][0]['wss']),
                    # Its interval, whose upper bound the floor counts.
                    'wss_bounds_bytes': _as_list(
                        _wss_bounds(i['reports'][0])),
                    'floor_bytes': i['floor_bytes'],
                    'ceiling_bytes': limits[i['uuid']].ceiling_bytes,
                    'opt_out': limits[i['uuid']].opt_out,
                    'report_sequence': i['reports'][0]['sequence'],
                    'curve': methods.get(i['uuid']),
                    'mrc': i['reports'][0]['mrc'].get(methods.get(i['uuid'])),
                    'mrc_band': i['reports'][0].get('mrc_bands', {}).get(
                        methods.get(i['uuid'])),
                    'guest_stats': i['reports'][0]['guest_stats'],
                } for i in instances},
        }
