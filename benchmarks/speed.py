"""Speed and accuracy of memcanal's LRU miss-ratio curves against libCacheSim.

    .venv/bin/python benchmarks/speed.py [--refs 10000000] [--pages 100000]
        [--rate 0.001] [--repeat 3] [--work-dir DIR] [--plot mrc.png]

Builds (or reuses) libCacheSim's ``distUtil`` and ``mrcProfiler`` with
``libcachesim_tools.build``, then generates two traces of ``--refs``
references over ``--pages`` pages with a fixed seed, Zipf(alpha=1.0) and
uniform, and writes each as one libCacheSim ``oracleGeneral`` file that
both sides read. For each trace, in this process and after a warm-up read
that puts the file in the page cache, it measures wall time (best of
``--repeat``; ``--distutil-repeat``, 1 by default, for the slow distUtil):

- exact stack distances: distUtil against ``mrc.exact``;
- SHARDS at a fixed rate ``--rate``: mrcProfiler (``--profiler=SHARDS``,
  ``FIX_RATE``) against ``mrc.shards_fixed_rate``;
- ``mrc.shards_fixed_size`` (``--fixed-size`` pages) and ``mrc.aet``,
  which have no libCacheSim counterpart here: throughput only.

memcanal is timed end to end from the file, ``mrc.exact(traces.read(path)
.pages)`` (memory-mapping included), as the C tools include their
reading; the tools' times are those of their subprocesses.

Accuracy is the mean absolute error (MAE) of each curve against the exact
one (distUtil's, which memcanal's exact curve must equal: the largest
difference at any size is reported) at 100 sizes evenly spaced from 1 %
to 100 % of ``--pages``. At rate 0.001 only about a hundred pages are
sampled and the error depends much on the hash salt, so SHARDS is judged
twice: with each tool's default salt (single run) and averaged over
``--salts`` salts drawn from the seed, the same salts for both tools.

Prints one table per trace (refs/s, the memcanal/libCacheSim ratio, MAEs)
and the goals: exact at least 5x libCacheSim's speed; SHARDS at least 2x
with an MAE (averaged over salts) no worse than libCacheSim's at the same
rate. Exits 0 whether or not they are met: it is a benchmark, not a test.
``--plot FILE.png`` draws the Zipf trace's curves if matplotlib is there.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import libcachesim_tools as lcs
from memcanal.estimation import mrc
from memcanal.estimation import traces
from memcanal.estimation import workloads

EXACT_GOAL = 5.0
SHARDS_GOAL = 2.0
ZIPF_ALPHA = 1.0
POINTS = 100
_START = time.perf_counter()


def log(message):
    print('[speed %6.1fs] %s' % (time.perf_counter() - _START, message),
          file=sys.stderr, flush=True)


def warm(path):
    """Read the whole file once so that every run finds it cached."""
    with open(path, 'rb', buffering=0) as f:
        while f.read(1 << 24):
            pass


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def side_by_side(theirs, ours, their_runs, our_runs):
    """Alternate the two, best wall time of each and its last result.

    ``theirs`` returns a libcachesim_tools result (its ``seconds`` is the
    subprocess's wall time); ``ours`` is timed here.
    """
    their_best = our_best = float('inf')
    their_result = our_result = None
    for i in range(max(their_runs, our_runs)):
        if i < their_runs:
            their_result = theirs()
            their_best = min(their_best, their_result['seconds'])
        if i < our_runs:
            seconds, our_result = timed(ours)
            our_best = min(our_best, seconds)
    return their_best, their_result, our_best, our_result


def best_of(function, runs):
    best, result = float('inf'), None
    for _ in range(runs):
        seconds, result = timed(function)
        best = min(best, seconds)
    return best, result


def mae(estimate, exact):
    return float(np.mean(np.abs(np.asarray(estimate) - exact)))


def measure(name, path, refs, binaries, args, sizes, salts):
    """Every number of one trace's table, as a dict."""
    log('%s: warm-up read of %s' % (name, path))
    warm(path)
    row = {'name': name}

    def ours_exact():
        return mrc.exact(traces.read(path).pages)

    log('%s: distUtil x%d, mrc.exact x%d' % (
        name, args.distutil_repeat, args.repeat))
    their_s, dist, our_s, exact = side_by_side(
        lambda: lcs.run_distutil(binaries, path), ours_exact,
        args.distutil_repeat, args.repeat)
    truth = lcs.curve_at(dist, sizes)
    every = np.arange(1, args.pages + 1)
    row['exact'] = (their_s, our_s, 0.0, mae(exact.at(sizes), truth))
    row['exact_max_diff'] = float(np.max(np.abs(
        exact.at(every) - lcs.curve_at(dist, every))))
    row['exact_curve'] = (every, lcs.curve_at(dist, every))

    def ours_shards(salt=mrc.DEFAULT_SALT):
        return mrc.shards_fixed_rate(traces.read(path).pages, args.rate,
                                     salt=salt)

    log('%s: mrcProfiler SHARDS x%d, mrc.shards_fixed_rate x%d' % (
        name, args.repeat, args.repeat))
    their_s, prof, our_s, shards = side_by_side(
        lambda: lcs.run_mrc_profiler_shards(binaries, path, args.rate, sizes),
        ours_shards, args.repeat, args.repeat)
    row['shards'] = (their_s, our_s, mae(prof['miss_ratios'], truth),
                     mae(shards.at(sizes), truth))
    row['shards_curves'] = (prof['miss_ratios'], shards.at(sizes))

    log('%s: SHARDS MAE over %d salts' % (name, len(salts)))
    their_errors, our_errors = [], []
    for salt in salts:
        prof = lcs.run_mrc_profiler_shards(binaries, path, args.rate, sizes,
                                           salt=int(salt))
        their_errors.append(mae(prof['miss_ratios'], truth))
        our_errors.append(mae(ours_shards(int(salt)).at(sizes), truth))
    row['shards_salts'] = (their_errors, our_errors)

    log('%s: mrc.shards_fixed_size x%d, mrc.aet x%d' % (
        name, args.repeat, args.repeat))
    seconds, curve = best_of(lambda: mrc.shards_fixed_size(
        traces.read(path).pages, args.fixed_size), args.repeat)
    row['fixed_size'] = (None, seconds, None, mae(curve.at(sizes), truth))
    seconds, curve = best_of(lambda: mrc.aet(traces.read(path).pages),
                             args.repeat)
    row['aet'] = (None, seconds, None, mae(curve.at(sizes), truth))
    row['refs'] = refs
    return row


def _rate(refs, seconds):
    if seconds is None:
        return '%22s' % '-'
    return '%9.2f M (%7.3f s)' % (refs / seconds / 1e6, seconds)


def _error(value):
    return '%9s' % '-' if value is None else '%9.5f' % value


def _sem(values):
    if len(values) < 2:
        return float('nan')
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def print_table(row, args, salts):
    refs = row['refs']
    print('\n%s trace: %d references over %d pages' % (
        row['name'], refs, args.pages))
    print('%-40s %22s %22s %7s %9s %9s' % (
        'method', 'libCacheSim refs/s', 'memcanal refs/s', 'ratio',
        'MAE lcs', 'MAE mcnl'))
    print('%-40s %22s %22s %7s' % ('', '(best time)', '(best time)',
                                   'mc/lcs'))
    lines = [
        ('exact: distUtil | mrc.exact', row['exact']),
        ('SHARDS %g default salt (single run)' % args.rate, row['shards']),
        ('SHARDS fixed size %d (memcanal only)' % args.fixed_size,
         row['fixed_size']),
        ('AET (memcanal only)', row['aet']),
    ]
    for label, (theirs, ours, their_mae, our_mae) in lines:
        ratio = '%6.2fx' % (theirs / ours) if theirs else '%7s' % '-'
        print('%-40s %s %s %s %s %s' % (label, _rate(refs, theirs),
                                        _rate(refs, ours), ratio,
                                        _error(their_mae), _error(our_mae)))
    their_errors, our_errors = row['shards_salts']
    print('%-40s %22s %22s %7s %9.5f %9.5f' % (
        'SHARDS %g MAE, mean of %d salts' % (args.rate, len(salts)),
        '', '', '', np.mean(their_errors), np.mean(our_errors)))
    print('%-40s %22s %22s %7s %9.5f %9.5f' % (
        '  standard error of that mean', '', '', '',
        _sem(their_errors), _sem(our_errors)))
    print('%-40s %22s %22s %7s %9.5f %9.5f' % (
        '  worst of those salts', '', '', '',
        np.max(their_errors), np.max(our_errors)))
    print('memcanal exact vs distUtil, all sizes 1..%d: max |diff| = %g' % (
        args.pages, row['exact_max_diff']))

    theirs, ours = row['exact'][:2]
    ratio = theirs / ours
    met = ratio >= EXACT_GOAL
    print('goal exact  >= %.0fx: %.2fx -> %s' % (
        EXACT_GOAL, ratio, 'goal met' if met else 'goal NOT met'))
    theirs, ours, their_single, our_single = row['shards']
    ratio = theirs / ours
    their_mean, our_mean = (np.mean(e) for e in row['shards_salts'])
    met = ratio >= SHARDS_GOAL and our_mean <= their_mean
    print('goal SHARDS >= %.0fx, MAE (mean of %d salts) <= libCacheSim\'s: '
          '%.2fx, %.5f vs %.5f -> %s' % (
              SHARDS_GOAL, len(salts), ratio, our_mean, their_mean,
              'goal met' if met else 'goal NOT met'))
    noise = np.hypot(*(_sem(e) for e in row['shards_salts']))
    print('  (MAE difference %+.5f, standard error %.5f; single default '
          'salt: MAE %.5f vs %.5f, %s)' % (
              our_mean - their_mean, noise, our_single, their_single,
              'no worse' if our_single <= their_single else 'worse'))


def plot(row, sizes, args):
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        print('no matplotlib: skipping --plot (pip install -r '
              'benchmarks/requirements.txt)', file=sys.stderr)
        return
    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    every, exact = row['exact_curve']
    theirs, ours = row['shards_curves']
    label = 'exact (distUtil%s)' % (
        ' = memcanal' if row['exact_max_diff'] == 0 else '')
    axes.plot(every, exact, color='black', label=label)
    axes.plot(sizes, theirs, drawstyle='steps-post', marker='.',
              label='libCacheSim SHARDS %g' % args.rate)
    axes.plot(sizes, ours, drawstyle='steps-post', marker='.',
              label='memcanal SHARDS %g' % args.rate)
    axes.set_xlabel('LRU memory size (pages)')
    axes.set_ylabel('miss ratio')
    axes.set_title('%s trace: %d references over %d pages (default salts)'
                   % (row['name'], row['refs'], args.pages))
    axes.legend()
    figure.tight_layout()
    figure.savefig(args.plot, dpi=100)
    print('plot: %s' % args.plot)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--refs', type=int, default=10_000_000)
    parser.add_argument('--pages', type=int, default=100_000)
    parser.add_argument('--rate', type=float, default=0.001,
                        help='SHARDS sampling rate, both tools')
    parser.add_argument('--repeat', type=int, default=3,
                        help='runs of each method; the best time counts')
    parser.add_argument('--distutil-repeat', type=int, default=1,
                        help='runs of distUtil (about 5 s per 10 M refs)')
    parser.add_argument('--salts', type=int, default=5,
                        help='salts the SHARDS MAE is averaged over')
    parser.add_argument('--fixed-size', type=int, default=8192,
                        help='pages shards_fixed_size keeps')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--work-dir', default=str(lcs.DEFAULT_WORK_DIR),
                        help='where libCacheSim is built (kept)')
    parser.add_argument('--plot', metavar='PNG',
                        help='draw the Zipf curves into this file '
                        '(matplotlib)')
    args = parser.parse_args(argv)
    if args.pages < POINTS:
        parser.error('--pages must be at least %d' % POINTS)
    if min(args.repeat, args.distutil_repeat, args.salts) < 1:
        parser.error('--repeat, --distutil-repeat and --salts must be >= 1')

    log('building or reusing libCacheSim in %s' % args.work_dir)
    binaries = lcs.build(args.work_dir)
    log('libCacheSim tools: %s' % ', '.join(binaries.values()))
    sizes = np.unique(np.round(
        np.linspace(0.01, 1.0, POINTS) * args.pages).astype(np.int64))
    rng = np.random.default_rng(args.seed)
    salts = rng.integers(1, 2 ** 31 - 1, size=args.salts)
    print('memcanal vs libCacheSim %s: %d refs, %d pages, seed %d; best of '
          '%d runs (distUtil: %d); MAE at %d sizes from %d to %d pages' % (
              lcs.LIBCACHESIM_VERSION, args.refs, args.pages, args.seed,
              args.repeat, args.distutil_repeat, len(sizes), sizes[0],
              sizes[-1]))
    print('SHARDS default salts: libCacheSim %d, memcanal %#x; averaged '
          'over salts %s (both tools)' % (
              lcs.DEFAULT_SHARDS_SALT, mrc.DEFAULT_SALT,
              ', '.join(str(s) for s in salts)))

    work = tempfile.mkdtemp(prefix='memcanal-speed-')
    rows = []
    try:
        generators = [
            ('Zipf(%g)' % ZIPF_ALPHA, lambda: workloads.zipf_pages(
                args.refs, args.pages, ZIPF_ALPHA, rng)),
            ('uniform', lambda: workloads.uniform_pages(
                args.refs, args.pages, rng)),
        ]
        for name, generate in generators:
            log('%s: generating %d references' % (name, args.refs))
            pages = generate()
            path = os.path.join(work, '%s.oracleGeneral' % name.split('(')[0])
            log('%s: writing %s' % (name, path))
            traces.write(traces.Trace.of(pages), path)
            del pages
            rows.append(measure(name, path, args.refs, binaries, args, sizes,
                                salts))
            os.unlink(path)
            print_table(rows[-1], args, salts)
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.plot:
        plot(rows[0], sizes, args)
    log('done')
    print('total wall time: %.1f s' % (time.perf_counter() - _START))
    return 0


if __name__ == '__main__':
    sys.exit(main())
