"""memcanal-trace: analyse page-reference traces the way the agent does.

    memcanal-trace generate WORKLOAD OUTPUT [options]
    memcanal-trace logsim TRACE --mode pml|prl [options]
    memcanal-trace wss TRACE --estimator prl|pml|esx [options]
    memcanal-trace mrc TRACE --method exact|shards|shards_fixed_size|aet
    memcanal-trace mrc TRACE --method hcache --direct-mb X --cache-mb Y
    memcanal-trace simulate TRACE --memory-mb Z

``mrc --method hcache`` runs the trace through a guest page cache of X MB
above a hypervisor exclusive cache of Y MB and predicts the curve from
what the hypervisor saw, from X upward; ``simulate`` runs it through a
guest of Z MB alone and gives the miss ratio there, so a prediction can be
checked on any trace.

Each prints one JSON object on stdout. TRACE is any format of
memcanal.estimation.traces (by extension, or ``--format``); the same code
the agent runs does the work. Exit status 0 on success, 1 when a trace
cannot be read, 2 on a usage error.
"""

import argparse
import json
import sys
import time

import numpy as np

from memcanal import estimation
from memcanal.estimation import hcache
from memcanal.estimation import hcache_runs
from memcanal.estimation import mrc
from memcanal.estimation import observer
from memcanal.estimation import traces
from memcanal.estimation import workloads
from memcanal.estimation import wss as wss_estimators

MB = 2 ** 20
WORKLOADS = ('prl-synthetic', 'write-then-work', 'file-server', 'zipf',
             'uniform')


def _workload(args):
    rng = np.random.default_rng(args.seed)
    pages = args.size_mb * MB // args.page_size
    if args.workload == 'prl-synthetic':
        return workloads.PrlSyntheticApp(
            pages, args.order, args.pass_seconds, args.phase_seconds,
            args.write_intensity, rng)
    if args.workload == 'write-then-work':
        return workloads.WriteThenWork(
            pages, args.work_mb * MB // args.page_size, args.pass_seconds)
    if args.workload == 'file-server':
        return workloads.FileServer(
            args.pattern, args.files, args.file_mb, args.write_ratio, rng,
            args.page_size)
    return None


def generate(args):
    workload = _workload(args)
    if workload is None:
        count = args.references or 1_000_000
        pages = args.size_mb * MB // args.page_size
        stream = (workloads.zipf_pages(count, pages, args.alpha,
                                       np.random.default_rng(args.seed))
                  if args.workload == 'zipf' else workloads.uniform_pages(
                      count, pages, np.random.default_rng(args.seed)))
        trace, working_set = traces.Trace.of(stream), None
    else:
        trace = (workload.take(args.references) if args.references
                 else workload.run_for(args.duration))
        working_set = workload.working_set_pages * args.page_size
    traces.write(trace, args.output, args.format, args.page_size)
    return {
        'output': args.output,
        'format': traces.format_of(args.output, args.format),
        'references': len(trace),
        'writes': int(np.count_nonzero(trace.writes)),
        'distinct_pages': wss_estimators.distinct_pages(trace.pages),
        'working_set_bytes': working_set,
        'duration_s': float(trace.times_ns()[-1] / 1e9) if len(trace)
        else 0.0,
    }


def _settings(args):
    return observer.Settings(
        tau=args.tau, omega_s=args.omega, mu_s=args.mu,
        epsilon_bytes=int(args.epsilon_mb * MB),
        log_entries=args.log_entries, tlb_entries=args.tlb_entries,
        handler_base_ns=args.handler_base_ns,
        handler_entry_ns=args.handler_entry_ns,
        esx_sample_pages=args.esx_sample_pages,
        esx_period_s=args.esx_period, page_size=args.page_size)


def _memory_pages(args, trace):
    if args.memory_mb:
        return args.memory_mb * MB // args.page_size
    return int(trace.pages.max()) + 1 if len(trace) else 1


def logsim(args):
    trace = _read(args)
    vm = observer.VmObserver(_memory_pages(args, trace), _settings(args))
    log = vm.prl_log if args.mode == 'prl' else vm.pml_log
    delivered = log.feed(trace)
    return dict(mode=args.mode, log_entries=args.log_entries,
                references=len(trace),
                delivered_gpas=len(delivered.gpas),
                delivered_distinct_pages=wss_estimators.distinct_pages(
                    delivered.gpas),
                **log.stats.as_dict())


def wss(args):
    trace = _read(args)
    vm = observer.VmObserver(_memory_pages(args, trace), _settings(args),
                             seed=args.seed)
    timeline = observer.replay(trace, vm)
    estimates = [(entry['time_s'], entry[args.estimator])
                 for entry in timeline if args.estimator in entry]
    first = estimates[0] if estimates else (None, None)
    return {
        'estimator': args.estimator,
        'references': len(trace),
        'wss_bytes': first[1],
        'converged_at_s': first[0],
        'latest_wss_bytes': estimates[-1][1] if estimates else None,
        'iterations': len(timeline),
        'distinct_pages': wss_estimators.distinct_pages(trace.pages),
    }


def _pages(args, megabytes):
    return int(megabytes * MB) // args.page_size


def _run_counts(result):
    return {'references': result.accesses, 'misses': result.misses,
            'device_reads': result.device_reads,
            'device_writes': result.device_writes,
            'corrupted_reads': result.corrupted}


def _hcache_mrc(args, trace):
    result = hcache_runs.traced(
        trace, max(1, _pages(args, args.direct_mb)),
        _pages(args, args.cache_mb), args.write_policy, args.warmup)
    return result.curve, dict(_run_counts(result), direct_mb=args.direct_mb,
                              cache_mb=args.cache_mb,
                              write_policy=args.write_policy,
                              warmup=args.warmup)


def mrc_command(args):
    trace = _read(args)
    started = time.perf_counter()
    if args.method == 'hcache':
        curve, extra = _hcache_mrc(args, trace)
    else:
        curve, extra = _sampled_mrc(args, trace), {'references': len(trace)}
    seconds = time.perf_counter() - started
    return dict(extra, method=args.method, seconds=seconds,
                points=curve.compact(args.points, args.page_size))


def simulate(args):
    """The miss ratio of a VM of --memory-mb alone, to check a prediction."""
    trace = _read(args)
    result = hcache_runs.vm_only(
        trace, max(1, _pages(args, args.memory_mb)), args.warmup)
    return dict(_run_counts(result), memory_mb=args.memory_mb,
                warmup=args.warmup, miss_ratio=result.miss_ratio)


def _sampled_mrc(args, trace):
    options = {'shards': dict(rate=args.rate, salt=args.salt),
               'shards_fixed_size': dict(max_pages=args.max_pages,
                                         salt=args.salt)}
    return mrc.METHODS[args.method](trace.pages,
                                    **options.get(args.method, {}))


def _read(args):
    return traces.read(args.trace, args.format, args.page_size)


def _megabytes(text):
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError('must not be negative')
    return value


def _count(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError('must not be negative')
    return value


def _add_warmup(parser):
    parser.add_argument('--warmup', type=_count, default=0,
                        help='leading references run but not counted, for '
                             'hcache and simulate (default 0)')


def _parser():
    parser = argparse.ArgumentParser(
        prog='memcanal-trace', description=__doc__.split('\n')[0])
    commands = parser.add_subparsers(dest='command', required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--format', choices=traces.FORMATS,
                        help='trace format (default: from the extension)')
    common.add_argument('--page-size', type=int,
                        default=estimation.PAGE_SIZE)
    common.add_argument('--seed', type=int, default=0)

    gen = commands.add_parser('generate', parents=[common],
                              help='write a workload of the papers to a file')
    gen.add_argument('workload', choices=WORKLOADS)
    gen.add_argument('output')
    gen.add_argument('--duration', type=float, default=60.0,
                     help='seconds of run (default 60)')
    gen.add_argument('--references', type=int,
                     help='this many references instead of --duration')
    gen.add_argument('--size-mb', type=int, default=400,
                     help='array (prl-synthetic), all x (write-then-work) '
                          'or page range (zipf, uniform), MB')
    for flag, kind, default, choices in (
            ('--order', str, 'RWRW', workloads.PRL_ORDERS),
            ('--pass-seconds', float, 2.0, None),
            ('--phase-seconds', float, 60.0, None),
            ('--write-intensity', float, 0.5, None),
            ('--work-mb', int, 100, None),
            ('--pattern', str, 'zipf', workloads.FILE_PATTERNS),
            ('--files', int, 500, None),
            ('--file-mb', int, 4, None),
            ('--write-ratio', float, 0.0, None),
            ('--alpha', float, 1.0, None)):
        gen.add_argument(flag, type=kind, default=default, choices=choices,
                         help='(default %s)' % default)
    gen.set_defaults(func=generate)

    estimation_options = argparse.ArgumentParser(add_help=False)
    settings = observer.Settings()
    for flag, kind, default, what in (
            ('--tau', int, settings.tau, 'PRL: log entries for a hot page'),
            ('--omega', float, settings.omega_s, 'PRL: stability window, s'),
            ('--mu', float, settings.mu_s, 'observation interval, s'),
            ('--epsilon-mb', float, 0.0, 'PRL: guest kernel footprint'),
            ('--log-entries', int, settings.log_entries, 'log size'),
            ('--tlb-entries', int, settings.tlb_entries, 'TLB size (PRL)'),
            ('--handler-base-ns', int, settings.handler_base_ns,
             'log-full handler cost'),
            ('--handler-entry-ns', int, settings.handler_entry_ns,
             'log-full handler cost per entry'),
            ('--esx-sample-pages', int, settings.esx_sample_pages,
             'ESX: pages sampled per period'),
            ('--esx-period', float, settings.esx_period_s,
             'ESX: sampling period, s'),
            ('--memory-mb', int, 0,
             "the VM's memory (default: up to the highest page)")):
        estimation_options.add_argument(
            flag, type=kind, default=default,
            help='%s (default %s)' % (what, default))

    log = commands.add_parser('logsim', parents=[common, estimation_options],
                              help='emulate the PML or PRL log buffers')
    log.add_argument('trace')
    log.add_argument('--mode', choices=('pml', 'prl'), required=True)
    log.set_defaults(func=logsim)

    estimate = commands.add_parser(
        'wss', parents=[common, estimation_options],
        help='estimate the working-set size')
    estimate.add_argument('trace')
    estimate.add_argument('--estimator', choices=('prl', 'pml', 'esx'),
                          required=True)
    estimate.set_defaults(func=wss)

    curve = commands.add_parser('mrc', parents=[common],
                                help='compute the miss-ratio curve')
    curve.add_argument('trace')
    curve.add_argument('--method', choices=sorted(mrc.METHODS) + ['hcache'],
                       default='exact')
    curve.add_argument('--rate', type=float, default=0.01,
                       help='SHARDS sampling rate (default 0.01)')
    curve.add_argument('--max-pages', type=int, default=8192,
                       help='fixed-size SHARDS sample (default 8192)')
    curve.add_argument('--salt', type=int, default=mrc.DEFAULT_SALT)
    curve.add_argument('--points', type=int, default=256,
                       help='most points printed (default 256)')
    for flag, what in (('--direct-mb', "hcache: the VM's own memory"),
                       ('--cache-mb', 'hcache: the hypervisor cache')):
        curve.add_argument(flag, type=_megabytes, help=what + ', MB')
    curve.add_argument('--write-policy', choices=hcache.WRITE_POLICIES,
                       default='delayed',
                       help='hcache: the cache\'s writes (default delayed)')
    _add_warmup(curve)
    curve.set_defaults(func=mrc_command)

    alone = commands.add_parser(
        'simulate', parents=[common],
        help="a VM's miss ratio at one memory size, without a hypervisor "
             'cache')
    alone.add_argument('trace')
    alone.add_argument('--memory-mb', type=_megabytes, required=True)
    _add_warmup(alone)
    alone.set_defaults(func=simulate)
    return parser


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, 'method', None) == 'hcache' and None in (
            args.direct_mb, args.cache_mb):
        parser.error('--method hcache needs --direct-mb and --cache-mb')
    try:
        result = args.func(args)
    except (OSError, ValueError) as err:
        print('memcanal-trace: %s' % err, file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
