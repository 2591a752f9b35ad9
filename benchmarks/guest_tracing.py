"""PRL and PML on a real guest: memtrace's cost, and the PRL paper's
Fig. 8 and Table 2 from a running Linux VM.

    bash tools/build-test-guest.sh
    .venv/bin/python benchmarks/guest_tracing.py [--plot fig8-guest.png]

The test guest (Debian's kernel, QEMU TCG, 256 MiB) runs wsswork, the
paper's synthetic application, over a 64 MiB array; the agent reports
every second (mu = omega = 1 s, tau = 50). Three parts:

1. Slowdown. The workload's own throughput (operations per microsecond,
   the paper's Listing 1 metric) with no plugin, with the plugin
   watching every reference but logging nothing (mode=off), logging PRL,
   PML, both with no consumer, and both with the agent consuming the
   logs and reporting every second; each beside the first, in the same
   run. With the agent, the GPAs per second PRL logged and delivered
   during the workload, and those it missed.
2. Fig. 8: the agent's PRL estimates of rounds that ran inside the
   workload, for RWRW, RRWW and WWRR, against the 64 MiB the workload
   touches; PML's estimates of rounds inside write phases and inside
   read phases.
3. Table 2: log-full events and missed GPAs of RRWW with 512- and
   1024-entry logs, whole run and workload only, beside the paper's.

Takes about six minutes. Exits 1 if PRL is more than 1 MB off on an
order, or PML does not miss RRWW's read phase.
"""

import argparse
import os
import sys
import tempfile
import time

from memcanal.agent import guest_runs
from memcanal.conf import CONF

MiB = 2 ** 20
INSTANCE = '3b9d6c1e-2f4a-4c5b-8d7e-6f5a4b3c2d1e'
ORDERS = ('RWRW', 'RRWW', 'WWRR')
WORKLOAD = ('RR', 'WW', 'RW')
PAPER_TABLE2 = {512: (17094, 0, 0.0), 1024: (8543, 213, 0.02)}


def agent_run(guest, state, order, args, log_entries=512):
    """The workload under the agent; the intervals of guest_runs, and the
    share of one core the agent used (this process: its reader thread,
    handlers, estimators and curves)."""
    CONF.set_override('log_entries', log_entries, 'estimation')
    agent, hypervisor = guest_runs.traced_agent(CONF, guest, state)
    started, cpu = time.monotonic(), time.process_time()
    try:
        intervals = guest_runs.run_workload(
            agent, hypervisor, INSTANCE, order, args.size_mb,
            args.phase_seconds)
    finally:
        hypervisor.stop()
    return intervals, (time.process_time() - cpu) / (
        time.monotonic() - started)


def phase_rates(console_text):
    """Throughput by phase; RWRW's two phases are told apart by order."""
    return [rate for _phase, rate in guest_runs.throughputs(console_text)]


def slowdown(guest, state, args):
    print('1. Slowdown of the guest (RRWW over %d MiB, ops/us; ratio to '
          'no plugin)' % args.size_mb)
    runs = [('no plugin', None), ('plugin, mode=off', {'mode': 'off'}),
            ('PRL, no consumer', {'mode': 'prl'}),
            ('PML, no consumer', {'mode': 'pml'}),
            ('PRL+PML, no consumer', {'mode': 'both'})]
    rows = []
    for name, options in runs:
        console = os.path.join(state, 'unattended.console')
        text, counters = guest_runs.run_unattended(
            'qemu-system-x86_64', guest, 'RRWW', args.size_mb,
            args.phase_seconds, console, options)
        rows.append((name, phase_rates(text), counters))
        print('  %s: done' % name, file=sys.stderr, flush=True)
    intervals, agent_cpu = agent_run(guest, state, 'RRWW', args)
    text = open(os.path.join(CONF.qemu.socket_dir, INSTANCE + '.console'),
                errors='replace').read()
    rows.append(('PRL+PML, agent consuming', phase_rates(text), None))
    baseline = rows[0][1]
    print('%-26s %8s %8s %8s %8s' % ('', 'RR', 'ratio', 'WW', 'ratio'))
    for name, rates, _counters in rows:
        print('%-26s %8.2f %8.2f %8.2f %8.2f' % (
            name, rates[0], baseline[0] / rates[0], rates[1],
            baseline[1] / rates[1]))
    workload = guest_runs.log_totals(intervals, WORKLOAD)
    prl = workload['prl']
    print('With the agent, during the workload (%.1f s): PRL logged %.2f M '
          'GPAs/s and the agent took them all (%d log-full events); '
          'missed %.2f %% (%.2f per event); PML stopped the vCPU %.3f ms' % (
              workload['seconds'], prl['logged'] / workload['seconds'] / 1e6,
              prl['events'], 100 * prl['missed'] / max(1, prl['logged']
                                                       + prl['missed']),
              prl['missed'] / max(1, prl['events']),
              workload['pml']['vm_cpu_ns'] / 1e6))
    print('The agent used %.0f %% of a core over the whole run (boot '
          'included)' % (100 * agent_cpu))
    return intervals


def rounds_summary(estimates):
    """'rounds x MiB', or 'rounds x lowest-highest MiB'; '-' for none."""
    if not estimates:
        return '-'
    low, high = min(estimates) / MiB, max(estimates) / MiB
    return '%d x %.2f' % (len(estimates), low) if low == high else \
        '%d x %.2f-%.2f' % (len(estimates), low, high)


def fig8(guest, state, args, rrww):
    print('\n2. Fig. 8 on a real guest: estimates (MiB) of the rounds that '
          'ran inside the workload; true WSS %d MiB' % args.size_mb)
    print('%-6s %-20s %-20s %-20s | paper: PRL err, PML' % (
        'order', 'PRL', 'PML in write phases', 'PML in reads'))
    true = args.size_mb * MiB
    failures, results = [], {}
    for order in ORDERS:
        intervals = rrww if order == 'RRWW' else agent_run(
            guest, state, order, args)[0]
        results[order] = (
            guest_runs.rounds_within(intervals, 'prl', WORKLOAD),
            guest_runs.rounds_within(intervals, 'pml', ('WW', 'RW')),
            guest_runs.rounds_within(intervals, 'pml', ('RR',)))
        print('%-6s %-20s %-20s %-20s | %s' % (
            order, *(rounds_summary(estimates)
                     for estimates in results[order]),
            '< 1 MB, ' + ('misses reads' if order == 'RRWW' else 'correct')))
        prl = results[order][0]
        if not prl or any(abs(v - true) >= MiB for v in prl):
            failures.append('PRL is not within 1 MB on %s' % order)
        print('  %s: done' % order, file=sys.stderr, flush=True)
    reads = results['RRWW'][2]
    if not reads or max(reads) >= true / 2:
        failures.append('PML did not miss the read phase of RRWW')
    return results, failures


def table2(guest, state, args, rrww):
    print('\n3. Table 2 on a real guest (RRWW): GPAs missed while log-full '
          'handlers run')
    print('%-8s %-9s %9s %11s %10s | paper: %7s %7s %7s' % (
        'entries', 'span', 'events', 'missed', 'per event', 'events',
        'missed', 'per ev.'))
    for entries in (512, 1024):
        intervals = rrww if entries == 512 else agent_run(
            guest, state, 'RRWW', args, entries)[0]
        for span, phases in (('run', None), ('workload', WORKLOAD)):
            prl = guest_runs.log_totals(intervals, phases)['prl']
            print('%-8d %-9s %9d %11d %10.2f | %15d %7d %7.2f' % (
                entries, span, prl['events'], prl['missed'],
                prl['missed'] / max(1, prl['events']),
                *PAPER_TABLE2[entries]))


def plot(results, true_mb, path):
    """Fig. 8 as grouped bars: the true WSS and each estimator's last
    round inside the workload; no bar where an order has no such round."""
    from matplotlib import pyplot
    figure, axes = pyplot.subplots(figsize=(8, 4))
    series = ['PRL', 'PML in write phases', 'PML in read phases']
    width = 0.8 / (len(series) + 1)
    axes.bar([i for i in range(len(ORDERS))], [true_mb] * len(ORDERS),
             width, label='expected (64 MiB array)')
    for offset, label in enumerate(series, 1):
        bars = [(i + offset * width, results[order][offset - 1][-1] / MiB)
                for i, order in enumerate(ORDERS)
                if results[order][offset - 1]]
        axes.bar([x for x, _ in bars], [y for _, y in bars], width,
                 label=label)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(ORDERS))],
                    ORDERS)
    axes.set_ylabel('WSS estimate (MiB)')
    axes.set_title('PRL paper Fig. 8 on a real guest (QEMU + memtrace)')
    axes.legend(loc='upper left', bbox_to_anchor=(1, 1), fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    print('plot: %s' % path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--guest-dir', default=os.path.join(
        os.path.dirname(__file__), '..', 'build', 'test-guest'))
    parser.add_argument('--size-mb', type=int, default=64)
    parser.add_argument('--phase-seconds', type=float, default=12)
    parser.add_argument('--plot', metavar='PNG')
    args = parser.parse_args()
    guest, missing = guest_runs.guest_files(args.guest_dir)
    if missing:
        sys.exit('missing %s: run tools/build-test-guest.sh' %
                 ', '.join(missing))
    CONF([], project='memcanal')
    with tempfile.TemporaryDirectory() as state:
        rrww = slowdown(guest, state, args)
        results, failures = fig8(guest, state, args, rrww)
        table2(guest, state, args, rrww)
    if args.plot:
        plot(results, args.size_mb, args.plot)
    for failure in failures:
        print('FAILED: %s' % failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
