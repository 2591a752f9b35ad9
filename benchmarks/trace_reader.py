"""Reading a text trace against reading the same trace as .npy.

    .venv/bin/python benchmarks/trace_reader.py [--refs 10000000]
        [--pages 102400] [--repeat 5] [--work-dir DIR]

Writes one Zipf(1.0) trace of ``--refs`` references over ``--pages``
pages, a fifth of them writes, as .npy and as two text files: ``hex``,
as ``traces.write`` makes them (``0x1f000 R``), and ``decimal``, decimal
addresses with a flag on some lines, blank and comment lines and trailing
comments. Then, in this process and alternating the files so that other
load on the machine falls on all of them alike, the best of ``--repeat``
wall times of:

- ``read``: ``traces.read(path)`` and a contiguous copy of its pages (a
  .npy is only memory-mapped until its pages are touched);
- ``mrc``: ``mrc.exact(traces.read(path).pages)``, the work of
  ``memcanal-trace mrc``.

Then ``memcanal-trace mrc`` on each file as a child process, best of
``--repeat``, with its peak RSS (the child's own, from wait4). Each text
time is printed as a ratio of the .npy time. The goal, as issue 26 puts
it: ``memcanal-trace mrc`` on a text trace within 2x of the same trace in
.npy; the in-process ``mrc`` ratio, without the interpreter's start, is
the stricter figure. The files stay in the page cache (a warm-up read comes
first). It is a benchmark, not a test: it exits 0 whether or not the goal
is met.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from memcanal.estimation import mrc
from memcanal.estimation import traces
from memcanal.estimation import workloads

GOAL = 2.0
PAGE_SIZE = 4096
WRITE_SHARE = 0.2


def log(message):
    print('[trace_reader] %s' % message, file=sys.stderr, flush=True)


def decimal_text(trace):
    """The trace in decimal with the syntax's other forms mixed in."""
    lines = []
    for i, (page, write) in enumerate(zip(trace.pages.tolist(),
                                          trace.writes.tolist())):
        line = '%d' % (page * PAGE_SIZE)
        if write or i % 3 == 0:
            line += ' W' if write else '\tr'
        if i % 1000 == 0:
            line += '  # a trailing comment'
            lines.append('')
            lines.append('# a comment line')
        lines.append(line)
    return '\n'.join(lines) + '\n'


def write_files(work, refs, pages, seed):
    rng = np.random.default_rng(seed)
    trace = traces.Trace.of(workloads.zipf_pages(refs, pages, 1.0, rng),
                            writes=rng.random(refs) < WRITE_SHARE)
    files = {name: os.path.join(work, 'trace.' + extension)
             for name, extension in (('npy', 'npy'), ('hex', 'txt'),
                                     ('decimal', 'trace'))}
    traces.write(trace, files['npy'])
    traces.write(trace, files['hex'])
    with open(files['decimal'], 'w') as f:
        f.write(decimal_text(trace))
    return trace, files


def warm(path):
    with open(path, 'rb', buffering=0) as f:
        while f.read(1 << 24):
            pass


def read_pages(path):
    return np.ascontiguousarray(traces.read(path).pages)


def exact_curve(path):
    return mrc.exact(traces.read(path).pages)


def best_times(work, files, repeat):
    """The best wall time of ``work(path)`` per file, runs interleaved."""
    best = dict.fromkeys(files, float('inf'))
    for _ in range(repeat):
        for name, path in files.items():
            started = time.perf_counter()
            work(path)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


# Linux carries a process's peak RSS across fork and exec: a command
# started from this process, which holds the trace, would report ours. A
# small launcher starts it instead and reports its wall time and peak RSS.
LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - started, usage.ru_maxrss,
      os.waitstatus_to_exitcode(status))
"""


def cli_runs(files, repeat):
    """Best wall time and highest peak RSS (MB) of ``memcanal-trace mrc``
    per file."""
    script = os.path.join(os.path.dirname(sys.executable), 'memcanal-trace')
    best = {name: (float('inf'), 0.0) for name in files}
    for _ in range(repeat):
        for name, path in files.items():
            seconds, rss_kb, status = subprocess.run(
                [sys.executable, '-c', LAUNCHER, script, 'mrc', path,
                 '--points', '4'], capture_output=True, text=True,
                check=True).stdout.split()
            if int(status):
                raise RuntimeError('memcanal-trace failed on %s' % path)
            best[name] = (min(best[name][0], float(seconds)),
                          max(best[name][1], int(rss_kb) / 1024))
    return best


def print_table(title, seconds, sizes, refs, rss=None):
    print('\n%s' % title)
    print('%-8s %10s %9s %10s %7s%s' % (
        'file', 'MB', 'best s', 'M refs/s', 'vs npy',
        ' %9s' % 'peak RSS' if rss else ''))
    for name, value in seconds.items():
        print('%-8s %10.1f %9.3f %10.2f %6.2fx%s' % (
            name, sizes[name] / 1e6, value, refs / value / 1e6,
            value / seconds['npy'],
            ' %6.0f MB' % rss[name] if rss else ''))


def print_goal(label, seconds):
    worst = max(seconds['hex'], seconds['decimal']) / seconds['npy']
    print('goal: %s on text within %.0fx of .npy: %.2fx -> %s' % (
        label, GOAL, worst, 'goal met' if worst <= GOAL else 'goal NOT met'))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--refs', type=int, default=10_000_000)
    parser.add_argument('--pages', type=int, default=102_400)
    parser.add_argument('--repeat', type=int, default=5,
                        help='runs of each; the best time counts')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--work-dir',
                        help='where the traces go, kept (default: a '
                             'temporary directory, removed)')
    args = parser.parse_args(argv)
    work = args.work_dir or tempfile.mkdtemp(prefix='memcanal-trace-reader-')
    os.makedirs(work, exist_ok=True)
    try:
        log('writing %d references as .npy, hex and decimal text'
            % args.refs)
        trace, files = write_files(work, args.refs, args.pages, args.seed)
        sizes = {name: os.path.getsize(path) for name, path in files.items()}
        for name, path in files.items():
            back = traces.read(path)
            if not (np.array_equal(back.pages, trace.pages)
                    and np.array_equal(back.writes, trace.writes)):
                raise RuntimeError('%s does not read back' % path)
            warm(path)
        print('%d references over %d pages, best of %d' % (
            args.refs, args.pages, args.repeat))
        log('timing traces.read')
        print_table('read: traces.read(path) + contiguous pages',
                    best_times(read_pages, files, args.repeat), sizes,
                    args.refs)
        log('timing traces.read + mrc.exact')
        curve = best_times(exact_curve, files, args.repeat)
        print_table('mrc: mrc.exact(traces.read(path).pages)', curve, sizes,
                    args.refs)
        log('timing memcanal-trace mrc')
        runs = cli_runs(files, args.repeat)
        command = {name: run[0] for name, run in runs.items()}
        print_table('memcanal-trace mrc PATH (child process)', command,
                    sizes, args.refs,
                    {name: run[1] for name, run in runs.items()})
        print()
        print_goal('memcanal-trace mrc', command)
        print_goal('in process, mrc', curve)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
