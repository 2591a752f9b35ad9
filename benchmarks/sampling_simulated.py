"""How close sampled first touches come to the truth, on the simulated
workloads.

    flock /tmp/memcanal-guest.lock \\
        .venv/bin/python benchmarks/sampling_simulated.py [--intervals 48]

Each workload runs in a VM of 1 GiB, 200,000 references (the simulated
driver's default) per interval of 10 s (memcanal-pager's default). Its
references go through the simulated pager's sampling
(memcanal.agent.drivers.simulated_sampling: what memcanal-pager sees,
full passes included) at each rate and salt, into SampledAccesses; its
exact per-interval page sets (sampling.interval_sets) go into
SampledAccesses at rate 1: the ground truth. Per workload and rate, the
mean over salts of:

- ``wss``: the mean relative error of the per-interval working set;
- ``window``: the same for PRL's window (12 intervals, its 120 s);
- ``curve``: the mean absolute error (sampling.curve_error) of the
  sampled curve against the exact interval-granular curve, averaged over
  the intervals from the 24th on (12 of them for the curve's window and
  12 more for its reuse times).

And per workload ``lru``: how far the exact interval curve is from the
per-reference LRU curve of the same first touches (their stack
distances, mrc.stack_distances), both as the share of first touches
that miss, at the last interval. Ends with one JSON line holding
``wss_error`` and ``curve_mae`` by rate (means over the workloads) and
everything by workload.
"""

import argparse
import json

import numpy as np

from memcanal.agent.drivers import simulated_sampling
from memcanal.estimation import mrc
from memcanal.estimation import sampling
from memcanal.estimation import traces
from memcanal.estimation import workloads

VM_PAGES = 2 ** 30 // 4096
INTERVAL_NS = 10 * 10 ** 9
REFERENCES = 200_000
WINDOW = 12
SETTLED = 24
SALTS = (mrc.DEFAULT_SALT, 1, 2)
MB = 2 ** 20


class Stream(workloads.Workload):
    """A page stream of a workloads function, in rounds of one interval."""

    def __init__(self, pages):
        super().__init__()
        self._pages = pages

    def _round(self):
        pages = self._pages(REFERENCES)
        return pages, np.zeros(pages.size, bool)


def workloads_by_name(rng):
    """Fresh workloads, each with a known shape of curve."""
    return {
        # Every page of 128 MiB every interval: a cliff at one interval.
        'uniform': Stream(lambda count: workloads.uniform_pages(
            count, 32768, rng)),
        # A skewed curve over 512 MiB.
        'zipf': Stream(lambda count: workloads.zipf_pages(
            count, 131072, 1.0, rng)),
        # PRL's array of 256 MiB read and written, a pass every 4
        # intervals: each page comes back after exactly 4.
        'loop': workloads.PrlSyntheticApp(65536, 'RWRW', pass_seconds=40),
        # Hcache's Zipf file server over 500 files of 1 MB, a tenth
        # overwritten.
        'fileserver': workloads.FileServer('zipf', files=500, file_mb=1,
                                           write_ratio=0.1, rng=rng),
        # DaCapo-like programs of 60, 300 and 120 MB in turn.
        'phases': workloads.DacapoLike(
            phases=(('a', 60, 120), ('b', 300, 90), ('c', 120, 60)),
            rng=rng),
        # TPC-C-like OLTP growing from 100 MB by 0.5 MB/s.
        'growth': workloads.TpccLike(start_mb=100, growth_mb_per_s=0.5,
                                     max_mb=800, rng=rng),
    }


def references(workload, intervals):
    """The workload's references over ``intervals``, inside the VM."""
    if workload.__class__ is not workloads.PrlSyntheticApp:
        workload.reference_ns = INTERVAL_NS // REFERENCES
    trace = workload.run_for(intervals * INTERVAL_NS / 1e9)
    inside = np.asarray(trace.pages) < VM_PAGES
    return traces.Trace(trace.pages[inside], trace.writes[inside],
                        trace.times[inside], trace.vcpus[inside])


def estimates(sets, rate, salt):
    """Per interval: the working set, PRL's window's, and the curve
    from the SETTLED-th interval on."""
    sampled = sampling.SampledAccesses(VM_PAGES, rate, salt,
                                       INTERVAL_NS / 1e9, WINDOW)
    per_interval = []
    for touched, written, full in sets:
        sampled.add_interval(touched, written, full)
        per_interval.append((sampled.wss_bytes(), sampled.window_wss_bytes(),
                             sampled.curve() if len(per_interval) + 1
                             >= SETTLED else None))
    return per_interval


def pager_sets(trace, rate, salt, intervals):
    """What memcanal-pager's sampling gives for ``trace``."""
    sampler = simulated_sampling.Sampler(VM_PAGES, simulated_sampling.Settings(
        rate, INTERVAL_NS, 12, salt))
    sampler.access(trace.pages, trace.writes, trace.times_ns())
    sampler.advance(intervals * INTERVAL_NS)
    return [(i.touched, i.written, i.full) for i in sampler.take()]


def relative_error(estimated, exact):
    exact = np.array(exact, float)
    counted = exact > 0
    return float(np.mean(np.abs(np.array(estimated, float)[counted]
                                - exact[counted]) / exact[counted]))


def lru_gap(trace, intervals, truth):
    """How far the exact interval curve is from the LRU curve of the
    last window's first touches."""
    pages = mrc.as_pages(trace.pages)
    distances = mrc.stack_distances(pages)
    index = trace.times_ns() // INTERVAL_NS
    # Each interval's first reference of each page.
    first = np.unique(index * VM_PAGES + pages, return_index=True)[1]
    first = first[index[first] >= intervals - WINDOW]
    events = distances[first]
    largest = max(1, int(events.max()))
    misses = np.bincount(events, minlength=largest + 1)
    longer = misses[0] + misses[1:].sum() - np.cumsum(misses[1:])
    lru = mrc.MissRatioCurve(np.arange(1, largest + 1), longer / events.size,
                             events.size)
    return sampling.curve_error(truth, lru)


def run(workload, intervals, rates):
    trace = references(workload, intervals)
    exact_sets = [(touched, written, True) for touched, written in
                  sampling.interval_sets(trace, INTERVAL_NS)]
    exact_sets += [(np.empty(0, np.int64),) * 2 + (True,)] * (
        intervals - len(exact_sets))
    exact = estimates(exact_sets, 1.0, mrc.DEFAULT_SALT)
    result = {'wss_pages': int(np.mean([w for w, _, _ in exact]) / 4096),
              'lru': lru_gap(trace, intervals, exact[-1][2])}
    for rate in rates:
        errors = []
        for salt in SALTS:
            sampled = estimates(pager_sets(trace, rate, salt, intervals),
                                rate, salt)
            errors.append([
                relative_error([s[0] for s in sampled],
                               [e[0] for e in exact]),
                relative_error([s[1] for s in sampled],
                               [e[1] for e in exact]),
                float(np.mean([sampling.curve_error(s[2], e[2])
                               for s, e in zip(sampled, exact)
                               if e[2] is not None and s[2] is not None]))])
        wss, window, curve = np.mean(errors, axis=0)
        result[str(rate)] = {'wss': wss, 'window': window, 'curve': curve}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--intervals', type=int, default=48,
                        help='intervals of 10 s per workload (default 48, '
                             'at least %d)' % (SETTLED + 1))
    parser.add_argument('--rates', default='0.01,0.1',
                        help='sampling rates (default 0.01,0.1)')
    args = parser.parse_args()
    if args.intervals <= SETTLED:
        parser.error('--intervals must be above %d' % SETTLED)
    rates = [float(rate) for rate in args.rates.split(',')]
    print('VM of 1 GiB, %d references per 10 s interval, %d intervals, '
          'salts %d; errors against rate 1 (mean over salts)' % (
              REFERENCES, args.intervals, len(SALTS)))
    print('%-11s %9s %6s %8s %11s %10s %12s' % (
        'workload', 'WSS pages', 'rate', 'WSS err', 'window err',
        'curve MAE', 'exact vs LRU'))
    results = {}
    for name, workload in workloads_by_name(
            np.random.default_rng(0)).items():
        result = results[name] = run(workload, args.intervals, rates)
        for rate in rates:
            errors = result[str(rate)]
            print('%-11s %9d %6g %7.2f%% %10.2f%% %10.4f %12.4f' % (
                name, result['wss_pages'], rate, 100 * errors['wss'],
                100 * errors['window'], errors['curve'], result['lru']),
                flush=True)
    print(json.dumps({
        'wss_error': {str(rate): float(np.mean(
            [r[str(rate)]['wss'] for r in results.values()]))
            for rate in rates},
        'curve_mae': {str(rate): float(np.mean(
            [r[str(rate)]['curve'] for r in results.values()]))
            for rate in rates},
        'workloads': results}))


if __name__ == '__main__':
    main()
