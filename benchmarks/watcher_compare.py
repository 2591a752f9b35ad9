"""memcanal's migration planner against OpenStack Watcher 17's strategies.

    bash tools/install-watcher.sh          # once: .venv-watcher
    .venv-watcher/bin/python benchmarks/watcher_compare.py
    .venv-watcher/bin/python benchmarks/watcher_compare.py --hosts 100 --vms 30
    .venv/bin/python benchmarks/watcher_compare.py --scale   # no Watcher

One cluster state: ``--hosts`` hosts of ``--vms`` VMs (flavors of 2, 4
and 8 GB), each host's capacity 3/4 of its VMs' flavors; on the
``--hot`` share of hosts the VMs' working sets are 55-95 % of their
flavor (the host above U-tube's 90 %, for an hour), elsewhere 15-60 %.
A VM's measured demand is its working set plus the 64 MB kernel
(``demand.vm_demand``), its miss-ratio curve (``--points`` points) falls
from 1 to a cold-miss floor at its working set.

memcanal.policy.migration.plan and three Watcher strategies plan on it:
``workload_balance`` (metrics instance_ram_usage, threshold 90 %) for
one audit, as Watcher runs it, and audited again on its own result until
it stops or reaches the planner's cap; ``vm_workload_consolidation``;
``basic`` (CPU-based; each VM is given a CPU use of 10-60 % of its two
vCPUs). Watcher sees the same hosts through its ModelRoot (a node's
memory is the host's capacity, its memory_ratio ``--memory-ratio``, 2 by
default, so that flavors overcommit as far as placement lets them) and a
DataSourceBase serving the measured demand as instance RAM usage. Every plan is scored with migration.score: demand
taken off the hot hosts, hosts above 90 % after, VMs newly below their
miss bound (on a host, a VM gets min(flavor, demand * capacity / host
demand)), moves the nova filter (demand.accepts) would refuse, and
migrations used.

``--scale`` times memcanal's planner alone on 1,000 hosts x 30 VMs x
256-point curves (5 % hot), with no cap and with the default one.
"""

import argparse
import copy
import sys
import time
import uuid

import numpy as np

from memcanal.estimation import mrc
from memcanal.policy import demand
from memcanal.policy import migration

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
        ``audits`` moves."""
        model, moves, seconds = None, [], 0.0
        while len(moves) < audits:
            more, spent, model, _ = self.run(name, model, **parameters)
            moves += more
            seconds += spent
            if not more:
                break
        return moves, seconds


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


def compare(args):
    options = migration.Options(max_concurrent=args.max_concurrent)
    progress('building %d hosts x %d VMs' % (args.hosts, args.vms))
    hosts = cluster(args.hosts, args.vms, args.points, args.hot, args.seed)
    plans = [('memcanal', *run_memcanal(hosts, options))]
    watcher = Strategies(hosts, args.memory_ratio)
    ram = dict(metrics='instance_ram_usage', threshold=90.0)
    for label, run in [
            ('workload_balance (1 audit)',
             lambda: watcher.run('workload_balance', **ram)[:2]),
            ('workload_balance (re-audited)',
             lambda: watcher.repeated('workload_balance',
                                      args.max_concurrent, **ram)),
            ('vm_workload_consolidation',
             lambda: watcher.run('vm_workload_consolidation')[:2]),
            ('basic', lambda: watcher.run('basic')[:2])]:
        progress('watcher %s' % label)
        plans.append((label, *run()))
    hot = len(migration.score(hosts, [], options).hot_before)
    print('%d hosts x %d VMs, %d-point curves, %d hosts above %.0f %% '
          '(memcanal cap %d migrations)' % (
              args.hosts, args.vms, args.points, hot,
              100 * options.threshold, args.max_concurrent))
    header = ('| planner | migrations | demand freed on hot hosts (GiB) | '
              'hosts above 90 % after | VMs pushed past miss bound | '
              'moves the filter refuses | planning (s) |')
    print(header)
    print('|' + '---|' * 7)
    for label, moves, seconds in plans:
        result = migration.score(hosts, moves, options)
        print('| %s | %d | %.1f | %d | %d | %d | %.3f |' % (
            label, result.migrations, result.freed_bytes / GB,
            len(result.hot_after), len(result.pushed_past_bound),
            len(result.refused), seconds))


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
    parser.add_argument('--hosts', type=int, default=20)
    parser.add_argument('--vms', type=int, default=10)
    parser.add_argument('--points', type=int, default=256)
    parser.add_argument('--hot', type=float, default=0.15,
                        help='share of hosts made hot')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--max-concurrent', type=int, default=20)
    parser.add_argument('--memory-ratio', type=float, default=2.0,
                        help="Watcher's nodes' memory allocation ratio")
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
