"""What the cold-page detector costs a pager per scan period, for a 1 GiB
VM (262,144 pages), beside sorting as many floats in the same process.

    .venv/bin/python benchmarks/coldpages.py

memcanal.estimation.coldpages (TMemCanal's modified multi-queue and
LRU-Zone prefetch) runs once per scan period on the pages accessed in
it; a scan period of a second leaves it well under a percent of a core
if each call stays a small multiple of the sort. Prints the median
milliseconds of observe() at 5, 30 and 100 % of pages accessed, of an
observe() after a long gap that sends every page out at once, of cold()
and of fault() with its prefetch.
"""

import time

import numpy as np

from memcanal.estimation import coldpages

PAGES = 262144


def median_ms(call, repeats=30):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return float(np.median(times)) * 1e3


def main():
    rng = np.random.default_rng(0)
    floats = rng.random(PAGES)
    baseline = median_ms(lambda: np.sort(floats))
    print('baseline: np.sort of %d floats %.2f ms' % (PAGES, baseline))

    def line(what, ms):
        print('%-44s %7.2f ms  %5.2fx the sort' % (what, ms, ms / baseline))

    for fraction in (0.05, 0.3, 1.0):
        detector = coldpages.ColdPageDetector(PAGES, 1.0)
        accessed = rng.choice(PAGES, int(PAGES * fraction), replace=False)
        clock = [0]

        def period():
            clock[0] += 1
            detector.observe(accessed, clock[0])
        line('observe, %d %% of pages accessed' % (fraction * 100),
             median_ms(period, 60))
    detector = coldpages.ColdPageDetector(PAGES, 1.0)
    now, gaps = 0, []
    for _ in range(10):
        for _ in range(3):
            now += 1
            detector.observe(np.arange(PAGES), now)
        now += 1000
        started = time.perf_counter()
        detector.observe([], now)
        gaps.append((time.perf_counter() - started) * 1e3)
    line('observe after a gap, every page goes out', float(np.median(gaps)))
    cold = detector.cold()
    line('cold(), %d candidates' % cold.size, median_ms(detector.cold))
    detector.swapped_out(cold)
    faulted = iter(range(0, PAGES, 97))
    line('fault() with prefetch', median_ms(
        lambda: detector.fault(next(faulted), now + 1), 200))


if __name__ == '__main__':
    main()
