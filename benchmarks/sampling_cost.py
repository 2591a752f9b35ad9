"""What access sampling costs the real test guest, its pager and the
agent: throughput with and without sampling, CPU per VM, fault latency.

    bash tools/build-test-guest.sh                  # once
    flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/sampling_cost.py [--rounds 2] [--phase-seconds 10]

The test guest (256 MiB, QEMU TCG, its RAM in a shared memfd, no
memtrace) runs wsswork RWRW over 64 MiB (--size-mb, --order), phase after
phase. Boots, in turn, every round:

- ``no pager``: QEMU alone, the baseline of the pager's presence;
- a pager (QEMU's shim, benchmarks/sampled_guest.py) sampling at 1 %,
  at 10 %, and at 1 % with a full pass every --full-pass-every intervals
  (default 1: a phase at the default interval holds one full pass; over
  N intervals it costs an Nth of that). Its intervals end on ``tick``
  (``--sample-interval-ms 0``), so that within one boot phases alternate
  between sampling on, at the default interval (10 s) or a short one
  (--short-interval), and off: the same pager, armed, with no interval
  ending and so no fault, which is a pager without sampling. The order
  alternates by round.

A 10 s phase at the 10 s interval holds one interval: its zap, and the
first touches that fault after it. Per phase:

- the guest's throughput, wsswork's ops_per_us; and the same over the
  time QEMU's vCPU thread was not waiting for a CPU (its schedstat),
  which leaves out the other jobs of a shared machine and keeps in the
  vCPU's sleeps on the pager's faults; slowdowns are 1 - a phase with
  sampling on over the median of the same boot's off phases of the same
  kind (read with read), medians over a round's phases, then median and
  range over rounds (never asserted);
- the vCPU thread's extra share of time asleep with sampling on (what
  the faults cost it, wake-ups included);
- the pager's CPU (/proc/PID/stat utime + stime) over the phase's wall
  time: its share of a core per VM.

Per interval, the agent's CPU: this thread's time to take ``samples``
and run SampledAccesses (working set, window, curve) on it, as the
agent does. Per boot, the pager's MINOR fault service p50/p99 (reading
the fault to UFFDIO_CONTINUE), arming times and RSS from its ``stats``.
Ends with one JSON line. Takes about three minutes a round.

With ``--workload NAME`` it measures instead what sampling at the
agent's defaults costs one of benchmarks/guest_corpus.py's programs:
benchmarks/corpus_cost.py.
"""

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import tempfile
import time

from memcanal.agent import guest_runs
from memcanal.agent import paging
from memcanal.estimation import sampling
from memcanal.tests.functional import services

import corpus_cost
import guest_corpus
import sampled_guest

DEFAULT_INTERVAL = 10.0
PHASE_START = re.compile(r'^wsswork: phase=\w\w start$')
POLL = 0.01


@dataclasses.dataclass(frozen=True)
class Kind:
    """A boot: no pager (``rate`` None), or a pager sampling at
    ``rate`` with a full pass every ``full_pass_every`` intervals."""

    name: str
    rate: float | None = None
    full_pass_every: int = 0


@dataclasses.dataclass
class Phase:
    """One wsswork phase: sampling ``on``, ``off`` or ``none`` (no
    pager), at ``interval``; the guest's operations and nanoseconds, the
    intervals it ended, and over its wall time (host seconds) the
    pager's share of a core and the vCPU thread's seconds running and
    waiting for a CPU."""

    kind: str
    mode: str
    interval: float | None
    name: str               # wsswork's: RW, RR or WW
    ops: int
    ns: int
    ticks: int
    wall: float
    pager_cpu: float | None
    vcpu_run: float
    vcpu_wait: float

    @property
    def ops_per_us(self):
        """wsswork's own figure."""
        return 1e3 * self.ops / self.ns

    @property
    def ready_ops_per_us(self):
        """The same over the time the vCPU was not waiting for a CPU
        another process held: the other jobs of a shared machine taken
        out, the vCPU's waits for the pager (it sleeps) kept in."""
        return 1e3 * self.ops / (self.ns - 1e9 * self.vcpu_wait)

    @property
    def blocked(self):
        """The share of the phase the vCPU thread slept (on faults the
        pager serves, on QEMU's locks)."""
        return max(0.0, 1 - (self.vcpu_run + self.vcpu_wait) / self.wall)


@dataclasses.dataclass
class Boot:
    """What one boot measured: its phases, the agent's CPU seconds per
    interval collected, and the pager's stats and RSS at the end."""

    kind: Kind
    phases: list
    agent_seconds: list
    stats: dict | None
    pager_rss_kib: int | None


def kinds(full_pass_every):
    return [Kind('no pager'), Kind('1 %', 0.01), Kind('10 %', 0.1),
            Kind('1 %%, full pass every %d' % full_pass_every, 0.01,
                 full_pass_every)]


def schedule(kind, intervals, round_index):
    """The (mode, interval) of a boot's phases in order: for a pager,
    sampling on and off at each interval, the pair's order alternating
    by round and interval; without one, two plain phases."""
    if kind.rate is None:
        return [('none', None)] * 2
    modes = []
    for number, interval in enumerate(intervals):
        pair = [('on', interval), ('off', interval)]
        if (round_index + number) % 2:
            pair.reverse()
        modes += pair
    return modes


def workload(modes, size_mb, order, seconds):
    """The guest's command: wsswork run often enough for ``modes``, two
    phases a run."""
    return 'for i in $(seq %d); do wsswork %d %s %g; done' % (
        -(-len(modes) // 2), size_mb, order, seconds)


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return None


def collect(client, estimator):
    """The agent's work for one interval: take the pager's samples and
    run the estimators on them; this thread's CPU seconds for it."""
    started = time.thread_time()
    for raw in client.command('samples')['intervals']:
        interval, _ = paging.access_interval(raw)
        estimator.add_interval(interval.touched, interval.written,
                               interval.full, interval.seconds)
    estimator.wss_bytes()
    estimator.window_wss_bytes()
    estimator.curve()
    estimator.touches_per_s()
    return time.thread_time() - started


def drive(vm, kind, modes, timeout):
    """Follow the guest's phases, ending intervals in those with
    sampling on; a Boot."""
    pending = list(modes)
    phases, agent = [], []
    estimator = kind.rate and sampling.SampledAccesses(
        sampled_guest.GUEST_PAGES, kind.rate, interval_s=DEFAULT_INTERVAL)
    pid = vm.pager and vm.pager.pid
    current = None
    if not vm.wait_for(sampled_guest.START,
                       sampled_guest.BOOT_TIMEOUT):
        raise RuntimeError('the guest did not start its workload')
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in vm.new_lines():
            if PHASE_START.match(line):
                mode, interval = pending.pop(0)
                current = dict(mode=mode, interval=interval, ticks=0,
                               next_tick=time.monotonic(),
                               started=time.monotonic(),
                               cpu=pid and sampled_guest.cpu_seconds(pid),
                               threads=sampled_guest.thread_times(vm.qemu.pid))
            elif (found := guest_runs.THROUGHPUT_LINE.match(line)):
                wall = time.monotonic() - current['started']
                phases.append(Phase(
                    kind.name, current['mode'], current['interval'],
                    found.group(1), int(found.group(3)), int(found.group(4)),
                    current['ticks'], wall,
                    pid and (sampled_guest.cpu_seconds(pid)
                             - current['cpu']) / wall,
                    *sampled_guest.vcpu_times(current['threads'],
                                sampled_guest.thread_times(vm.qemu.pid))))
                current = None
            elif line.startswith(sampled_guest.DONE):
                # The guest waits a little before it powers off.
                stats = vm.client and vm.client.command('stats')
                return Boot(kind, phases, agent, stats,
                            pid and rss_kib(pid))
        if (current and current['mode'] == 'on'
                and time.monotonic() >= current['next_tick']):
            vm.client.command('tick')
            agent.append(collect(vm.client, estimator))
            current['ticks'] += 1
            current['next_tick'] += current['interval']
        if vm.qemu.poll() is not None:
            raise RuntimeError('QEMU exited: %s' % vm.console()[-2000:])
        time.sleep(POLL)
    raise RuntimeError('the workload ran over %.0f s' % timeout)


def run_boot(build, guest, scratch, kind, modes, args):
    command = workload(modes, args.size_mb, args.order, args.phase_seconds)
    directory = tempfile.mkdtemp(dir=scratch)
    options = None if kind.rate is None else sampled_guest.pager_options(
        kind.rate, full_pass_every=kind.full_pass_every)
    vm = sampled_guest.SampledGuest(build, guest, directory, command,
                                    options)
    try:
        return drive(vm, kind, modes, 4 * len(modes) * args.phase_seconds
                     + 120)
    finally:
        vm.stop()


def median(values):
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


METRICS = ('ops_per_us', 'ready_ops_per_us')


def of_phases(boot, attribute, mode, interval=None, name=None):
    """The median of ``attribute`` over the boot's phases in ``mode``
    (at ``interval`` and of wsswork's phase ``name``, if given)."""
    return median(getattr(phase, attribute) for phase in boot.phases
                  if phase.mode == mode
                  and (interval is None or phase.interval == interval)
                  and (name is None or phase.name == name))


def ratio(boot, metric, mode, baseline, baseline_mode, interval=None):
    """The median over ``boot``'s phases in ``mode`` (at ``interval``)
    of their ``metric`` over the median of ``baseline``'s phases of the
    same wsswork phase in ``baseline_mode`` (a read phase is compared
    with read phases)."""
    return median(
        getattr(phase, metric) / of_phases(baseline, metric, baseline_mode,
                                           name=phase.name)
        for phase in boot.phases if phase.mode == mode
        and (interval is None or phase.interval == interval))


def round_figures(boots, intervals):
    """One round's figures: per pager boot and interval, throughput with
    sampling on over off (the same boot), by both metrics, the vCPU's
    and the pager's shares of the phases; the pager's presence: its
    boots' off phases over the no-pager boot's phases."""
    plain = next(boot for boot in boots if boot.kind.rate is None)
    pagers = [boot for boot in boots if boot.kind.rate is not None]
    figures = {'presence': {metric: median(
        ratio(boot, metric, 'off', plain, 'none') for boot in pagers)
        for metric in METRICS}, 'kinds': {}}
    for boot in pagers:
        figures['kinds'][boot.kind.name] = {interval: dict(
            {metric: ratio(boot, metric, 'on', boot, 'off', interval)
             for metric in METRICS},
            blocked=of_phases(boot, 'blocked', 'on', interval)
            - of_phases(boot, 'blocked', 'off'),
            pager_cpu=of_phases(boot, 'pager_cpu', 'on', interval))
            for interval in intervals}
    return figures


def slowdowns(ratios):
    return sampled_guest.spread([1 - ratio for ratio in ratios])


def summarise(rounds, boots_by_round, intervals):
    """Over rounds (median, range): slowdowns (1 - ratio) by both
    metrics, the vCPU's extra blocked share and the pager's CPU, by kind
    and interval; the agent's CPU per interval and the pager's fault
    latencies and arming by kind (medians over boots)."""
    result = {'pager_presence_slowdown': {
        metric: slowdowns([r['presence'][metric] for r in rounds])
        for metric in METRICS}, 'kinds': {}}
    for name in rounds[0]['kinds']:
        boots = [boot for boots in boots_by_round for boot in boots
                 if boot.kind.name == name]
        stats = [boot.stats['sampling'] for boot in boots if boot.stats]
        agent = sorted(seconds for boot in boots
                       for seconds in boot.agent_seconds)
        by_interval = {}
        for interval in intervals:
            per_round = [r['kinds'][name][interval] for r in rounds]
            by_interval[str(interval)] = {
                'slowdown': slowdowns([f['ops_per_us'] for f in per_round]),
                'ready_slowdown': slowdowns([f['ready_ops_per_us']
                                             for f in per_round]),
                'extra_blocked': sampled_guest.spread(
                    [f['blocked'] for f in per_round]),
                'pager_cpu': sampled_guest.spread(
                    [f['pager_cpu'] for f in per_round]),
                'agent_cpu': median(agent) / interval if agent else None}
        result['kinds'][name] = {
            'intervals': by_interval,
            'agent_ms_per_interval': agent and 1e3 * median(agent),
            'agent_ms_p99': agent and 1e3 * agent[
                int(0.99 * (len(agent) - 1))],
            'minor_faults': sum(s['minor_faults'] for s in stats),
            'minor_p50_us': median(s['minor_p50_us'] for s in stats),
            'minor_p99_us': median(s['minor_p99_us'] for s in stats),
            'zap_p50_ms': milliseconds(stats, 'zap_p50_us'),
            'zap_p99_ms': milliseconds(stats, 'zap_p99_us'),
            'full_zap_p50_ms': milliseconds(stats, 'full_zap_p50_us'),
            'pager_rss_kib': median(boot.pager_rss_kib for boot in boots)}
    return result


def milliseconds(stats, key):
    return median(s.get(key) and s[key] / 1e3 for s in stats)


def number(value, form='%.2f'):
    return '-' if value is None else form % value


def table(result, plain_ops):
    """The summary as lines of text."""
    lines = ['%-24s %5s %22s %22s %22s %22s %7s' % (
        '', 'intvl', 'slowdown % (range)', 'not counting CPU wait',
        'vCPU blocked +%', 'pager CPU %', 'agent %')]
    percent = sampled_guest.percent
    for name, figures in result['kinds'].items():
        for interval, f in figures['intervals'].items():
            lines.append('%-24s %4gs %22s %22s %22s %22s %7s' % (
                name, float(interval), percent(f['slowdown']),
                percent(f['ready_slowdown']), percent(f['extra_blocked']),
                percent(f['pager_cpu']),
                number(f['agent_cpu'] and 100 * f['agent_cpu'], '%.3f')))
    presence = result['pager_presence_slowdown']
    lines.append('%-24s %5s %22s %22s   (no pager: %s ops/us, median)' % (
        'pager, not sampling', '', percent(presence['ops_per_us']),
        percent(presence['ready_ops_per_us']), number(plain_ops)))
    lines.append('')
    lines.append('%-24s %8s %8s %8s %9s %9s %9s %9s %9s' % (
        '', 'MINOR', 'p50 us', 'p99 us', 'zap p50', 'zap p99',
        'full p50', 'agent ms', 'RSS KiB'))
    for name, f in result['kinds'].items():
        lines.append('%-24s %8d %8s %8s %9s %9s %9s %9s %9s' % (
            name, f['minor_faults'], number(f['minor_p50_us'], '%.1f'),
            number(f['minor_p99_us'], '%.1f'), number(f['zap_p50_ms']),
            number(f['zap_p99_ms']), number(f['full_zap_p50_ms']),
            number(f['agent_ms_per_interval']),
            number(f['pager_rss_kib'], '%d')))
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=2,
                        help='boots of every kind, in turn (default 2)')
    parser.add_argument('--phase-seconds', type=float, default=10,
                        help='seconds per wsswork phase (default 10: one '
                             'default interval)')
    parser.add_argument('--short-interval', type=float, default=1.0,
                        help='the short interval, seconds (default 1)')
    parser.add_argument('--full-pass-every', type=int, default=1,
                        help='intervals between full passes in the full '
                             'pass boots (default 1: every interval is '
                             'one, so a phase at the default interval '
                             'holds one full pass)')
    parser.add_argument('--size-mb', type=int, default=64)
    parser.add_argument('--order', default='RWRW',
                        choices=('RWRW', 'RRWW', 'WWRR'))
    parser.add_argument('--guest-dir', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', 'build',
        'test-guest'))
    parser.add_argument('--build', help='a built hypervisor-patches/pager '
                        '(default: built into a scratch directory)')
    corpus = parser.add_argument_group('ordinary programs')
    corpus.add_argument('--workload', choices=sorted(guest_corpus.WORKLOADS),
                        help='one of guest_corpus\'s programs, sampled at '
                             'the adaptive rate (--rate auto) against a '
                             'baseline boot without sampling')
    corpus.add_argument('--rate', default='auto', choices=('auto',),
                        help='with --workload: the agent\'s adaptive rate')
    corpus.add_argument('--repeat', type=int, default=2,
                        help='times the workload runs per boot')
    corpus.add_argument('--interval', type=float, default=DEFAULT_INTERVAL,
                        help='seconds per interval (default 10)')
    corpus.add_argument('--vm-fault-budget', type=float,
                        help='[sampling] vm_fault_budget (default: its '
                             'default)')
    corpus.add_argument('--timeout', type=float, default=1800)
    args = parser.parse_args(argv)
    if min(args.rounds, args.full_pass_every, args.repeat) < 1:
        parser.error('--rounds, --full-pass-every and --repeat must be '
                     'positive')
    if args.phase_seconds <= 0 or args.short_interval <= 0:
        parser.error('--phase-seconds and --short-interval must be '
                     'positive')
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.workload:
        return corpus_cost.main(args)
    guest = sampled_guest.guest_or_exit(args.guest_dir)
    intervals = (DEFAULT_INTERVAL, args.short_interval)
    rounds, boots_by_round = [], []
    with tempfile.TemporaryDirectory(prefix='sc-', dir='/tmp') as scratch:
        build = args.build or services.build_pager(
            os.path.join(scratch, 'build'))
        for round_index in range(args.rounds):
            boots = []
            for kind in kinds(args.full_pass_every):
                boots.append(run_boot(
                    build, guest, scratch, kind,
                    schedule(kind, intervals, round_index), args))
                phases = ' '.join(
                    '%s%s:%.2f/%.2f' % (
                        p.mode, '' if p.interval is None
                        else '@%g' % p.interval, p.ops_per_us,
                        p.ready_ops_per_us)
                    for p in boots[-1].phases)
                print('  round %d, %s: %s' % (round_index + 1, kind.name,
                                              phases),
                      file=sys.stderr, flush=True)
            boots_by_round.append(boots)
            rounds.append(round_figures(boots, intervals))
    result = summarise(rounds, boots_by_round, intervals)
    plain_ops = median(phase.ops_per_us for boots in boots_by_round
                       for boot in boots for phase in boot.phases
                       if phase.mode == 'none')
    print('Guest %d MiB (TCG), wsswork %s over %d MiB, phases of %g s, '
          '%d rounds. Slowdown: 1 - (ops/us, sampling on) / (off, same '
          'boot); not counting CPU wait: the same over the time the vCPU '
          'did not wait for a CPU; vCPU blocked: the extra share of the '
          'phase the vCPU slept (faults); pager CPU: share of a core with '
          'sampling on; agent: share of a core at that interval' % (
              sampled_guest.GUEST_MB, args.order, args.size_mb,
              args.phase_seconds, args.rounds))
    print('\n'.join(table(result, plain_ops)))
    result.update(rounds=args.rounds, phase_seconds=args.phase_seconds,
                  order=args.order, size_mb=args.size_mb,
                  no_pager_ops_per_us=plain_ops, phases=[
                      dict(dataclasses.asdict(phase),
                           ops_per_us=phase.ops_per_us,
                           ready_ops_per_us=phase.ready_ops_per_us)
                      for boots in boots_by_round for boot in boots
                      for phase in boot.phases])
    print(json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
