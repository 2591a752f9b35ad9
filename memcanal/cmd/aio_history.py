"""What one memcanal-aio run did, read back through the database API.

The summary and the plots of memcanal-aio tell a run's story from what
the service stored: every VM's reports since the run started, and the
decisions it made with when each was applied. The database keeps a VM's
current host and resident target only, so where a VM was and what it
held resident at an earlier report is replayed from the migrations and
pooling decisions applied before it.
"""

import collections
import dataclasses
import datetime

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.policy import base as policy_base
from memcanal.policy import demand
from memcanal.policy import guardrails
from memcanal.service import optimizer as optimizer_service


Sample = collections.namedtuple(
    'Sample', 'seconds sequence host memory resident wss demand '
              'miss_ratio')
Sample.__doc__ = """One report of a VM: when (seconds since the run
started), the host's report sequence, where the VM was, its memory, what
of it it held resident, its working sets by estimator, its measured
demand and the miss ratio its guest measured (None without accesses)."""

HostPoint = collections.namedtuple(
    'HostPoint', 'seconds memory resident demand lent borrowed')
HostPoint.__doc__ = """A host at one of its reports: its VMs' memory,
what they held resident, their measured demand, what its memory server
lent and what its VMs borrowed (bytes)."""


def seconds_since(start, moment):
    return (moment - start).total_seconds()


def applied_at(decision):
    """When a decision (with its events) was applied, or None."""
    for event in decision['events']:
        if event['to_state'] == 'applied':
            return event['created_at']
    return None


def misses_per_access(stats):
    """A report's measured miss ratio, or None without accesses."""
    if not stats or not stats.get('accesses'):
        return None
    return stats['misses'] / stats['accesses']


Measured = collections.namedtuple('Measured',
                                  'overall latest reports traced')
Measured.__doc__ = """A VM's miss ratio while a decision's size held:
over all its reports then (``overall``), in the latest one, how many
reports that is, and over all of them again with the misses its tracing
windows caused (``traced``). A curve predicts the misses of a VM that
is not traced; a tracing window gives the memory it lent back empty,
and the VM then reads again what that memory held (``tracing_refills``,
counted by the hypervisor, which sees those reads)."""


def untraced_misses(stats):
    """A report's misses less those its VM's tracing windows caused."""
    return stats['misses'] - stats.get('tracing_refills', 0.0)


SAME_SIZE_BYTES = 2 ** 20
"""Two memory sizes closer than this are the same: a target is rounded
to whole pages by the hypervisor, and no resize is this small
([optimizer] min_change_mb)."""
FIDELITY_FROM_REPORT = 3
"""The fidelity line counts a resize's reports from this one at the new
size on: the first ones still carry the guest's page cache of before (a
grown VM refills it, a shrunk one has just evicted)."""


def measured(reports):
    """The Measured miss ratio over ``reports`` (oldest first), or None
    when none had accesses."""
    stats = [r['guest_stats'] for r in reports
             if r['guest_stats'].get('accesses')]
    if not stats:
        return None
    accesses = sum(s['accesses'] for s in stats)
    return Measured(sum(untraced_misses(s) for s in stats) / accesses,
                    untraced_misses(stats[-1]) / stats[-1]['accesses'],
                    len(stats), sum(s['misses'] for s in stats) / accesses)


def measured_after(reports, moment, until=None):
    """The Measured miss ratio of the ``reports`` (oldest first)
    collected after ``moment`` (and, given ``until``, not after it), or
    None when there is none."""
    return measured([r for r in reports if r['collected_at'] > moment
                     and (until is None or r['collected_at'] <= until)])


def memory_of_report(report):
    """The VM's memory when ``report`` was taken: its guest's count
    (what a tracing window lends the hypervisor cache included), else
    its flavor's."""
    return int(report['guest_stats'].get(
        'memory_bytes', report['allocated_bytes']))


def reports_at_size(reports, since, size):
    """The ``reports`` (oldest first) a VM made at ``size`` bytes once a
    resize to it was decided at ``since``: from the first collected
    after then at that size up to the first at another size.

    Each report's own memory says which size it measured, not its time:
    the agent stamps a report once it has measured every VM of its
    host, so a resize applied meanwhile precedes the stamp of a report
    taken at the old size, and the next resize the stamp of the last one
    taken at this size."""
    taken = []
    for report in reports:
        if report['collected_at'] <= since:
            continue
        if abs(memory_of_report(report) - size) < SAME_SIZE_BYTES:
            taken.append(report)
        elif taken:
            break
    return taken


def last_report_by(reports, moment):
    """The latest of ``reports`` (oldest first) collected by ``moment``,
    or None."""
    before = [r for r in reports if r['collected_at'] <= moment]
    return before[-1] if before else None


def curve_at(curves, size, methods=optimizer_service.CURVE_METHODS):
    """(miss ratio, method) of the first curve of ``methods`` in a
    report's ``curves`` that covers ``size`` bytes (by default the most
    trusted: a hypervisor-cache curve starts at the memory kept while
    traced), as the policies read it (a step function); (None, None)
    when none does."""
    if size is None:
        return None, None
    for method in methods:
        points = curves.get(method)
        if points and points[0][0] <= size:
            return float(policy_base.curve_from_points(points).at(size)), (
                method)
    return None, None


def target_of(decision, instance_uuid):
    """The target a resize set for a VM, or None if it set none."""
    for action in decision['actions']:
        if (action['kind'] == 'set_target'
                and action['instance_uuid'] == instance_uuid):
            return action['target_bytes']
    return None


@dataclasses.dataclass
class Fidelity:
    """The gaps between the miss ratio each resize predicted for a VM and
    the one measured after it (``gaps``: VM uuid -> [gap, ...])."""

    gaps: dict

    @property
    def overall(self):
        """The mean gap over every resize counted, or None."""
        every = [gap for gaps in self.gaps.values() for gap in gaps]
        return sum(every) / len(every) if every else None

    def by_vm(self):
        """[(uuid, mean gap, resizes counted)], by uuid."""
        return [(uuid, sum(gaps) / len(gaps), len(gaps))
                for uuid, gaps in sorted(self.gaps.items())]


@dataclasses.dataclass
class Run:
    """A run's hosts (db_api.list_hosts), live VMs (db_api.list_instances,
    each with its ``reports`` since the run started, oldest first) and
    the decisions made since then (with details and ``applied_at``),
    oldest first."""

    started_at: datetime.datetime
    hosts: list
    instances: list
    decisions: list

    def applied(self, kind):
        return [d for d in self.decisions
                if d['kind'] == kind and d['applied_at'] is not None]

    def changed(self, instance_uuid):
        """When each applied resize or paging of a VM was applied."""
        return [d['applied_at'] for d in self.decisions
                if d['applied_at'] is not None and (
                    d['kind'] == 'pooling'
                    and d['outputs']['paging']['vm'] == instance_uuid
                    or d['kind'] == 'memory_targets' and any(
                        a['instance_uuid'] == instance_uuid
                        for a in d['actions']))]

    def measured_at_size(self, instance, decision, skip=0):
        """The Measured miss ratio of ``instance`` while ``decision`` held:
        for a resize, over the reports taken at its new size (after the
        first ``skip`` of them); for a paging, over those collected from
        when it was applied until the VM's next resize or paging."""
        if decision['kind'] == 'memory_targets':
            target = target_of(decision, instance['uuid'])
            return measured(reports_at_size(
                instance['reports'], decision['created_at'],
                target)[skip:]) if target is not None else None
        later = [moment for moment in self.changed(instance['uuid'])
                 if moment > decision['applied_at']]
        return measured_after(instance['reports'], decision['applied_at'],
                              min(later) if later else None)

    def fidelity(self):
        """How far the resizes' predictions were from what followed: a
        Fidelity over every VM a resize applied in the run set, each
        measured from its FIDELITY_FROM_REPORT-th report at the new size
        on, while the VM kept it; resizes with fewer reports, or with no
        predicted miss ratio, are not counted."""
        instances = {i['uuid']: i for i in self.instances}
        gaps = collections.defaultdict(list)
        for decision in self.applied('memory_targets'):
            for action in decision['actions']:
                uuid = action['instance_uuid']
                predicted = decision['outputs']['instances'].get(
                    uuid, {}).get('predicted_miss_ratio')
                if (action['kind'] != 'set_target' or predicted is None
                        or uuid not in instances):
                    continue
                after = self.measured_at_size(
                    instances[uuid], decision,
                    skip=FIDELITY_FROM_REPORT - 1)
                if after is not None:
                    gaps[uuid].append(abs(predicted - after.overall))
        return Fidelity(gaps)

    def resizes_by_vm(self, since):
        """{uuid: how many applied resizes set its target at ``since`` or
        later} for every VM a resize of the run set a target for."""
        counts = {}
        for decision in self.applied('memory_targets'):
            for action in decision['actions']:
                if action['kind'] != 'set_target':
                    continue
                uuid = action['instance_uuid']
                counts[uuid] = counts.get(uuid, 0) + (
                    decision['applied_at'] >= since)
        return counts

    def host_names(self):
        return {host['uuid']: host['name'] for host in self.hosts}


def load(context, started_at):
    """The Run of the reports and decisions since ``started_at`` (UTC)."""
    instances = []
    for instance in db_api.list_instances(context):
        reports = [r for r in db_api.list_instance_reports(
            context, instance['uuid']) if r['collected_at'] >= started_at]
        instances.append(dict(instance, reports=reports[::-1]))
    decisions = []
    for listed in decisions_db.list_decisions(context)[::-1]:
        if listed['created_at'] < started_at:
            continue
        decision = decisions_db.get_decision(context, listed['uuid'])
        decision['applied_at'] = applied_at(decision)
        decisions.append(decision)
    return Run(started_at, db_api.list_hosts(context), instances, decisions)


def host_at(run, instance, moment):
    """The name of the host ``instance`` was on at ``moment``: the source
    of the first migration of it applied after then, else its host."""
    for decision in run.applied('migration'):
        move = decision['outputs']['move']
        if move['vm'] == instance['uuid'] and decision['applied_at'] > moment:
            return move['source']
    return run.host_names().get(instance['host_uuid'])


def paging_at(run, instance_uuid, moment):
    """The pooling decision's paging ({resident_bytes, lender,
    lent_bytes, ...}) in force for a VM at ``moment``, or None."""
    current = None
    for decision in run.applied('pooling'):
        paging = decision['outputs']['paging']
        if paging['vm'] == instance_uuid and decision['applied_at'] <= moment:
            current = paging
    return current


def vm_samples(run, instance, rails):
    """The Samples of one VM's reports, oldest first."""
    samples = []
    for report in instance['reports']:
        moment = report['collected_at']
        memory = int(report['guest_stats'].get(
            'memory_bytes', report['allocated_bytes']))
        paging = paging_at(run, instance['uuid'], moment)
        resident = (db_api.resident_of(memory, paging['resident_bytes'])
                    if paging and paging['lender'] else memory)
        samples.append(Sample(
            seconds_since(run.started_at, moment), report['sequence'],
            host_at(run, instance, moment), memory, resident, report['wss'],
            demand.vm_demand(memory, guardrails.demand_wss(
                guardrails.preferred_wss(report['wss']),
                guardrails.preferred_bounds(report['wss'],
                                            report.get('wss_bounds'))),
                rails),
            misses_per_access(report['guest_stats'])))
    return samples


def host_series(run, rails):
    """{host name: [HostPoint, ...]} over the run, one point per host
    report that carried VMs: the sums over the VMs it reported."""
    grouped = collections.defaultdict(list)
    for instance in run.instances:
        for sample in vm_samples(run, instance, rails):
            grouped[sample.host, sample.sequence].append(
                (instance['uuid'], sample))
    series = collections.defaultdict(list)
    for (host, _sequence), members in sorted(
            grouped.items(), key=lambda item: min(
                s.seconds for _, s in item[1])):
        seconds = min(sample.seconds for _, sample in members)
        moment = run.started_at + datetime.timedelta(seconds=seconds)
        lent, borrowed = _lending_at(run, host, moment)
        series[host].append(HostPoint(
            seconds, sum(s.memory for _, s in members),
            sum(s.resident for _, s in members),
            sum(s.demand for _, s in members), lent, borrowed))
    return dict(series)


def _lending_at(run, host, moment):
    """(bytes lent by ``host``'s memory server, bytes borrowed by its
    VMs) at ``moment``, from the pooling decisions applied by then."""
    lent = borrowed = 0
    for instance in run.instances:
        paging = paging_at(run, instance['uuid'], moment)
        if not paging or not paging['lender']:
            continue
        if paging['lender'] == host:
            lent += paging['lent_bytes']
        if host_at(run, instance, moment) == host:
            borrowed += paging['lent_bytes']
    return lent, borrowed


def reporting_in_run(context, host_uuids, started_at):
    """How many live VMs last reported from one of ``host_uuids`` in a
    report collected since ``started_at``. VMs an earlier run left in the
    state directory do not count, even when an agent sends reports it
    kept from then (its outbox) after this run started."""
    count = 0
    for instance in db_api.list_instances(context):
        if instance['host_uuid'] not in host_uuids:
            continue
        newest = db_api.list_instance_reports(context, instance['uuid'],
                                              limit=1)
        if newest and newest[0]['collected_at'] >= started_at:
            count += 1
    return count
