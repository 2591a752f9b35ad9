"""Reproduce Hcache's Table 2 and U-tube's Figs. 12-13 and Table 1.

    .venv/bin/python benchmarks/policies.py            # full runs
    .venv/bin/python benchmarks/policies.py --reduced  # smaller (CI)

Hcache Table 2: three 512 MB VMs run SPECweb-, index-search- and
TPC-H-like workloads (memcanal.estimation.workloads, at 1/4 of the
paper's sizes, 1/16 reduced). Each VM's curve is predicted by the
hypervisor cache (128 MB direct + 384 MB cache, memcanal.estimation.
hcache_runs.traced); isolated sharing (memcanal.policy.isolated, exact)
divides the 1536 MB at delta 5 % and 25 %; every VM is then measured
VM-only at its new size on the *next* stretch of its workload, not the
one predicted from. Bars: predicted and measured geometric means within
0.02, and no VM's measured misses above its bound by more than 1 point.

U-tube Figs. 12-13: a DaCapo-like and a TPC-C-like VM of 1 GB sharing
2 GB (1/16 scale) for 40 minutes in 10 s windows, each VM a simulated
driver VM (its guest page-cache model, resized by hotplug). U-tube's
balancing (memcanal.policy.utube) against the ESX-style policy (shares
with a 75 % idle tax, memcanal.policy.esx, acting when a VM's
utilization reaches 90 %, its working set its used memory). Fairness is
the min/max ratio of the two VMs' utilizations, averaged over windows.

U-tube Table 1: VMs of 512 MB running the TPC-C-like workload (demand
growing from 250 MB at 0.46 MB/s, so that with its 64 MB kernel it
passes the balloon's 768 MB cap at 986 s as in Fig. 8, up to 800 MB)
placed one by one on an 11.5 GB host (1/64 scale, 50 s windows) until
it has no room, once: static allocation (512 MB each), and balloon (cap
768 MB) or hotplug with admission by equation 7, balancing, and
migration of the newest VMs off the host while its utilization is above
90 %. Printed: VM density (min, max) and the mean miss ratio (the
response-time proxy).

Exits 1, printing FAILED, if a Table 2 bar is missed, if U-tube is not
fairer than ESX, or if balloon or hotplug overcommit does not place more
VMs than static allocation with fewer misses. Progress goes to stderr.
"""

import argparse
import sys

import numpy as np

from memcanal.agent.drivers import simulated
from memcanal.estimation import hcache_runs
from memcanal.estimation import mrc
from memcanal.estimation import workloads
from memcanal.policy import base
from memcanal.policy import esx
from memcanal.policy import isolated
from memcanal.policy import utube

MB = 2 ** 20
PAGE = 4096
PAPER_TABLE2 = {
    0.05: {'alloc': (452, 748, 336), 'predicted': (1.05, 0.64, 1.00),
           'measured': (1.04, 0.58, 1.00), 'gm': (0.88, 0.85)},
    0.25: {'alloc': (280, 920, 336), 'predicted': (1.24, 0.06, 1.00),
           'measured': (1.28, 0.05, 1.00), 'gm': (0.43, 0.41)},
}
PAPER_FAIRNESS = {'utube': 0.90, 'esx': 0.61}
PAPER_DENSITY = {'static': (23, 23), 'hotplug': (13, 31),
                 'balloon': (16, 31)}


def progress(message):
    print(message, file=sys.stderr, flush=True)


def table2_workloads(scale):
    return [
        ('SPECweb', workloads.SpecWebLike(
            scale=scale, rng=np.random.default_rng(11))),
        ('Searching', workloads.IndexSearchLike(
            scale=scale, rng=np.random.default_rng(12))),
        ('TPC-H', workloads.TpchLike(
            scale=scale, rng=np.random.default_rng(13))),
    ]


def table2(scale, references):
    """Predict, allocate, measure; returns whether the bars hold."""
    size = lambda mb: int(mb * scale * MB)  # noqa: E731
    warmup = references // 3
    vms, measure_traces = [], {}
    for name, workload in table2_workloads(scale):
        progress('table 2: tracing %s' % name)
        predicted_from = workload.take(references)
        run = hcache_runs.traced(predicted_from, size(128) // PAGE,
                                 size(384) // PAGE, warmup=warmup)
        curve = run.curve
        vms.append(base.VM(name, size(512), mrc.MissRatioCurve(
            curve.sizes * PAGE, curve.miss_ratios, curve.references)))
        measure_traces[name] = workload.take(references)
    measured_at = {}

    def measure(name, nbytes):
        if (name, nbytes) not in measured_at:
            progress('table 2: measuring %s at %d MB' % (
                name, nbytes / scale / MB))
            measured_at[name, nbytes] = hcache_runs.vm_only(
                measure_traces[name], nbytes // PAGE,
                warmup=warmup).miss_ratio
        return measured_at[name, nbytes]

    ok = True
    for delta in (0.05, 0.25):
        allocation = isolated.isolated_sharing(
            vms, size(1536), delta, unit_bytes=size(4))
        measured = {vm.name: max(measure(vm.name, allocation.targets[
            vm.name]), base.MIN_MISS_RATIO) / max(measure(
                vm.name, vm.baseline_bytes), base.MIN_MISS_RATIO)
            for vm in vms}
        measured_gm = base.geometric_mean(measured.values())
        paper = PAPER_TABLE2[delta]
        print('\nHcache Table 2, isolation constraint %d %% (ours / paper)'
              % (delta * 100))
        print('  %-22s %-16s %-16s %-16s' % ('', *(vm.name for vm in vms)))
        rows = (
            ('memory alloc. (MB)', lambda i, vm: '%d / %d' % (
                round(allocation.targets[vm.name] / scale / MB),
                paper['alloc'][i])),
            ('predicted miss ratio', lambda i, vm: '%.2f / %.2f' % (
                allocation.predicted[vm.name], paper['predicted'][i])),
            ('measured miss ratio', lambda i, vm: '%.2f / %.2f' % (
                measured[vm.name], paper['measured'][i])))
        for label, cell in rows:
            print('  %-22s %-16s %-16s %-16s' % (label, *(
                cell(i, vm) for i, vm in enumerate(vms))))
        print('  geo. mean predicted %.2f / %.2f, measured %.2f / %.2f' % (
            allocation.geometric_mean, paper['gm'][0], measured_gm,
            paper['gm'][1]))
        gap = abs(allocation.geometric_mean - measured_gm)
        over = max(measured[vm.name] - (1 + delta) for vm in vms
                   if allocation.targets[vm.name] < vm.baseline_bytes)
        print('  |predicted - measured| geo. mean %.3f (bar 0.02); worst '
              'measured excess over the bound %+.3f (bar +0.01)' % (
                  gap, over))
        ok = ok and gap <= 0.02 and over <= 0.01
    return ok


def simulated_vm(index, memory_bytes, workload, window_ns, per_window,
                 scale):
    """A VM of the simulated driver running ``workload``."""
    vm = simulated.SimulatedVM('bench', index, memory_bytes, 0, window_ns,
                               per_window, int(64 * MB * scale))
    workload.reference_ns = max(1, window_ns // per_window)
    vm.workload = workload
    return vm


def usage(vm, stats, before, max_bytes=None):
    return utube.GuestUsage(
        vm.uuid, vm.memory_bytes, int(stats['used_bytes']),
        int(before['used_bytes']), int(stats['swap_bytes']),
        int(before['swap_bytes']), int(stats['committed_bytes']),
        max_bytes)


def working_set_vm(vm, stats, unit):
    """ESX's view: memory in use is active; a VM with swapped pages or
    using 90 % of its memory would use more (a step curve at its use)."""
    demand = int(stats['used_bytes'] + stats['swap_bytes'])
    if stats['used_bytes'] >= 0.9 * vm.memory_bytes:
        demand = max(demand, vm.memory_bytes + unit)
    return base.VM(vm.uuid, vm.memory_bytes, base.curve_from_points(
        [[PAGE, 1.0], [max(demand, PAGE + 1), 0.0]]))


def apply_targets(vms, targets, mechanism='hotplug'):
    for vm in vms:
        target = int(targets.get(vm.uuid, vm.memory_bytes)) // PAGE * PAGE
        if target != vm.memory_bytes:
            vm.resize(target, mechanism, loaded=vm.loaded)


def fairness(scale, per_window, minutes=40, window_s=10):
    window_ns = int(window_s * 1e9)
    host = int(2048 * MB * scale)
    unit = int(4 * MB * scale)
    results = {}
    for policy in ('utube', 'esx'):
        progress('fairness: %s' % policy)
        vms = [simulated_vm(0, int(1024 * MB * scale), workloads.DacapoLike(
            scale=scale, rng=np.random.default_rng(21)), window_ns,
            per_window, scale),
            simulated_vm(1, int(1024 * MB * scale), workloads.TpccLike(
                start_mb=300, growth_mb_per_s=0.375, max_mb=1300,
                scale=scale, rng=np.random.default_rng(22)), window_ns,
                per_window, scale)]
        before = {}
        ratios = []
        for _ in range(int(minutes * 60 / window_s)):
            stats = {vm.uuid: vm.run_guest(vm.workload.take(per_window))
                     for vm in vms}
            use = [stats[vm.uuid]['used_bytes'] / vm.memory_bytes
                   for vm in vms]
            ratios.append(min(use) / max(max(use), 1e-9))
            if policy == 'utube':
                allocation = utube.balance(
                    [usage(vm, stats[vm.uuid], before.get(
                        vm.uuid, stats[vm.uuid])) for vm in vms],
                    available_bytes=host - sum(vm.memory_bytes
                                               for vm in vms))
                apply_targets(vms, allocation.targets)
            elif max(use) >= 0.9:
                allocation = esx.esx_emulation(
                    [working_set_vm(vm, stats[vm.uuid], unit) for vm in vms],
                    host, unit_bytes=unit)
                apply_targets(vms, allocation.targets)
            before = stats
        results[policy] = float(np.mean(ratios))
    print('\nU-tube Figs. 12-13: fairness (min/max utilization, mean over '
          '%d windows)' % (minutes * 60 / window_s))
    for policy, paper in PAPER_FAIRNESS.items():
        print('  %-6s ours %.2f, paper %.2f' % (
            policy, results[policy], paper))
    return results


def density(scale, per_window, minutes=40, window_s=50):
    window_ns = int(window_s * 1e9)
    host = int(11.5 * 1024 * MB * scale)
    boot = int(512 * MB * scale)
    cap = int(768 * MB * scale)
    print('\nU-tube Table 1: VM density and mean miss ratio (response-time '
          'proxy), TPC-C-like VMs on an 11.5 GB host')
    results = {}
    for policy in ('static', 'balloon', 'hotplug'):
        progress('density: %s' % policy)
        vms, before, counts, misses, accesses = [], {}, [], 0.0, 0.0
        ceiling = cap if policy == 'balloon' else None
        made, placing = 0, True
        for window in range(int(minutes * 60 / window_s)):
            # VMs are placed one by one until the host has no room, once;
            # after that, only migrations change the density.
            while placing:
                workload = workloads.TpccLike(
                    start_mb=250, growth_mb_per_s=0.46, max_mb=800,
                    scale=scale, rng=np.random.default_rng(100 + made))
                # A balloon VM boots with its cap and starts ballooned
                # down to the boot size, as libvirt's currentMemory does.
                new = simulated_vm(made, cap if policy == 'balloon'
                                   else boot, workload, window_ns,
                                   per_window, scale)
                if policy == 'balloon':
                    new.resize(boot, policy, loaded=False)
                need = new.kernel_bytes + workload.start_pages * PAGE
                free = host - sum(vm.memory_bytes for vm in vms)
                if policy == 'static':
                    admitted = free >= boot
                else:
                    admission = utube.admit(need, free, [
                        usage(vm, before[vm.uuid], before[vm.uuid], ceiling)
                        for vm in vms])
                    room = free + sum(
                        vm.memory_bytes - admission.targets.get(
                            vm.uuid, vm.memory_bytes) for vm in vms)
                    admitted = admission.admitted and room >= need
                    if admitted:
                        apply_targets(vms, admission.targets, policy)
                        if room < boot:
                            new.resize(room // PAGE * PAGE, policy,
                                       loaded=False)
                if not admitted:
                    placing = False
                    break
                made += 1
                vms.append(new)
                before[new.uuid] = new.run_guest(workload.take(per_window))
            stats = {vm.uuid: vm.run_guest(vm.workload.take(per_window))
                     for vm in vms}
            misses += sum(s['misses'] for s in stats.values())
            accesses += sum(s['accesses'] for s in stats.values())
            if policy != 'static':
                allocation = utube.balance(
                    [usage(vm, stats[vm.uuid], before[vm.uuid], ceiling)
                     for vm in vms],
                    available_bytes=host - sum(vm.memory_bytes
                                               for vm in vms))
                apply_targets(vms, _fit(allocation.targets, host), policy)
                # Migrate the newest VMs away while the host is too full.
                while vms and sum(stats[vm.uuid]['used_bytes']
                                  for vm in vms) > 0.9 * host:
                    vms.pop()
            before.update(stats)
            counts.append(len(vms))
        paper = PAPER_DENSITY[policy]
        results[policy] = (min(counts), max(counts),
                           misses / max(accesses, 1))
        print('  %-8s density (min, max) ours (%d, %d), paper (%d, %d); '
              'mean miss ratio %.4f' % (policy, *results[policy][:2],
                                        *paper, results[policy][2]))
    return results


def _fit(targets, host):
    """Scale targets down to the host's memory, keeping proportions."""
    total = sum(targets.values())
    if total <= host:
        return targets
    return {name: int(size * host / total) for name, size in
            targets.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reduced', action='store_true',
                        help='smaller VMs and shorter runs, for CI')
    args = parser.parse_args()
    if args.reduced:
        ok = table2(1 / 16, 600_000)
        fair = fairness(1 / 64, 4000, minutes=20)
        dense = density(1 / 256, 4000, minutes=20)
    else:
        ok = table2(1 / 4, 1_500_000)
        fair = fairness(1 / 16, 20_000)
        dense = density(1 / 64, 16_000)
    failures = [] if ok else ['a Table 2 bar was missed']
    # U-tube's claims, not its exact numbers: balancing is fairer than
    # ESX, and overcommit places more VMs than static allocation with
    # fewer misses.
    if not fair['utube'] > fair['esx']:
        failures.append('U-tube is not fairer than ESX')
    for policy in ('balloon', 'hotplug'):
        if not (dense[policy][1] > dense['static'][1]
                and dense[policy][2] < dense['static'][2]):
            failures.append('%s placed no more VMs than static, or missed '
                            'more' % policy)
    for failure in failures:
        print('FAILED: %s' % failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
