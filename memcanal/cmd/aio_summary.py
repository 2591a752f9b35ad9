"""What memcanal-aio prints of a run: each decision as a line while it
runs, and at the end the summary (memory map, VMs, decisions, pooling),
how many resizes each VM had in the run's last minutes, and the
fidelity: line.
"""

import collections
import datetime

from memcanal.cmd import aio_history
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import pooling as pooling_db
from memcanal.policy import demand
from memcanal.policy import guardrails
from memcanal.service import optimizer as optimizer_service

MIB = 2 ** 20
SETTLED_SECONDS = 120.0
"""The run's last seconds over which a steady workload's VMs are counted
as settled: at most one resize each."""


def state_counts(states):
    return ', '.join('%d %s' % (count, state) for state, count in sorted(
        collections.Counter(states).items()))


def describe_decision(decision, host_names):
    """One line: what a decision changes and what it predicts."""
    outputs = decision['outputs']
    if decision['kind'] == 'migration':
        move = outputs['move']
        return ('migrate %s from %s to %s: %s\'s measured demand predicted '
                'at %.0f %% of its capacity after it, %s\'s at %.0f %%' % (
                    move['vm'][:8], move['source'], move['destination'],
                    move['source'], 100 * move['source_utilization'],
                    move['destination'],
                    100 * move['destination_utilization']))
    if decision['kind'] == 'pooling':
        paging = outputs['paging']
        if not paging['lender']:
            return 'take %s on %s back whole (%d MiB resident)' % (
                paging['vm'][:8], paging['host'],
                paging['resident_bytes'] // MIB)
        return ('page %s on %s out: it keeps %d of its %d MiB resident, '
                '%d MiB lent by %s\'s memory server; predicted misses %.2f '
                'times those at its full memory' % (
                    paging['vm'][:8], paging['host'],
                    paging['resident_bytes'] // MIB,
                    paging['previous_resident_bytes'] // MIB,
                    paging['lent_bytes'] // MIB, paging['lender'],
                    paging['relative_miss_ratio']))
    if decision['kind'] == 'memory_targets':
        return 'resize on %s (%s): %s' % (
            host_names.get(decision['host_uuid'], '?'), decision['policy'],
            '; '.join(
                '%s %d -> %d MiB, predicted miss ratio %s' % (
                    action['instance_uuid'][:8],
                    action['previous_bytes'] // MIB,
                    action['target_bytes'] // MIB, _ratio(
                        outputs['instances'][action['instance_uuid']][
                            'predicted_miss_ratio']))
                for action in decision['actions']
                if action['kind'] == 'set_target'))
    return '%s on %s (%s)' % (decision['kind'], host_names.get(
        decision['host_uuid'], '?'), decision['policy'])


def summary(run, rails, reporting):
    print('\nmemcanal-aio summary: %d VMs reporting in this run' % reporting)
    _hosts_summary(run)
    _vms_summary(run, rails)
    _decisions_summary(run)
    _pooling_summary(run)


def _hosts_summary(run):
    context = memcanal_context.get_admin_context()
    counts = db_api.count_reports(context)
    print('  memory map (MiB): measured demand is the VMs\' working sets '
          'plus their kernels (a sampled one\'s upper bound; its 95 % '
          'interval from the lower bounds to the upper)')
    print('    %-12s %5s %9s %12s %9s %16s %7s %9s  %s' % (
        'host', 'state', 'capacity', 'VMs\' memory', 'resident',
        'measured demand', 'lent', 'borrowed', 'demand 95 %'))
    for h in run.hosts:
        print('    %-12s %5s %9d %12d %9d %9d (%3s) %7d %9d  %s' % (
            h['name'], h['state'], h['capacity_bytes'] // MIB,
            h['allocated_bytes'] // MIB, h['resident_bytes'] // MIB,
            h['demand_bytes'] // MIB, '%.0f%%' % (100 * h['utilization'])
            if h['utilization'] is not None else '-',
            h['lent_bytes'] // MIB, h['borrowed_bytes'] // MIB,
            _interval_mib(h.get('demand_bounds_bytes'))))
    print('  reports stored: %d host reports, %d VM reports, %d rejected' % (
        counts['host_reports'], counts['instance_reports'],
        db_api.count_rejections(context)))


def _vms_summary(run, rails):
    """Every VM's memory against its working sets, and its miss ratio:
    measured by its guest, and as its curve gives it at the memory it
    holds and at its measured demand (its working set and kernel: what
    it would keep, were its memory cut to what it needs). Then what the
    pager's access sampling, the method a real host runs, gives at the
    same sizes: the share of first touches its curve says fault (with
    its band's 95 % interval there), and the faults per second that
    makes. The sampled working set's 95 % interval comes last; the
    measured demand counts its upper bound, as the policies do."""
    names = run.host_names()
    print('  memory MiB: flavor, ->target memcanal set, r: resident when '
          'paged; WSS MiB by estimator (sampled: the pager\'s sample of '
          'first touches); miss ratio measured by the guest and given by '
          'its curve (which one); the sampled curve\'s faults at both '
          '[its 95 % band there]; the sampled WSS\'s 95 % interval')
    print('  %-36s  %-10s  %-19s  %13s  %7s  %7s  %7s  %7s  %s' % (
        'VM', 'host', 'project', 'memory MiB', 'PRL', 'PML', 'ESX',
        'sampled', 'miss ratio: measured, at its memory, at its measured '
        'demand; sampled curve at both; sampled WSS 95 % MiB'))
    for instance in run.instances:
        latest = instance['reports'][-1] if instance['reports'] else None
        wss = latest['wss'] if latest else {}
        bounds = latest.get('wss_bounds', {}) if latest else {}
        curves = latest['mrc'] if latest else {}
        bands = latest.get('mrc_bands', {}) if latest else {}
        stats = latest['guest_stats'] if latest else None
        memory = optimizer_service.memory_of(instance)
        resident = db_api.resident_of(memory,
                                      instance['resident_target_bytes'])
        measured_demand = demand.vm_demand(memory, guardrails.demand_wss(
            guardrails.preferred_wss(wss),
            guardrails.preferred_bounds(wss, bounds)), rails) if latest \
            else None
        print('  %-36s  %-10s  %-19s  %13s  %7s  %7s  %7s  %7s  %s, %s, '
              '%s; %s, %s; %s' % (
                  instance['uuid'], names.get(instance['host_uuid'], '?'),
                  instance['project_id'], _memory(instance, memory,
                                                  resident),
                  *(_mib(wss.get(name))
                    for name in ('prl', 'pml', 'esx', 'sampled')),
                  _ratio(aio_history.misses_per_access(stats)),
                  _curve_ratio(curves, resident),
                  _curve_ratio(curves, measured_demand),
                  _sampled_faults(curves, stats, resident, bands),
                  _sampled_faults(curves, stats, measured_demand, bands),
                  _interval_mib(bounds.get('sampled'))))


def _memory(instance, memory, resident):
    """flavor memory, -> target when memcanal changed it, resident when
    paged: "1024", "1024->1075", "1024 r64"."""
    text = '%d' % (instance['allocated_bytes'] // MIB)
    if memory != instance['allocated_bytes']:
        text += '->%d' % (memory // MIB)
    if resident != memory:
        text += ' r%d' % (resident // MIB)
    return text


def _curve_ratio(curves, size):
    ratio, method = aio_history.curve_at(curves, size)
    return '%.3f %s' % (ratio, method) if ratio is not None else '-'


def _sampled_faults(curves, stats, size, bands=None):
    """The sampled curve at ``size``: the share of first touches that
    fault, its band's 95 % interval there when ``bands`` has one, and
    the faults per second it makes of the touch rate."""
    ratio, _ = aio_history.curve_at(curves, size, methods=('sampled',))
    if ratio is None:
        return '-'
    text = '%.3f' % ratio
    band = (bands or {}).get('sampled')
    if band:
        text += ' [%.3f..%.3f]' % tuple(
            aio_history.curve_at({'sampled': band[edge]}, size,
                                 methods=('sampled',))[0]
            for edge in ('low', 'high'))
    touches = (stats or {}).get('sampled_touches_per_s')
    if touches is None:
        return text
    return '%s (%.0f/s)' % (text, ratio * touches)


def _decisions_summary(run):
    """How many decisions in each state; every migration; every applied
    resize with, for each VM it changed, the miss ratio predicted beside
    the one its guest measured while it kept that size."""
    names = run.host_names()
    print('  decisions in this run: %d (%s)' % (
        len(run.decisions),
        state_counts(d['state'] for d in run.decisions) or 'none yet'))
    for decision in run.applied('migration'):
        print('  migrated: %s' % describe_decision(decision, names))
    instances = {i['uuid']: i for i in run.instances}
    resizes = run.applied('memory_targets')
    if resizes:
        print('  resizes applied, miss ratio predicted and measured while '
              'the VM kept that size:')
    for decision in resizes:
        for action in decision['actions']:
            if (action['kind'] != 'set_target'
                    or action['instance_uuid'] not in instances):
                continue
            predicted = decision['outputs']['instances'][
                action['instance_uuid']]
            print('    [%5.1fs] %s on %s  %5d -> %5d MiB  miss ratio '
                  'predicted %s (%s curve), %s' % (
                      aio_history.seconds_since(run.started_at,
                                                decision['applied_at']),
                      action['instance_uuid'][:8],
                      names.get(decision['host_uuid'], '?'),
                      action['previous_bytes'] // MIB,
                      action['target_bytes'] // MIB,
                      _ratio(predicted['predicted_miss_ratio']),
                      predicted['curve'], _measured(run.measured_at_size(
                          instances[action['instance_uuid']], decision))))


def _measured(measured):
    if measured is None:
        return 'not measured yet'
    text = 'measured %.3f over %d reports (latest %.3f)' % (
        measured.overall, measured.reports, measured.latest)
    if measured.traced != measured.overall:
        text += ', %.3f with the tracing windows\' refills' % (
            measured.traced)
    return text


def _pooling_summary(run):
    """Who lends what to whom, and how each paged VM fares: what it
    keeps resident, its pager's faults in its latest interval and the
    miss ratio its paging curve gives at its resident size."""
    context = memcanal_context.get_admin_context()
    instances = {i['uuid']: i for i in run.instances}
    for server in pooling_db.list_memory_servers(context):
        for lease in server['leases']:
            instance = instances.get(lease['instance_uuid'])
            if instance is None:
                continue
            report = instance['reports'][-1] if instance['reports'] else {}
            stats = report.get('guest_stats', {})
            resident = db_api.resident_of(
                optimizer_service.memory_of(instance),
                instance['resident_target_bytes'])
            paging, _ = aio_history.curve_at(report.get('mrc', {}), resident,
                                             methods=('paging',))
            print('  pooled: %s lends %d MiB to %s on %s, which keeps %d of '
                  'its %d MiB resident; %s pager faults in its last '
                  'interval, miss ratio at that size %s (paging curve)' % (
                      server['host_name'], lease['lent_bytes'] // MIB,
                      lease['instance_uuid'], lease['borrower_host_name'],
                      resident // MIB, instance['allocated_bytes'] // MIB,
                      '%d' % stats['paging_faults']
                      if 'paging_faults' in stats else '-',
                      _ratio(paging)))


def _ratio(value):
    return '%.3f' % value if value is not None else '-'


def _mib(size):
    return '%.1f' % (size / MIB) if size is not None else '-'


def _interval_mib(bounds):
    """A 95 % interval, [low, high] bytes, as ``low..high`` MiB; '-'
    without one."""
    if bounds is None:
        return '-'
    return '%.1f..%.1f' % (bounds[0] / MIB, bounds[1] / MIB)


def settled_line(run, ended_at, seconds=SETTLED_SECONDS):
    """How many resizes each VM a resize of the run changed had in its
    last ``seconds`` (up to ``ended_at``), and whether that is at most one
    each, as a workload that does not change should have once its VMs
    reached their sizes."""
    counts = run.resizes_by_vm(
        ended_at - datetime.timedelta(seconds=seconds))
    if not counts:
        return 'settled: no resize in the run'
    return ('settled: %s: resizes in the last %.0f s by VM: %s' % (
        'yes' if max(counts.values()) <= 1 else 'no', seconds,
        ', '.join('%s %d' % (uuid[:8], count)
                  for uuid, count in sorted(counts.items()))))


def fidelity_line(fidelity):
    """The run's last line: the mean gap between the miss ratio each
    resize predicted and the one measured from the
    aio_history.FIDELITY_FROM_REPORT-th report at the new size on,
    overall and by VM (with how many resizes each)."""
    if fidelity.overall is None:
        return ('fidelity: - (no resize held for %d reports)'
                % aio_history.FIDELITY_FROM_REPORT)
    by_vm = fidelity.by_vm()
    return ('fidelity: %.3f mean |predicted - measured| miss ratio over %d '
            'resizes, measured from the %s report at the new size on; by '
            'VM: %s' % (
                fidelity.overall, sum(count for _, _, count in by_vm),
                _ordinal(aio_history.FIDELITY_FROM_REPORT),
                ', '.join('%s %.3f (%d)' % (uuid[:8], gap, count)
                          for uuid, gap, count in by_vm)))


def _ordinal(number):
    return '%d%s' % (number, {1: 'st', 2: 'nd', 3: 'rd'}.get(number, 'th'))
