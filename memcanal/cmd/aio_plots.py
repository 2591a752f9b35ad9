"""PNG plots of a memcanal-aio run (matplotlib, Agg: no display).

Three figures, from what the service stored (aio_history):

- hosts.png: each host's memory over the run: its capacity, its VMs'
  memory, what they hold resident, their measured demand, and what its
  memory server lends and its VMs borrow; migrations and pagings applied
  are marked;
- vms.png: each VM's working set by estimator over the run (the
  pager's sampled one beside PRL's, PML's and ESX's), with its memory
  (the target memcanal set), its flavor memory and what it keeps
  resident when paged;
- curves.png: the miss-ratio curve of every VM a decision resized or
  paged, with its size before and after and the miss ratio predicted
  there beside the one measured while it kept that size, and the
  VM's sampled curve then (the share of its first touches that fault).
"""

import math
import os

from matplotlib.backends import backend_agg
from matplotlib import figure
from matplotlib import ticker

from memcanal.cmd import aio_history
from memcanal.service import optimizer as optimizer_service

MIB = 2 ** 20
WSS_STYLES = (('prl', 'PRL WSS', 'tab:green'), ('pml', 'PML WSS', 'tab:olive'),
              ('esx', 'ESX WSS', 'tab:cyan'),
              ('sampled', 'sampled WSS', 'tab:brown'))
DECISION_COLORS = {'migration': 'tab:red', 'pooling': 'tab:purple',
                   'memory_targets': 'tab:orange'}


def _mib(values):
    return [value / MIB for value in values]


def _mib_axis(ax, linear_below):
    """A y axis in MiB, linear below ``linear_below`` (working sets of a
    few MiB, zeros) and logarithmic above (memory of GiB), ticked at
    powers of four in plain numbers."""
    ax.set_yscale('symlog', linthresh=linear_below)
    ax.set_ylim(bottom=0)
    top = ax.get_ylim()[1]
    ax.set_yticks([0] + [4 ** k for k in range(1, 10)
                         if linear_below <= 4 ** k <= top])
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter('%d'))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.set_ylabel('MiB', fontsize=8)


def _grid(count, columns):
    columns = max(1, min(columns, count))
    return math.ceil(count / columns), columns


def _figure(count, columns, width=5.0, height=3.4):
    rows, columns = _grid(count, columns)
    fig = figure.Figure(figsize=(width * columns, height * rows),
                        layout='constrained')
    backend_agg.FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for unused in axes[count:]:
        unused.set_visible(False)
    return fig, axes[:count]


def _mark_decisions(axes, run, host):
    """Vertical lines where migrations and pagings concerning ``host``
    were applied."""
    for decision in run.decisions:
        if decision['applied_at'] is None:
            continue
        outputs = decision['outputs']
        if decision['kind'] == 'migration':
            concerned = {outputs['move']['source'],
                         outputs['move']['destination']}
        elif decision['kind'] == 'pooling':
            concerned = {outputs['paging']['host'],
                         outputs['paging']['lender']}
        else:
            concerned = {run.host_names().get(decision['host_uuid'])}
        if host in concerned:
            axes.axvline(aio_history.seconds_since(
                run.started_at, decision['applied_at']),
                color=DECISION_COLORS.get(decision['kind'], 'grey'),
                linestyle=':', linewidth=1)


def plot_hosts(run, rails, path):
    """The hosts' figure; None when no host reported a VM."""
    series = aio_history.host_series(run, rails)
    hosts = [host for host in run.hosts if host['name'] in series]
    if not hosts:
        return None
    fig, axes = _figure(len(hosts), 2, width=6.5, height=4.2)
    for ax, host in zip(axes, hosts):
        points = series[host['name']]
        seconds = [p.seconds for p in points]
        ax.axhline(host['capacity_bytes'] / MIB, color='black',
                   linestyle='--', label='capacity')
        ax.step(seconds, _mib(p.memory for p in points), where='post',
                color='tab:blue', label="VMs' memory")
        ax.step(seconds, _mib(p.resident for p in points), where='post',
                color='tab:blue', linestyle='-.', label='resident')
        ax.step(seconds, _mib(p.demand for p in points), where='post',
                color='tab:orange', linewidth=2, label='measured demand')
        if any(p.lent for p in points):
            ax.step(seconds, _mib(p.lent for p in points), where='post',
                    color='tab:purple', label='lent to other hosts')
        if any(p.borrowed for p in points):
            ax.step(seconds, _mib(p.borrowed for p in points), where='post',
                    color='tab:purple', linestyle='-.',
                    label='borrowed from other hosts')
        _mark_decisions(ax, run, host['name'])
        _mib_axis(ax, 64)
        ax.set_title('%s: capacity %d MiB, %d VMs at the end' % (
            host['name'], host['capacity_bytes'] // MIB,
            host['instance_count']))
        ax.set_xlabel('seconds into the run (dotted: migration red, '
                      'paging purple, resize orange)', fontsize=8)
        ax.legend(fontsize=7, loc='best')
    fig.suptitle('Hosts: capacity, memory allocated, measured demand, '
                 'pooled memory')
    fig.savefig(path, dpi=90)
    return path


def plot_vms(run, rails, path):
    """The VMs' figure; None when no VM reported."""
    names = run.host_names()
    instances = [i for i in run.instances if i['reports']]
    if not instances:
        return None
    fig, axes = _figure(len(instances), 4, width=4.2, height=3.2)
    for ax, instance in zip(axes, instances):
        samples = aio_history.vm_samples(run, instance, rails)
        seconds = [s.seconds for s in samples]
        ax.axhline(instance['allocated_bytes'] / MIB, color='black',
                   linestyle='--', linewidth=1, label='flavor memory')
        ax.step(seconds, _mib(s.memory for s in samples), where='post',
                color='tab:blue', label='memory (target)')
        if any(s.resident != s.memory for s in samples):
            ax.step(seconds, _mib(s.resident for s in samples),
                    where='post', color='tab:purple', linestyle='-.',
                    label='resident (paged)')
        for name, label, color in WSS_STYLES:
            points = [(s.seconds, s.wss[name]) for s in samples
                      if s.wss.get(name) is not None]
            if points:
                ax.plot([t for t, _ in points], _mib(w for _, w in points),
                        marker='.', color=color, label=label)
        _mib_axis(ax, 16)
        ax.set_title('%s on %s' % (instance['uuid'][:8],
                                   names.get(instance['host_uuid'], '?')),
                     fontsize=9)
        ax.set_xlabel('seconds', fontsize=8)
        ax.legend(fontsize=6, loc='best')
    fig.suptitle("VMs: working-set size against memory")
    fig.savefig(path, dpi=90)
    return path


def changed_vms(run):
    """{VM uuid: (decision, curve method, curve points, size before,
    size after, predicted miss ratio)} of the last applied memory-target
    or pooling decision that changed each VM."""
    changed = {}
    for decision in run.decisions:
        if decision['applied_at'] is None:
            continue
        if decision['kind'] == 'memory_targets':
            changed.update(_resized(decision))
        elif decision['kind'] == 'pooling':
            changed.update(_paged(run, decision))
    return changed


def _resized(decision):
    for action in decision['actions']:
        if action['kind'] != 'set_target':
            continue
        uuid = action['instance_uuid']
        inputs = decision['inputs']['instances'][uuid]
        yield uuid, (decision, inputs['curve'], inputs['mrc'],
                     action['previous_bytes'], action['target_bytes'],
                     decision['outputs']['instances'][uuid][
                         'predicted_miss_ratio'])


def _paged(run, decision):
    """A paged VM's curve is the one of its last report before the
    decision: pooling decisions do not keep their inputs' curves."""
    paging = decision['outputs']['paging']
    reports = {i['uuid']: i['reports'] for i in run.instances}
    before = aio_history.last_report_by(reports.get(paging['vm'], ()),
                                        decision['created_at'])
    if before is None:
        return
    method, points = optimizer_service.first_curve(before['mrc'])
    predicted, _ = aio_history.curve_at(before['mrc'],
                                        paging['resident_bytes'])
    yield paging['vm'], (decision, method, points,
                         paging['previous_resident_bytes'],
                         paging['resident_bytes'], predicted)


def _step(ax, points, end, **style):
    """A curve's points as steps; past its last point a curve keeps its
    last miss ratio, drawn on to ``end`` bytes."""
    points = list(points) + [[max(end, points[-1][0]) * 1.05,
                              points[-1][1]]]
    ax.step(_mib(size for size, _ in points),
            [ratio for _, ratio in points], where='post',
            marker='.' if len(points) < 4 else None, **style)


def sampled_curve(instance, decision):
    """The sampled curve of the VM's last report before ``decision``
    was made, or None."""
    report = aio_history.last_report_by(instance['reports'],
                                        decision['created_at'])
    return report['mrc'].get('sampled') if report else None


def plot_curves(run, path):
    """The curves of the VMs decisions changed; None when none did."""
    changed = changed_vms(run)
    if not changed:
        return None
    instances = {i['uuid']: i for i in run.instances}
    fig, axes = _figure(len(changed), 3, width=4.6, height=3.4)
    for ax, (uuid, (decision, method, points, before, after,
                    predicted)) in zip(axes, sorted(changed.items())):
        if points:
            _step(ax, points, max(before, after), color='tab:blue',
                  label='%s curve' % method)
        sampled = sampled_curve(instances[uuid], decision)
        if sampled and method != 'sampled':
            _step(ax, sampled, max(before, after), color='tab:brown',
                  linestyle='--', label='sampled curve (first touches)')
        ax.axvline(before / MIB, color='grey', linestyle='--',
                   label='before: %d MiB' % (before // MIB))
        ax.axvline(after / MIB, color='tab:orange',
                   label='after: %d MiB' % (after // MIB))
        if predicted is not None:
            ax.plot([after / MIB], [predicted], 'o', color='tab:orange',
                    label='predicted %.3f' % predicted)
        measured = run.measured_at_size(instances[uuid], decision)
        if measured is not None:
            ax.plot([after / MIB], [measured.overall], 'x', color='black',
                    markersize=9, label='measured %.3f (latest %.3f)'
                    % (measured.overall, measured.latest))
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel('memory (MiB)', fontsize=8)
        ax.set_ylabel('miss ratio', fontsize=8)
        ax.set_title('%s: %s' % (uuid[:8], 'resized' if decision['kind']
                                 == 'memory_targets' else 'paged'),
                     fontsize=9)
        ax.legend(fontsize=6, loc='best')
    fig.suptitle('Miss-ratio curves of the VMs decisions changed')
    fig.savefig(path, dpi=90)
    return path


def write_plots(run, directory, rails):
    """Draw ``run`` (an aio_history.Run) into ``directory``; returns the
    PNG paths written."""
    written = [plot_hosts(run, rails, os.path.join(directory, 'hosts.png')),
               plot_vms(run, rails, os.path.join(directory, 'vms.png')),
               plot_curves(run, os.path.join(directory, 'curves.png'))]
    return [path for path in written if path is not None]
