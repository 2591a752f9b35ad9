"""What sampling at the agent's defaults costs an ordinary program in
the real test guest: benchmarks/sampling_cost.py --workload NAME.

    flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/sampling_cost.py --workload sort [--rounds 2]

The workload (benchmarks/guest_corpus.py, --repeat times over) runs in
the test guest (256 MiB, QEMU TCG, no memtrace). Every round boots it
twice, in turn, the order alternating by round, each with a pager of its
own (QEMU's shim, sampled_guest.SampledGuest):

- the baseline: a pager that never ends an interval (armed at a rate of
  0.001 when it attaches, so the boot faults at most 66 pages on it and
  the program none): the guest without sampling;
- sampled: ``--rate auto``, an interval ended every --interval (default
  10 s, the agent's report interval) and fed to the agent's adaptive rate
  (sampled_guest.AutoRate, [sampling] defaults), whose new rate the pager
  takes at its next interval, as the agent's collector does.

The cost is 1 - (the program's speed sampled) / (its speed in the same
round's baseline), by its time from start to end and by that time less
what the vCPU thread waited for a CPU (other jobs of a shared machine);
beside it the pager's and the agent's CPU per VM while sampled (a share
of a core: the pager's process; this process's thread taking the
intervals and choosing the rate), the rates and the faults per second.
Ends with one JSON line.
"""

import dataclasses
import functools
import json
import os
import statistics
import sys
import tempfile
import time

from memcanal.agent import paging
from memcanal.tests.functional import services

import guest_corpus
import sampled_guest


@dataclasses.dataclass
class Run:
    """One boot of a corpus workload: its time from start to end and,
    over it, the vCPU thread's seconds waiting for a CPU, the pager's
    and this process's CPU seconds (the agent's work), its intervals,
    their rates and the pager's faults."""

    sampled: bool
    seconds: float
    vcpu_wait: float
    pager_cpu: float
    agent_cpu: float
    intervals: int
    rates: list
    faults: int

    @property
    def ready_seconds(self):
        return self.seconds - self.vcpu_wait


def sampling_faults(client):
    return client.command('stats')['sampling']['minor_faults']


def corpus_boot(build, guest, scratch, command, sampled, interval,
                overrides, timeout):
    """Boot the guest on ``command`` with a pager, sampling at the
    adaptive rate if ``sampled`` (else never ending an interval); a
    Run of the time from its start line to its end line."""
    auto = sampled and sampled_guest.AutoRate(
        sampled_guest.GUEST_PAGES, interval, overrides)
    vm = sampled_guest.SampledGuest(
        build, guest, tempfile.mkdtemp(dir=scratch), command,
        sampled_guest.pager_options(auto.rate if sampled else 0.001))
    try:
        if not vm.wait_for(sampled_guest.START, sampled_guest.BOOT_TIMEOUT):
            raise RuntimeError('the guest did not start its workload')
        agent = 0.0
        rates = []

        def end_interval():
            # The agent's part: take the interval, plan the next rate.
            nonlocal agent
            started = time.thread_time()
            vm.client.command('tick')
            for raw in vm.client.command('samples')['intervals']:
                closed, _ = paging.access_interval(raw)
                auto.step(vm.client, closed)
                rates.append(closed.rate)
            agent += time.thread_time() - started

        if sampled:
            end_interval()      # the boot's interval; the program's next
        faults = sampling_faults(vm.client)
        pager = sampled_guest.cpu_seconds(vm.pager.pid)
        threads = sampled_guest.thread_times(vm.qemu.pid)
        started = time.monotonic()
        next_end = started + interval
        while not vm.wait_for(sampled_guest.DONE, max(
                0.0, next_end - time.monotonic()) if sampled else 1.0):
            if time.monotonic() - started > timeout:
                raise RuntimeError('the workload ran over %.0f s' % timeout)
            if sampled:
                end_interval()
                next_end += interval
        seconds = time.monotonic() - started
        _, wait = sampled_guest.vcpu_times(
            threads, sampled_guest.thread_times(vm.qemu.pid))
        return Run(sampled, seconds, wait,
                   sampled_guest.cpu_seconds(vm.pager.pid) - pager, agent,
                   len(rates) - 1 if sampled else 0, rates[1:],
                   sampling_faults(vm.client) - faults)
    finally:
        vm.stop()


def corpus_figures(pairs):
    """Over rounds of (baseline Run, sampled Run): the slowdowns by wall
    and by ready time, CPU shares and rates (median, range)."""
    spread = sampled_guest.spread
    sampled = [run for _, run in pairs]
    return {
        'slowdown': spread([1 - base.seconds / run.seconds
                            for base, run in pairs]),
        'ready_slowdown': spread([1 - base.ready_seconds / run.ready_seconds
                                  for base, run in pairs]),
        'seconds_baseline': spread([base.seconds for base, _ in pairs]),
        'seconds_sampled': spread([run.seconds for run in sampled]),
        'pager_cpu': spread([run.pager_cpu / run.seconds for run in sampled]),
        'pager_cpu_baseline': spread([base.pager_cpu / base.seconds
                                      for base, _ in pairs]),
        'agent_cpu': spread([run.agent_cpu / run.seconds for run in sampled]),
        'agent_ms_per_interval': spread([
            1e3 * run.agent_cpu / max(1, run.intervals + 1)
            for run in sampled]),
        'faults_per_s': spread([run.faults / run.seconds
                                for run in sampled]),
        'rate_mean': spread([statistics.mean(run.rates) for run in sampled
                             if run.rates]),
        'intervals': [run.intervals for run in sampled],
        'rates': [run.rates for run in sampled]}


def main(args):
    """The cost of sampling at the defaults on one corpus workload."""
    guest = sampled_guest.guest_or_exit(args.guest_dir)
    command = 'for k in $(seq %d); do %s; done' % (
        args.repeat, guest_corpus.WORKLOADS[args.workload])
    overrides = {'vm_fault_budget': args.vm_fault_budget} \
        if args.vm_fault_budget is not None else None
    pairs = []
    with tempfile.TemporaryDirectory(prefix='sc-', dir='/tmp') as scratch:
        build = args.build or services.build_pager(
            os.path.join(scratch, 'build'))
        boot = functools.partial(corpus_boot, build, guest, scratch, command,
                                 interval=args.interval, overrides=overrides,
                                 timeout=args.timeout)
        for round_index in range(args.rounds):
            order = (False, True) if round_index % 2 == 0 else (True, False)
            runs = {sampled: boot(sampled) for sampled in order}
            pairs.append((runs[False], runs[True]))
            print('  round %d: baseline %.1f s (ready %.1f), sampled %.1f s '
                  '(ready %.1f), %d faults, rates %s' % (
                      round_index + 1, runs[False].seconds,
                      runs[False].ready_seconds, runs[True].seconds,
                      runs[True].ready_seconds, runs[True].faults,
                      ' '.join('%.3g' % r for r in runs[True].rates)),
                  file=sys.stderr, flush=True)
    result = corpus_figures(pairs)
    print('Guest %d MiB (TCG), workload %s x %d, %d rounds, intervals of '
          '%g s at the adaptive rate%s. Slowdown: 1 - (speed sampled) / '
          '(speed, the same pager not sampling), median (range); pager and '
          'agent: share of a core per VM while sampled' % (
              sampled_guest.GUEST_MB, args.workload, args.repeat,
              args.rounds, args.interval, '' if overrides is None else
              ', vm_fault_budget %g' % args.vm_fault_budget))
    for key in ('slowdown', 'ready_slowdown', 'pager_cpu', 'agent_cpu',
                'pager_cpu_baseline'):
        print('%-20s %s %%' % (key, sampled_guest.percent(result[key])))
    for key in ('seconds_baseline', 'seconds_sampled', 'faults_per_s',
                'agent_ms_per_interval', 'rate_mean'):
        figure_ = result[key]
        print('%-20s %.3g (%.3g..%.3g)' % (key, figure_['median'],
                                           *figure_['range']))
    result.update(workload=args.workload, repeat=args.repeat,
                  rounds=args.rounds, interval_s=args.interval,
                  rate='auto', vm_fault_budget=args.vm_fault_budget)
    print(json.dumps(result))
    return 0
