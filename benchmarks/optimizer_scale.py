"""Isolated sharing for a whole cloud within the optimizer's period.

    .venv/bin/python benchmarks/optimizer_scale.py [--hosts 1000]
        [--vms 30] [--sample 5] [--threads 2] [--seed 0]

Builds ``--hosts`` hosts of ``--vms`` VMs each (1,000 x 30 by default,
as issue #16's cloud), every VM with a 256-point curve on a log scale of
size from 32 MB to twice its baseline (2, 4, 8 or 16 GB): half smooth
(a power law towards a floor), half step-shaped (one to three working
sets whose misses drop within a few points, the shape on which a one-unit
move gains nothing). Each host's memory is its VMs' baselines; each VM
has its baseline +-20 % now. At 4 MB units such a host has some 40,000
units, so the unit grows to keep 4,096 of them (isolated.MAX_UNITS).

Times, in this process, ``isolated.isolated_sharing`` per host:

- baseline: the numpy dynamic programme over every unit
  (``isolated._exact_dense`` on ``isolated._costs``, as ``exact`` was
  before the C search; the search alone) on the first ``--sample`` hosts;
- exact: the C dynamic programme on the curves' breakpoints;
- greedy: marginal allocation on the curves' convex hulls;

each for the whole cloud, in one thread and in ``--threads`` threads
(the C searches release the GIL; the optimizer plans host by host), as
wall time and as this process's CPU time (which other load on the
machine disturbs less). The baseline's cloud times are its per-host
means times the hosts. Prints the times and their CPU ratios to the
baseline side by side, and greedy's objective against exact's: per
host, greedy's geometric mean over exact's (1.0 = as good), their
geometric mean over hosts and the worst host, and how many hosts greedy
matches. Also checks that exact finds the baseline's optimum
(summed log relative miss ratios and stay preference within 1e-9) on
the sampled hosts. Progress goes to stderr; exits 0 (a benchmark, not a
test) unless exact and the baseline disagree.
"""

import argparse
import concurrent.futures
import sys
import time

import numpy as np

from memcanal.policy import base
from memcanal.policy import isolated

MB = base.MB
GB = 1024 * MB
POINTS = 256
DELTA = 0.05
PERIOD = 300.0
"""The optimizer's period (memcanal.conf.optimizer), in seconds."""


def progress(message, last=False):
    print('\r%-60s' % message, end='\n' if last else '', file=sys.stderr,
          flush=True)


def smooth(rng, sizes, baseline):
    """A power law falling towards a floor of cold misses."""
    scale = baseline * rng.uniform(0.05, 0.5)
    floor = rng.uniform(0.0, 0.2)
    return floor + (1 - floor) * (1 + sizes / scale) ** -rng.uniform(0.5, 2)


def stepped(rng, sizes, baseline):
    """One to three working sets, each a drop within a few points."""
    ratios = np.full(sizes.shape, rng.uniform(0.0, 0.1))
    drops = rng.dirichlet(np.ones(3))[:rng.integers(1, 4)]
    for drop in drops * (1 - ratios[0]):
        edge = baseline * rng.uniform(0.2, 1.8)
        ratios += drop / (1 + np.exp(np.minimum(
            (sizes - edge) / (0.01 * edge), 50)))
    return ratios


def host(rng, vms):
    result = []
    for i in range(vms):
        baseline = int(rng.choice([2, 4, 8, 16])) * GB
        sizes = np.unique(np.geomspace(32 * MB, 2 * baseline, POINTS)
                          .astype(np.int64))
        shape = smooth if i % 2 else stepped
        curve = base.curve_from_points(zip(
            sizes.tolist(), shape(rng, sizes, baseline).tolist()))
        result.append(base.VM(
            'vm%d' % i, baseline, curve,
            memory_bytes=int(baseline * rng.uniform(0.8, 1.2))))
    return result


def search(vms, method):
    """Units per VM by ``method`` and their summed cost (the objective the
    searches minimise), as isolated_sharing searches the host."""
    total = sum(vm.baseline_bytes for vm in vms)
    unit = isolated._unit(total, base.DEFAULT_UNIT_BYTES)
    units = (total - sum(vm.current_bytes % unit for vm in vms)) // unit
    costs = [isolated._costs(vm, units, unit, DELTA) for vm in vms]
    if method == 'dense':
        taken = isolated._exact_dense(costs, units)
    else:
        taken = isolated._search(vms, units, unit, DELTA, method)
    return sum(cost[k] for cost, k in zip(costs, taken))


def plan(method):
    def one(vms):
        total = sum(vm.baseline_bytes for vm in vms)
        return isolated.isolated_sharing(vms, total, DELTA,
                                         method=method).geometric_mean
    return one


def timed(name, run, hosts, threads=1):
    """Wall and CPU seconds for ``run`` on every host, and its results."""
    start, cpu = time.perf_counter(), time.process_time()
    results = []
    if threads == 1:
        shown = start
        for i, vms in enumerate(hosts):
            results.append(run(vms))
            if i % 50 == 49 or time.perf_counter() - shown > 0.5:
                shown = time.perf_counter()
                progress('%s: %d/%d hosts, %.1f s' % (
                    name, i + 1, len(hosts), time.perf_counter() - start))
    else:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(run, hosts))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    progress('%s: %d hosts in %.2f s (CPU %.2f s)' % (
        name, len(hosts), seconds, cpu), last=True)
    return seconds, cpu, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--vms', type=int, default=30)
    parser.add_argument('--sample', type=int, default=5,
                        help='hosts the numpy baseline runs on')
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    progress('building %d hosts of %d VMs' % (args.hosts, args.vms))
    hosts = [host(rng, args.vms) for _ in range(args.hosts)]
    sample = hosts[:max(1, min(args.sample, args.hosts))]

    dense_s, dense_cpu, dense_cost = timed('baseline (numpy, sample)',
                                lambda vms: search(vms, 'dense'), sample)
    per_host = {'baseline': dense_s / len(sample)}
    cloud = {'baseline': per_host['baseline'] * args.hosts}
    cpu = {'baseline': dense_cpu / len(sample) * args.hosts}
    threaded = {}
    gms = {}
    for method in ('exact', 'greedy'):
        seconds, cpu[method], gms[method] = timed(method, plan(method), hosts)
        per_host[method] = seconds / args.hosts
        cloud[method] = seconds
        threaded[method], _, _ = timed('%s, %d threads' % (
            method, args.threads), plan(method), hosts, args.threads)

    agree = np.allclose(dense_cost, [search(vms, 'exact') for vms in sample],
                        rtol=0, atol=1e-9)
    print('%d hosts x %d VMs, %d-point curves, delta %.2f, unit %d MB' % (
        args.hosts, args.vms, POINTS, DELTA, isolated._unit(
            sum(vm.baseline_bytes for vm in hosts[0]),
            base.DEFAULT_UNIT_BYTES) // MB))
    print('%-10s %9s %9s %12s %16s %13s' % (
        'method', 'ms/host', 'cloud s', 'cloud CPU s',
        'cloud s, %d thr' % args.threads, 'CPU speed-up'))
    for name in ('baseline', 'exact', 'greedy'):
        print('%-10s %9.2f %9.2f %12.2f %16s %12.0fx' % (
            name, 1000 * per_host[name], cloud[name], cpu[name],
            '%.2f' % threaded[name] if name in threaded else
            '(%d hosts)' % len(sample),
            cpu['baseline'] / cpu[name]))
    ratio = np.array(gms['greedy']) / np.array(gms['exact'])
    print('greedy/exact geometric mean of the objective: %.5f, worst host '
          '%.5f, equal on %d/%d hosts' % (
              base.geometric_mean(ratio), ratio.max(),
              np.sum(ratio <= 1 + 1e-9), len(ratio)))
    print('exact objective (geometric mean over hosts) %.5f; exact agrees '
          'with the numpy baseline on the %d sampled hosts: %s' % (
              base.geometric_mean(gms['exact']), len(sample), agree))
    print('optimizer period %.0f s: exact cloud %s, greedy cloud %s' % (
        PERIOD, *('%.1f %%' % (100 * min(cloud[m], threaded[m]) / PERIOD)
                  for m in ('exact', 'greedy'))))
    return 0 if agree else 1


if __name__ == '__main__':
    sys.exit(main())
