"""memcanal's migration planner against OpenStack Watcher 17's strategies.

    bash tools/install-watcher.sh          # once: .venv-watcher
    .venv-watcher/bin/python benchmarks/watcher_compare.py
    .venv-watcher/bin/python benchmarks/watcher_compare.py --hosts 20 --vms 10
    .venv/bin/python benchmarks/watcher_compare.py --scale   # no Watcher

A cloud of workloads (benchmarks/watcher_replay.py): ``--hosts`` hosts
of ``--vms`` VMs (flavors of 2, 4 and 8 GB), each host's capacity 3/4
of its VMs' flavors; on the ``--hot`` share of hosts the VMs'
footprints are 60-100 % of their memory, elsewhere 15-60 %. The
planners get what an agent measures of each VM alone: its working set,
its demand (``demand.vm_demand``) and its LRU miss-ratio curve
(``--points`` points).

memcanal.policy.migration.plan, capped at each ``--caps`` migrations,
and three Watcher strategies plan on it: ``workload_balance`` (metrics
instance_ram_usage, threshold 90 %) for one audit, as Watcher runs it,
and audited again on its own result until it stops or reaches the cap;
``vm_workload_consolidation``; with ``--strategies``, ``basic``
(CPU-based; each VM is given a CPU use of 10-60 % of its two vCPUs).
Watcher sees the same hosts through its ModelRoot (a node's memory is
the host's capacity, its memory_ratio the shape's: ``--shapes`` sets
placement's allocation ratio, the cloud is the same) and a
DataSourceBase serving the measured demand as instance RAM usage.
memcanal's planner reads measured demand only; placement, holding the
shape's ratio, would refuse some of its moves (a live migration claims
the flavor on the destination), so its plan is also replayed without
them.

Every plan is scored twice. By the planners' own yardstick,
migration.score: hosts above 90 % after, VMs newly below their
predicted miss bound, moves the nova filter (demand.accepts) would
refuse; and the moves placement at the shape's ratio would refuse.
Then replayed (watcher_replay.replay): the workloads run on the hosts
the plan leaves them on, sharing each host's memory in one LRU, and
what they do is measured: hosts whose measured demand is above 90 % and
above their capacity, VMs whose miss ratio exceeds 1.05 times their own
at their flavor size alone (all of them, and those not past it without
a plan), and the miss ratio of all references. One table per shape and
cap, each cell the ``--seeds`` in turn, then how many times longer
re-audited workload_balance planned than memcanal.

``--scale`` times memcanal's planner alone on 1,000 hosts x 30 VMs x
256-point synthetic curves (5 % hot), with no cap and with the default
one.
"""

import argparse
import collections
import copy
import dataclasses
import sys
import time
import uuid

import numpy as np

from memcanal.estimation import mrc
from memcanal.policy import demand
from memcanal.policy import migration

import watcher_replay

MB = 2 ** 20
GB = 2 ** 30
NOW = 100_000.0
FLAVORS_GB = (2, 4, 8)
COLD_MISSES = 0.01


def progress(message):
    print(message, file=sys.stderr, flush=True)


def curve(rng, flavor, wss, points):
    """Misses falling from 1 to a cold-miss floor at the working set,
    convex (a few hot pages take most references)."""
    sizes = np.unique(np.linspace(0, 1.25 * flavor, points).astype(np.int64))
    power = rng.uniform(1.0, 3.0)
    ratios = COLD_MISSES + (1 - COLD_MISSES) * np.clip(
        1 - sizes / wss, 0, None) ** power
    return mrc.MissRatioCurve(sizes, ratios, references=0)


def cluster(hosts, vms, points=256, hot=0.15, seed=1):
    rng = np.random.default_rng(seed)
    hot_hosts = set(rng.choice(hosts, max(1, int(round(hot * hosts))),
                               replace=False).tolist())
    built = []
    for h in range(hosts):
        instances = []
        low, high = (0.55, 0.95) if h in hot_hosts else (0.15, 0.6)
        for v in range(vms):
            flavor = int(rng.choice(FLAVORS_GB)) * GB
            wss = int(flavor * rng.uniform(low, high))
            instances.append(migration.Instance(
                'h%04d-vm%02d' % (h, v), flavor,
                demand.vm_demand(flavor, wss), flavor,
                curve(rng, flavor, wss, points)))
        capacity = int(0.75 * sum(vm.flavor_bytes for vm in instances))
        load = sum(vm.demand_bytes for vm in instances) / capacity
        built.append(migration.Host(
            'h%04d' % h, capacity, tuple(instances), 'nova',
            NOW - 3600 if load > demand.DEFAULT_THRESHOLD else None))
    return built


def run_memcanal(hosts, options):
    start = time.perf_counter()
    plan = migration.plan(hosts, NOW, options=options)
    return list(plan.moves), time.perf_counter() - start


# Watcher, fed the same cluster.

class Strategies:
    """Watcher 17's strategies on one cluster state, offline."""

    def __init__(self, hosts, memory_ratio=2.0):
        from oslo_config import cfg
        cfg.CONF([], project='watcher')
        from watcher.common import utils
        from watcher.decision_engine.loading import default
        from watcher.decision_engine.model import element
        from watcher.decision_engine.model import model_root
        self.utils = utils
        self.loader = default.DefaultStrategyLoader()
        self.model = model_root.ModelRoot()
        self.ram_mb, self.cpu_percent = {}, {}
        rng = np.random.default_rng(0)
        project = str(uuid.UUID(int=1))
        for h, host in enumerate(hosts):
            node = element.ComputeNode(
                uuid=str(uuid.UUID(int=10 ** 6 + h)), hostname=host.name,
                memory=host.capacity_bytes // MB, memory_mb_reserved=0,
                disk=10 ** 5, disk_gb_reserved=0,
                vcpus=4 * max(len(host.instances), 1), vcpu_reserved=0,
                memory_ratio=memory_ratio, vcpu_ratio=1.0, disk_ratio=1.0,
                status=element.ServiceState.ENABLED.value,
                state=element.ServiceState.ONLINE.value,
                disabled_reason=None)
            self.model.add_node(node)
            for v, vm in enumerate(host.instances):
                instance = element.Instance(
                    uuid=str(uuid.UUID(int=h * 10 ** 4 + v + 1)),
                    name=vm.name, memory=vm.flavor_bytes // MB, disk=10,
                    vcpus=2, state=element.InstanceState.ACTIVE.value,
                    project_id=project, metadata={}, host=host.name,
                    hypervisor_hostname=host.name)
                self.model.add_instance(instance)
                self.model.map_instance(instance, node)
                self.ram_mb[instance.uuid] = vm.demand_bytes / MB
                self.cpu_percent[instance.uuid] = rng.uniform(10, 60)

    def run(self, name, model=None, **parameters):
        """One audit: (moves, seconds, the model after it, other
        actions)."""
        strategy = self.loader.load(name, osc=None)
        strategy._compute_model = copy.deepcopy(model or self.model)
        strategy._datasource_backend = _datasource(
            self.ram_mb, self.cpu_percent, strategy._compute_model)
        values = {key: spec['default'] for key, spec in
                  strategy.get_schema().get('properties', {}).items()
                  if 'default' in spec}
        values.update(parameters)
        strategy.input_parameters = self.utils.Struct(values)
        start = time.perf_counter()
        solution = strategy.execute()
        seconds = time.perf_counter() - start
        moves, other = [], 0
        for action in solution.actions:
            p = action['input_parameters']
            if action['action_type'] == 'migrate':
                moves.append((p['resource_name'], p['source_node'],
                              p['destination_node']))
            else:
                other += 1
        return moves, seconds, strategy.compute_model, other

    def repeated(self, name, audits, **parameters):
        """Audit again on each audit's result until no move or
        ``audits`` moves: each audit's (moves, seconds)."""
        model, done = None, []
        while sum(len(moves) for moves, _ in done) < audits:
            moves, seconds, model, _ = self.run(name, model, **parameters)
            done.append((moves, seconds))
            if not moves:
                break
        return done


def first(audits, cap):
    """The first ``cap`` moves of ``audits`` ((moves, seconds) each, in
    order) and the seconds of the audits that planned them."""
    moves, seconds = [], 0.0
    for planned, spent in audits:
        if len(moves) >= cap:
            break
        moves += planned
        seconds += spent
    return moves[:cap], seconds


def _datasource(ram_mb, cpu_percent, model):
    """A Watcher datasource serving measured demand as RAM usage (and
    a CPU usage of its own per VM)."""
    from watcher.decision_engine.datasources import base

    class Measured(base.DataSourceBase):
        NAME = 'memcanal'
        METRIC_MAP = dict(base.DataSourceBase.METRIC_MAP, **{
            metric: metric for metric in (
                'host_cpu_usage', 'host_ram_usage', 'instance_cpu_usage',
                'instance_ram_usage', 'instance_ram_allocated',
                'instance_root_disk_size')})

        def query_retry_reset(self, exception_instance):
            pass

        def list_metrics(self):
            return {m for m, v in self.METRIC_MAP.items() if v}

        def check_availability(self):
            return 'available'

        def _statistic_aggregation(self, resource=None, resource_type=None,
                                   meter_name=None, period=300,
                                   aggregate='mean', granularity=300):
            return getattr(self, 'get_' + meter_name)(
                resource, period, aggregate, granularity)

        def statistic_series(self, *args, **kwargs):
            return {}

        def get_host_cpu_usage(self, resource, period, aggregate,
                               granularity=None):
            used = sum(self.get_instance_cpu_usage(i, period, aggregate)
                       * i.vcpus / 100
                       for i in model.get_node_instances(resource))
            return 100.0 * used / resource.vcpus

        def get_host_ram_usage(self, resource, period, aggregate,
                               granularity=None):
            return 1024.0 * sum(ram_mb[i.uuid]
                                for i in model.get_node_instances(resource))

        def get_instance_cpu_usage(self, resource, period, aggregate,
                                   granularity=None):
            return cpu_percent[resource.uuid]

        def get_instance_ram_usage(self, resource, period, aggregate,
                                   granularity=None):
            return ram_mb[resource.uuid]

        def get_instance_ram_allocated(self, resource, period, aggregate,
                                       granularity=None):
            return float(resource.memory)

        def get_instance_root_disk_size(self, resource, period, aggregate,
                                        granularity=None):
            return float(resource.disk)

        def _none(self, *args, **kwargs):
            return None

        get_host_outlet_temp = get_host_inlet_temp = _none
        get_host_airflow = get_host_power = _none
        get_instance_l3_cache_usage = _none

    return Measured()


COLUMNS = (
    ('migrations', '%d'), ('GiB copied', '%.0f'), ('planning (s)', '%.3f'),
    ('own: hosts > 90 %', '%d'), ('own: VMs pushed past bound', '%d'),
    ('own: moves the filter refuses', '%d'),
    ('moves placement refuses', '%d'), ('replay: hosts > 90 %', '%d'),
    ('replay: hosts > 100 %', '%d'), ('replay: VMs past bound', '%d'),
    ('replay: newly past', '%d'), ('replay: miss ratio (%)', '%.2f'))
RAM = dict(metrics='instance_ram_usage', threshold=90.0)


def grade(cloud, moves, seconds, options, memory_ratio, before):
    """A plan's values in COLUMNS order: what it costs, the planners'
    own score (migration.score), the moves placement refuses at
    ``memory_ratio``, and its replay against the one of no plan,
    ``before``."""
    own = migration.score(cloud.hosts, moves, options)
    outcome = watcher_replay.replay(cloud, moves, options.delta,
                                    options.threshold)
    memory = {vm.name: vm.memory_bytes for host in cloud.hosts
              for vm in host.instances}
    return (len(moves), sum(memory[watcher_replay.move_fields(move)[0]]
                                 for move in moves) / GB,
            seconds, len(own.hot_after), len(own.pushed_past_bound),
            len(own.refused),
            len(watcher_replay.placement(cloud.hosts, moves,
                                         memory_ratio)[1]),
            len(outcome.hosts_over_threshold), len(outcome.hosts_short),
            len(outcome.past_bound),
            len(set(outcome.past_bound) - set(before.past_bound)),
            100 * outcome.miss_ratio)


def watcher_plans(watcher, cap, strategies):
    """Watcher's plans by label: a function of the cap giving (moves,
    seconds)."""
    plans = {}
    if 'workload_balance' in strategies:
        progress('  workload_balance, one audit')
        once = watcher.run('workload_balance', **RAM)[:2]
        plans['workload_balance (1 audit)'] = lambda _cap, once=once: once
        progress('  workload_balance, audited again up to %d moves' % cap)
        audits = watcher.repeated('workload_balance', cap, **RAM)
        plans['workload_balance (re-audited)'] = (
            lambda cap, audits=audits: first(audits, cap))
    for name in ('vm_workload_consolidation', 'basic'):
        if name in strategies:
            progress('  %s' % name)
            plan = watcher.run(name)[:2]
            plans[name] = lambda _cap, plan=plan: plan
    return plans


def compare(args):
    shapes = [(name, float(ratio)) for name, ratio in
              (shape.split('=') for shape in args.shapes)]
    rows = collections.defaultdict(list)
    hot = []
    for seed in args.seeds:
        progress('seed %d: %d hosts x %d VMs of workloads' % (
            seed, args.hosts, args.vms))
        cloud = watcher_replay.build(
            args.hosts, args.vms, args.hot, seed, args.unit_mb * MB,
            args.warm, args.window, args.points, progress=progress)
        hot.append(len(migration.score(cloud.hosts, []).hot_before))
        progress('  replaying no plan')
        before = watcher_replay.replay(cloud, [])
        memcanal = {cap: run_memcanal(cloud.hosts, migration.Options(
            max_concurrent=cap)) for cap in args.caps}
        for shape, ratio in shapes:
            progress('seed %d, %s (memory_ratio %g): Watcher' % (
                seed, shape, ratio))
            plans = watcher_plans(Strategies(cloud.hosts, ratio),
                                  max(args.caps), args.strategies)
            for cap in args.caps:
                progress('  replaying the plans of cap %d' % cap)
                options = migration.Options(max_concurrent=cap)
                moves, seconds = memcanal[cap]
                admitted = watcher_replay.placement(cloud.hosts, moves,
                                                    ratio)[0]
                # The planner told placement's ratio, as the service
                # tells it the ratio it set (migration.Host).
                aware = run_memcanal([dataclasses.replace(
                    host, allocation_ratio=ratio) for host in cloud.hosts],
                    options)
                planned = [('no migration', ([], 0.0)),
                           ('memcanal', (moves, seconds)),
                           ('memcanal, placement-admitted moves only',
                            (admitted, seconds)),
                           ('memcanal, knowing placement\'s ratio',
                            aware)] + [
                    (label, plan(cap)) for label, plan in plans.items()]
                for label, (moves, seconds) in planned:
                    rows[shape, cap, label].append(grade(
                        cloud, moves, seconds, options, ratio, before))
    print('%d hosts x %d VMs (%s MiB pages, %d-point curves), seeds %s; '
          'hosts above 90 %% before: %s' % (
              args.hosts, args.vms, args.unit_mb, args.points,
              ' / '.join(map(str, args.seeds)), ' / '.join(map(str, hot))))
    for shape, ratio in shapes:
        for cap in args.caps:
            print()
            print('%s (placement memory_ratio %g), cap %d migrations; each '
                  'cell seeds %s' % (shape, ratio, cap,
                                     ' / '.join(map(str, args.seeds))))
            print(table([(label, values) for (s, c, label), values
                         in rows.items() if (s, c) == (shape, cap)]))
            balance = rows.get((shape, cap, 'workload_balance (re-audited)'))
            if balance:
                print('planning, workload_balance (re-audited) over '
                      'memcanal: %s' % ' / '.join(
                          '%.0fx' % (theirs[2] / ours[2]) for theirs, ours
                          in zip(balance, rows[shape, cap, 'memcanal'])))


def table(rows):
    """A markdown table of ``rows`` ((planner, values per seed)), each
    cell the seeds' values in turn."""
    lines = ['| planner | ' + ' | '.join(name for name, _ in COLUMNS)
             + ' |', '|' + '---|' * (len(COLUMNS) + 1)]
    for label, values in rows:
        cells = [' / '.join(form % seed[column] for seed in values)
                 for column, (_, form) in enumerate(COLUMNS)]
        lines.append('| %s | %s |' % (label, ' | '.join(cells)))
    return '\n'.join(lines)


def scale(args):
    progress('building 1000 hosts x 30 VMs x 256-point curves')
    start = time.perf_counter()
    hosts = cluster(1000, 30, 256, hot=0.05, seed=args.seed)
    progress('built in %.1f s; planning' % (time.perf_counter() - start))
    for label, cap in (('no cap', 10 ** 6),
                       ('cap %d' % migration.DEFAULT_MAX_CONCURRENT,
                        migration.DEFAULT_MAX_CONCURRENT)):
        options = migration.Options(max_concurrent=cap)
        times = []
        for _ in range(args.repeat):
            moves, seconds = run_memcanal(hosts, options)
            times.append(seconds)
        result = migration.score(hosts, moves, options)
        print('1000 hosts x 30 VMs x 256 points, %s: %d moves, %d of %d hot '
              'hosts left above 90 %%; plan %.3f s (median of %d, max %.3f)'
              % (label, len(moves), len(result.hot_after),
                 len(result.hot_before), float(np.median(times)),
                 args.repeat, max(times)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=100)
    parser.add_argument('--vms', type=int, default=30)
    parser.add_argument('--points', type=int, default=256)
    parser.add_argument('--hot', type=float, default=0.25,
                        help='share of hosts made hot')
    parser.add_argument('--seeds', type=int, nargs='+', default=[1, 2, 3])
    parser.add_argument('--caps', type=int, nargs='+', default=[20, 60],
                        help="memcanal's max_concurrent, and the moves "
                        "workload_balance is audited again up to")
    parser.add_argument('--shapes', nargs='+',
                        default=['tight=1.4', 'memcanal-max=1.5',
                                 'loose=2.0'],
                        help="NAME=RATIO: Watcher's nodes' memory "
                        "allocation ratio")
    parser.add_argument('--strategies', nargs='+', default=[
        'workload_balance', 'vm_workload_consolidation'],
        help="Watcher's: workload_balance, vm_workload_consolidation, "
        "basic (CPU-based, slow: 13 s at 100 hosts)")
    parser.add_argument('--unit-mb', type=int,
                        default=watcher_replay.UNIT // MB,
                        help='page size of the replay')
    parser.add_argument('--warm', type=float,
                        default=watcher_replay.WARM_SECONDS,
                        help='seconds before the planning window')
    parser.add_argument('--window', type=float,
                        default=watcher_replay.WINDOW_SECONDS,
                        help='seconds of the planning and scoring windows')
    parser.add_argument('--seed', type=int, default=1,
                        help='the --scale cluster')
    parser.add_argument('--scale', action='store_true',
                        help="time memcanal's planner on 1,000 hosts")
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    if args.scale:
        scale(args)
    else:
        compare(args)


if __name__ == '__main__':
    main()
