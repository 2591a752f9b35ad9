"""How close memcanal-pager's sampled accesses come to every reference
the real test guest made: the sampler and memtrace on the same run.

    bash tools/build-test-guest.sh                  # once
    flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/sampling_accuracy.py --guest-command 'wsswork 64 RWRW 30' \\
        --rate 0.01 [--interval 1] [--plot accuracy.png]

The test guest (256 MiB, QEMU TCG, its RAM in a shared memfd) runs
--guest-command (a shell command line: busybox's programs and wsswork
are there) from an /init of its own, under both:

- memtrace, the ground truth: PRL only, a TLB of 4 entries (every
  reference to a page other than the last four used is logged), logs of
  512 delivered the moment they fill (``handler_base_ns=0``) into rings
  of 32,768 logs (some seconds of the busiest guest), so that no
  reference is missed while this process reads them: ``memtrace missed``
  says if one was;
- QEMU's shim and a memcanal-pager sampling at --rate with
  ``--sample-interval-ms 0``: its intervals end only when this process
  sends ``tick``.

Every --interval this process ends the pager's interval (``tick``, which
also zaps the sample for the next one) and syncs memtrace, both requests
sent together, and compares per interval:

- the sampled working set (the pager's sampled pages touched / rate,
  memcanal.estimation.sampling.SampledAccesses) with the exact distinct
  pages memtrace saw (guest-physical frames turned into the pager's page
  indexes, memcanal.agent.paging.frame_indexes); the same over PRL's
  window (--window intervals); ``hash err`` is what the hash alone costs
  (memtrace's pages that are in the sample, over the rate);
- within the sample, the pages the sampler saw and memtrace did not
  (``extra``) and the reverse (``missed``);
- the sampled curve against the exact interval-granular one
  (SampledAccesses at rate 1 fed memtrace's sets), sampling.curve_error's
  mean absolute error over sizes, ratios being the share of first touches
  that miss (0..1);
- the exact interval-granular curve against the exact per-reference LRU
  curve of memtrace's reference stream over the same intervals (its TLB
  misses: what mrc.exact gives; reuses from before the window keep their
  distances), and against the LRU curve of the same first touches (their
  own stack distances, as benchmarks/sampling_simulated.py measures).

Curve figures are averaged over the intervals from --settle on (default:
once the curve's window is full). It ends with one JSON line:
``wss_error`` (mean relative error per interval), ``window_wss_error``,
``curve_mae``, ``interval_vs_lru_mae`` and the rest.

What each side cannot see. memtrace sees the guest's data loads and
stores, and with ``code=on`` the pages TCG reads code from when it
translates them (the read the sampler sees); not the guest page tables
QEMU's softmmu walks, nor QEMU's own accesses for devices, for which the
stated intervals carry [sampling] systematic_pages (doc/estimation.md,
"The reference"). Which of the sampler's extra pages are page tables is
read from their content at each interval's end (page_tables.py, on QEMU's
RAM memfd): ``extra_page_table_pages``, and the per-interval error and
coverage against memtrace's pages plus those walks
(``wss_error_median_with_page_tables``, ``coverage_with_page_tables``);
a page that
stays among the TLB's last four for a whole interval (none of the
workloads here) and the references in a partly filled log at a boundary
(at most 511, counted in the next interval) are misplaced. The sampler
does not see the first access of an interval to a sampled page made
while the pager was still zapping the sample (the ``zap`` column): the
page was still mapped.

Needs root (the pager's userfaultfd); builds the pager into a scratch
directory unless --build names one.
"""

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import re
import sys
import tempfile
import time

import numpy as np

from memcanal.agent import paging
from memcanal import estimation
from memcanal.estimation import mrc
from memcanal.estimation import sampling
from memcanal.tests.functional import services

import guest_corpus
import page_tables
import sampled_guest

SYNC_TIMEOUT = 30.0
PLUGIN_OPTIONS = dict(mode='prl', handler_base_ns=0, ring_logs=32768,
                      code='on')
MiB = 2 ** 20


class LruStack:
    """Per-reference LRU stack distances of a stream fed interval by
    interval, in memory bounded by the guest's pages rather than by the
    stream (seven million references a second here).

    The LRU stack after any prefix of the stream is its distinct pages
    in order of last reference, so that order, replayed before an
    interval's references, gives each of them its exact distance.
    Histograms of the last ``intervals`` intervals are kept, of every
    reference and of each interval's first reference to each page.
    """

    def __init__(self, pages, intervals):
        self.pages = int(pages)
        self._order = np.empty(0, np.int64)   # least recently used first
        self._histograms = collections.deque(maxlen=intervals)

    def add(self, references):
        """One interval's references (page indexes, in order); returns
        the distinct pages among them, sorted."""
        references = mrc.as_pages(references)
        stream = np.concatenate([self._order, references])
        distances = mrc.stack_distances(stream)[self._order.size:]
        last = np.full(self.pages, -1, np.int64)
        np.maximum.at(last, stream, np.arange(stream.size))
        first = np.full(self.pages, references.size, np.int64)
        np.minimum.at(first, references, np.arange(references.size))
        seen = np.flatnonzero(last >= 0)
        self._order = seen[np.argsort(last[seen])]
        referenced = np.flatnonzero(first < references.size)
        self._histograms.append((
            np.bincount(distances, minlength=self.pages + 1),
            np.bincount(distances[first[referenced]],
                        minlength=self.pages + 1)))
        return referenced

    def curve(self, first_touches=False):
        """The LRU curve of the kept intervals' references (or first
        touches), sizes 1 .. the pages seen so far; None without any."""
        histogram = sum(kept[first_touches] for kept in self._histograms)
        if not isinstance(histogram, np.ndarray) or not histogram.sum():
            return None
        footprint = max(1, self._order.size)
        hits = np.cumsum(histogram[1:footprint + 1])
        total = int(histogram.sum())
        return mrc.MissRatioCurve(np.arange(1, footprint + 1),
                                  1.0 - hits / total, total)


@dataclasses.dataclass
class Row:
    """One interval, sizes in pages."""

    index: int
    end_s: float
    seconds: float
    zap_ms: float
    references: int
    exact: int
    sampled: float
    exact_window: int
    sampled_window: float
    in_sample: int          # memtrace's pages in the sample
    seen: int               # the sampler's sampled pages touched
    extra: int              # seen, not in memtrace's
    missed: int             # in memtrace's, not seen
    curve_mae: float | None
    lru_mae: float | None
    lru_first_mae: float | None
    rate: float | None = None   # the interval's (None: the run's)
    low: float | None = None    # the 95 % interval of ``sampled``
    high: float | None = None
    # The part of lru_first_mae from sizes below the interval curve's
    # first point, WSS(1), where it is 1 by construction.
    lru_first_below: float | None = None
    zapped: int = 0             # pages its zap unmapped
    whole: bool = False         # its zap was of the whole sample
    # Of ``extra``, the pages whose content is a page table's (the MMU's
    # walks, which memtrace does not see: page_tables.py).
    extra_page_tables: int = 0


class Comparison:
    """The sampler's intervals beside memtrace's, for one guest of
    ``pages`` pages sampled at ``rate`` with ``salt``."""

    def __init__(self, pages, rate, salt=mrc.DEFAULT_SALT, interval_s=1.0,
                 window=12, curve_intervals=12, max_reuse=12,
                 systematic_pages=0.0):
        options = dict(interval_s=interval_s, window_intervals=window,
                       curve_intervals=curve_intervals, max_reuse=max_reuse)
        self.rate = rate
        self.sampled = sampling.SampledAccesses(
            pages, rate, salt, systematic_pages=systematic_pages, **options)
        self.exact = sampling.SampledAccesses(pages, 1.0, salt, **options)
        self.lru = LruStack(pages, curve_intervals)
        self.rows = []

    def add(self, interval, references, end_s=0.0, zap_ms=0.0, zapped=0,
            whole=False, tables=()):
        """One interval: the pager's (a driver.AccessInterval) and the
        page indexes memtrace logged in it, in order; ``tables``: the
        pages it touched that looked like page tables at its end."""
        exact = self.lru.add(references)
        self.sampled.add_interval(interval.touched, interval.written,
                                  interval.full, interval.seconds,
                                  interval.rate, interval.salt)
        self.exact.add_interval(exact, (), True, interval.seconds)
        in_sample = self.sampled.sample(exact)
        seen = self.sampled.sample(np.unique(interval.touched))
        extra = np.setdiff1d(seen, in_sample)
        exact_curve = self.exact.curve()
        lru_first = self.lru.curve(True)
        low, high = (bound / estimation.PAGE_SIZE
                     for bound in self.sampled.wss_bounds())
        self.rows.append(Row(
            index=len(self.rows), end_s=end_s, seconds=interval.seconds,
            zap_ms=zap_ms, references=int(np.size(references)),
            exact=int(exact.size),
            sampled=self.sampled.wss_bytes() / estimation.PAGE_SIZE,
            exact_window=self.exact.window_wss_bytes() // estimation.PAGE_SIZE,
            sampled_window=self.sampled.window_wss_bytes()
            / estimation.PAGE_SIZE,
            in_sample=int(in_sample.size), seen=int(seen.size),
            extra=int(extra.size),
            extra_page_tables=int(np.intersect1d(extra, tables).size),
            missed=int(np.setdiff1d(in_sample, seen).size),
            curve_mae=error(self.sampled.curve(), exact_curve),
            lru_mae=error(exact_curve, self.lru.curve()),
            lru_first_mae=error(exact_curve, lru_first),
            lru_first_below=below_first_point(exact_curve, lru_first),
            rate=self.sampled.rate, low=low, high=high, zapped=zapped,
            whole=whole))

    def curves(self):
        """The latest curves: exact interval, sampled, LRU per reference
        and of first touches."""
        return (self.exact.curve(), self.sampled.curve(), self.lru.curve(),
                self.lru.curve(True))


def error(curve, truth):
    if curve is None or truth is None:
        return None
    return sampling.curve_error(curve, truth)


def below_first_point(curve, truth, points=256):
    """The part of error(curve, truth) from the sizes below ``curve``'s
    first point (summed there, over all ``points``)."""
    if curve is None or truth is None:
        return None
    top = max(int(curve.sizes[-1]), int(truth.sizes[-1]))
    sizes = np.linspace(1, top, points)
    below = sizes < curve.sizes[0]
    return float(np.abs(curve.at(sizes[below]) - truth.at(sizes[below]))
                 .sum() / points)


def relative(estimate, exact):
    return abs(estimate - exact) / exact if exact else None


def relative_total(pairs):
    """The absolute errors of (estimate, exact) pairs over the exact
    total."""
    total = sum(exact for _, exact in pairs)
    return sum(abs(estimate - exact) for estimate, exact in pairs) / total \
        if total else None


def mean(values):
    values = [value for value in values if value is not None]
    return float(np.mean(values)) if values else None


def median(values):
    values = [value for value in values if value is not None]
    return float(np.median(values)) if values else None


def quantiles(values, percents):
    return [float(np.percentile(values, p)) for p in percents] \
        if values else None


def covers(row, reference):
    """Whether the interval's stated 95 % interval holds ``reference``
    pages (None for an interval without either)."""
    if row.low is None or not reference:
        return None
    return float(row.low <= reference <= row.high)


def covered(row):
    """Whether the interval's stated 95 % interval holds memtrace's
    working set."""
    return covers(row, row.exact)


def with_page_tables(row, rate):
    """memtrace's working set and the page tables the sampler saw walked
    (its extra pages whose content is a page table's), over the rate."""
    return row.exact + row.extra_page_tables / (row.rate or rate)


def seen_by_either(row, rate):
    """memtrace's working set and the sampled pages the sampler saw that
    memtrace did not (guest page tables TCG walks, code it translates,
    QEMU's device accesses: accesses all the same), over the rate."""
    return row.exact + row.extra / (row.rate or rate)


def covered_either(row, rate):
    return covers(row, seen_by_either(row, rate))


def summary(rows, rate, settle):
    """The run's figures: WSS errors over every interval, curve errors
    over those from ``settle`` on (all, if the run is shorter)."""
    settled = rows[settle:] or rows
    return {
        'rate': rate,
        'intervals': len(rows),
        'wss_error': mean(relative(r.sampled, r.exact) for r in rows),
        # A guest's quiet intervals (a few hundred pages, a handful in a
        # 1 % sample) swing the mean; the median is a typical interval.
        'wss_error_median': median(relative(r.sampled, r.exact)
                                   for r in rows),
        # Small intervals (a command starting) weigh by their pages here.
        'wss_error_weighted': relative_total(
            [(r.sampled, r.exact) for r in rows]),
        'window_wss_error': mean(relative(r.sampled_window, r.exact_window)
                                 for r in rows),
        'hash_wss_error': mean(relative(r.in_sample / (r.rate or rate),
                                        r.exact) for r in rows),
        # The share of intervals whose 95 % interval holds the truth.
        'coverage': mean(covered(r) for r in rows),
        # The same against what either side saw: the interval's own
        # error, without the pages only the sampler sees.
        'coverage_either': mean(covered_either(r, rate) for r in rows),
        'wss_error_median_either': median(
            relative(r.sampled, seen_by_either(r, rate)) for r in rows),
        'rate_mean': mean(r.rate or rate for r in rows),
        'sampled_pages_mean': mean(r.seen for r in rows),
        'curve_mae': mean(r.curve_mae for r in settled),
        'curve_mae_max': max((r.curve_mae for r in settled
                              if r.curve_mae is not None), default=None),
        'interval_vs_lru_mae': mean(r.lru_mae for r in settled),
        'interval_vs_lru_first_touch_mae': mean(r.lru_first_mae
                                                for r in settled),
        'interval_vs_lru_first_touch_below_wss1': mean(
            r.lru_first_below for r in settled),
        'curve_intervals_counted': len(settled),
        # Per interval, to recount the figures against another reference:
        # memtrace's pages, the estimate and its interval, the sampled
        # pages seen and those memtrace did not see, the rate.
        'per_interval': [[r.exact, round(r.sampled, 1),
                          None if r.low is None else round(r.low, 1),
                          None if r.high is None else round(r.high, 1),
                          r.seen, r.extra, r.rate] for r in rows],
        'exact_wss_pages': mean(r.exact for r in rows),
        'extra_pages': mean(r.extra for r in rows),
        # What the sampler counts beyond the reference, in pages of the
        # whole guest (its extra over the rate): the systematic term.
        'extra_scaled_p50_p95_max': quantiles(
            [r.extra / (r.rate or rate) for r in rows], (50, 95, 100)),
        'missed_pages': mean(r.missed for r in rows),
        # The extra pages that are page tables (the MMU's walks), and the
        # per-interval error against memtrace's pages plus those walks.
        'extra_page_table_pages': mean(r.extra_page_tables for r in rows),
        'extra_page_table_scaled_p50_p95_max': quantiles(
            [r.extra_page_tables / (r.rate or rate) for r in rows],
            (50, 95, 100)),
        'wss_error_median_with_page_tables': median(
            relative(r.sampled, with_page_tables(r, rate)) for r in rows),
        'coverage_with_page_tables': mean(
            covers(r, with_page_tables(r, rate)) for r in rows),
        'zap_ms_p50': float(np.median([r.zap_ms for r in rows]))
        if rows else None,
        # What a zap of the whole sample (the start, a new salt, a higher
        # rate) costs beside one of the pages touched since the last.
        'zaps': {kind: {'count': len(chosen),
                        'pages_p50': median(r.zapped for r in chosen),
                        'ms_p50': median(r.zap_ms for r in chosen),
                        'ms_max': max((r.zap_ms for r in chosen),
                                      default=None)}
                 for kind, chosen in (
                     ('whole', [r for r in rows if r.whole]),
                     ('touched', [r for r in rows if not r.whole]))},
    }


def percent(value):
    return '-' if value is None else '%.2f' % (100 * value)


def figure(value):
    return '-' if value is None else '%.4f' % value


def interval_table(rows, rate):
    """Per interval: working sets in pages, errors in %, curve MAEs."""
    lines = ['%4s %6s %6s %7s %8s %6s %6s | %7s %8s %6s | %6s %6s %5s %6s '
             '| %9s %9s' % (
                 'i', 'end s', 'zap ms', 'exact', 'sampled', 'err %',
                 'hash %', 'window', 'sampled', 'err %', 'in smp', 'seen',
                 'extra', 'missed', 'curve MAE', 'vs LRU')]
    for r in rows:
        lines.append(
            '%4d %6.1f %6.1f %7d %8.0f %6s %6s | %7d %8.0f %6s | %6d %6d '
            '%5d %6d | %9s %9s' % (
                r.index, r.end_s, r.zap_ms, r.exact, r.sampled,
                percent(relative(r.sampled, r.exact)),
                percent(relative(r.in_sample / (r.rate or rate), r.exact)),
                r.exact_window, r.sampled_window,
                percent(relative(r.sampled_window, r.exact_window)),
                r.in_sample, r.seen, r.extra, r.missed,
                figure(r.curve_mae), figure(r.lru_mae)))
    return lines


def curve_table(curves, page_size=4096):
    """The exact interval curve's points (one per reuse time T), with
    the other curves' ratios at the same sizes."""
    exact, sampled, lru, first = curves
    lines = ['%3s %10s %8s %8s %10s %12s' % (
        'T', 'size MiB', 'exact', 'sampled', 'LRU refs', 'LRU 1st tch')]
    if exact is None:
        return lines
    for t, (size, ratio) in enumerate(zip(exact.sizes, exact.miss_ratios),
                                      1):
        lines.append('%3d %10.2f %8.4f %8s %10s %12s' % (
            t, size * page_size / MiB, ratio,
            *(figure(None if c is None else float(c.at([size])[0]))
              for c in (sampled, lru, first))))
    return lines


def plot(rows, curves, path, title):
    """Sampled against exact WSS over time, and the latest curves."""
    try:
        from matplotlib import pyplot
    except ImportError:
        print('no plot: matplotlib is not installed')
        return
    figure_, (left, right) = pyplot.subplots(1, 2, figsize=(11, 4))
    ends = [r.end_s for r in rows]
    for label, values in (
            ('exact (memtrace)', [r.exact for r in rows]),
            ('sampled', [r.sampled for r in rows]),
            ('exact, window', [r.exact_window for r in rows]),
            ('sampled, window', [r.sampled_window for r in rows])):
        left.plot(ends, [v * 4096 / MiB for v in values], label=label,
                  linestyle='--' if 'window' in label else '-')
    left.set_xlabel('time (s)')
    left.set_ylabel('working set (MiB)')
    left.legend(fontsize=8)
    for label, curve in zip(('exact interval', 'sampled', 'LRU, references',
                             'LRU, first touches'), curves):
        if curve is not None:
            right.step(curve.sizes * 4096 / MiB, curve.miss_ratios,
                       where='post', label=label)
    right.set_xlabel('memory (MiB)')
    right.set_ylabel('share of first touches (references) missing')
    right.legend(fontsize=8)
    figure_.suptitle(title, fontsize=9)
    figure_.tight_layout()
    figure_.savefig(path, dpi=100)
    print('plot: %s' % path)


class Boundaries:
    """Ends the pager's interval and syncs memtrace at the same moment:
    the sync is sent from a thread of its own while this one sends
    ``tick`` (memtrace's handler reads it within a millisecond)."""

    def __init__(self, guest):
        self.guest = guest
        self._executor = concurrent.futures.ThreadPoolExecutor(1)
        self.tables = page_tables.PageTables(guest.qemu.pid, guest.ram_bytes)

    def close(self):
        """(the pager's interval as a driver.AccessInterval, its zap in
        ms, whether it was whole, and the pages it touched that look like
        page tables now; when it ended (s), the guest-physical frames
        memtrace logged, its counters)."""
        synced = self._executor.submit(self.guest.memtrace.sync,
                                       SYNC_TIMEOUT)
        self.guest.client.command('tick')
        delivered = synced.result()
        answer = self.guest.client.command('samples')
        if len(answer['intervals']) != 1 or answer['overflow']:
            raise RuntimeError('expected one interval a tick: %s' % {
                key: value for key, value in answer.items()
                if key != 'intervals'})
        raw = answer['intervals'][0]
        interval, end_s = paging.access_interval(raw)
        return (interval, (raw['zap_ns'] / 1e6, raw['zapped'],
                           bool(raw.get('whole')),
                           self.tables.among(interval.touched)),
                end_s, delivered.prl, delivered.counters)

    def shutdown(self):
        self._executor.shutdown()
        self.tables.close()


class Analysis:
    """Comparison.add on a thread of its own, so that intervals end on
    time while it works (ten million references an interval take it
    about half a second, mostly in C without the GIL). At most
    ``pending`` intervals wait (a hundred MB each): beyond, the caller
    waits."""

    def __init__(self, comparison, ram_bytes, pending=6):
        self.comparison = comparison
        self.ram_bytes = ram_bytes
        self.pending = pending
        self._executor = concurrent.futures.ThreadPoolExecutor(1)
        self._futures = collections.deque()

    def _add(self, interval, frames, end_s, zap):
        references = paging.frame_indexes(frames, self.ram_bytes)
        self.comparison.add(interval, references, end_s, *zap)
        print('  interval %d: %d references' % (
            len(self.comparison.rows), references.size), file=sys.stderr,
            flush=True)

    def add(self, *arguments):
        self._futures.append(self._executor.submit(self._add, *arguments))
        while len(self._futures) > self.pending or (
                self._futures and self._futures[0].done()):
            self._futures.popleft().result()

    def finish(self):
        while self._futures:
            self._futures.popleft().result()
        self._executor.shutdown()


def measure(guest, comparison, interval, timeout, auto=None):
    """Intervals of ``interval`` seconds from the command's start to its
    end (the last one shorter); memtrace's counters at the start and at
    the end. ``auto``: a sampled_guest.AutoRate that sets the pager's
    rate."""
    boundaries = Boundaries(guest)
    analysis = Analysis(comparison, guest.ram_bytes)
    try:
        if not guest.wait_for(sampled_guest.START,
                              sampled_guest.BOOT_TIMEOUT):
            raise RuntimeError('the guest did not start the command')
        # Both sides start afresh here: the first interval is armed.
        _, _, started, _, first_counters = boundaries.close()
        deadline = time.monotonic() + timeout
        next_end = time.monotonic() + interval
        while True:
            done = guest.wait_for(sampled_guest.DONE,
                                  max(0.0, next_end - time.monotonic()))
            pager_interval, zap, end_s, frames, counters = \
                boundaries.close()
            if auto is not None:
                auto.step(guest.client, pager_interval)
            analysis.add(pager_interval, frames, end_s - started, zap)
            if done:
                analysis.finish()
                return first_counters, counters
            if time.monotonic() > deadline:
                raise RuntimeError('the command ran over %.0f s' % timeout)
            # A late interval is not caught up: the next one is full.
            next_end = max(next_end + interval, time.monotonic() + 0.5
                           * interval)
    finally:
        boundaries.shutdown()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    command = parser.add_mutually_exclusive_group(required=True)
    command.add_argument('--guest-command',
                         help='shell command line run inside the guest')
    command.add_argument('--workload', choices=sorted(
        guest_corpus.WORKLOADS), help='one of guest_corpus\'s programs')
    parser.add_argument('--rate', default='0.01',
                        help='sampling rate (default 0.01), or auto: the '
                             'agent\'s adaptive rate ([sampling] '
                             'target_error, min_rate, max_rate, budgets; '
                             'their defaults)')
    parser.add_argument('--resalt-every', type=int, default=0,
                        help='with --rate auto: a new salt every N '
                             'intervals ([sampling] resalt_every)')
    parser.add_argument('--systematic-pages', type=float,
                        default=sampled_guest.sampling_options()
                        .systematic_pages,
                        help='[sampling] systematic_pages (default: its '
                             'default)')
    parser.add_argument('--interval', type=float, default=1.0,
                        help='seconds per interval (default 1)')
    parser.add_argument('--salt', type=lambda text: int(text, 0),
                        default=mrc.DEFAULT_SALT, help='sampling salt')
    parser.add_argument('--full-pass-every', type=int, default=0,
                        help='a full pass every N intervals (default 0: '
                             'never; the estimators count sampled pages '
                             'only)')
    parser.add_argument('--window', type=int, default=12,
                        help='PRL window in intervals (default 12)')
    parser.add_argument('--curve-intervals', type=int, default=12,
                        help='intervals of first touches per curve')
    parser.add_argument('--max-reuse', type=int, default=12,
                        help='longest reuse time the curves tell apart')
    parser.add_argument('--settle', type=int,
                        help='curve errors from this interval on (default: '
                             '--curve-intervals)')
    parser.add_argument('--tlb-entries', type=int, default=4)
    parser.add_argument('--log-entries', type=int, default=512)
    parser.add_argument('--timeout', type=float, default=600,
                        help='seconds the command may run')
    parser.add_argument('--guest-dir', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', 'build',
        'test-guest'))
    parser.add_argument('--build', help='a built hypervisor-patches/pager '
                        '(default: built into a scratch directory)')
    parser.add_argument('--plot', metavar='PNG')
    args = parser.parse_args(argv)
    if args.workload:
        args.guest_command = guest_corpus.WORKLOADS[args.workload]
    args.auto = args.rate == 'auto'
    try:
        args.rate = None if args.auto else float(args.rate)
    except ValueError:
        parser.error('--rate must be a number or auto')
    if not args.auto and not 0 < args.rate <= 1:
        parser.error('--rate must be in (0, 1]')
    if args.interval <= 0:
        parser.error('--interval must be positive')
    if min(args.window, args.curve_intervals, args.max_reuse,
           args.tlb_entries, args.log_entries) < 1:
        parser.error('window, curve intervals, reuse, TLB and log entries '
                     'must be positive')
    if args.settle is None:
        args.settle = args.curve_intervals
    return args


def main(argv=None):
    args = parse_args(argv)
    guest = sampled_guest.guest_or_exit(args.guest_dir)
    # Unix socket paths must fit 108 bytes.
    with tempfile.TemporaryDirectory(prefix='sa-', dir='/tmp') as scratch:
        build = args.build or services.build_pager(
            pathlib.Path(scratch) / 'build')
        pages = sampled_guest.GUEST_MB * MiB // 4096
        auto = sampled_guest.AutoRate(
            pages, args.interval, window_intervals=args.window,
            curve_intervals=args.curve_intervals, max_reuse=args.max_reuse,
            overrides=dict(resalt_every=args.resalt_every)) if args.auto \
            else None
        rate = auto.rate if auto else args.rate
        comparison = Comparison(
            pages, rate, args.salt, args.interval, args.window,
            args.curve_intervals, args.max_reuse, args.systematic_pages)
        vm = sampled_guest.SampledGuest(
            build, guest, scratch, args.guest_command,
            sampled_guest.pager_options(rate, args.salt,
                                        args.full_pass_every),
            dict(PLUGIN_OPTIONS, tlb_entries=args.tlb_entries,
                 log_entries=args.log_entries))
        try:
            before, after = measure(vm, comparison, args.interval,
                                    args.timeout, auto)
            console = vm.console()
        finally:
            vm.stop()
    return report(args, comparison, console, before, after)


def report(args, comparison, console, before, after):
    rows = comparison.rows
    rate = comparison.rate
    print('Guest %d MiB (TCG), command %r, rate %s, salt %#x, intervals of '
          '%g s; memtrace TLB %d, logs %d' % (
              sampled_guest.GUEST_MB, args.guest_command,
              'auto' if args.auto else '%g' % rate, args.salt,
              args.interval, args.tlb_entries, args.log_entries))
    print('\nWorking set per interval (pages), sampled against memtrace; '
          'in the sample: memtrace\'s pages, the sampler\'s, and theirs '
          'apart; curve MAE against the exact interval curve, which is '
          '"vs LRU" from the per-reference LRU curve')
    print('\n'.join(interval_table(rows, rate)))
    print('\nCurves at the last interval (share of first touches missing; '
          'LRU refs: of references)')
    print('\n'.join(curve_table(comparison.curves())))
    result = summary(rows, rate, args.settle)
    if args.auto:
        result['rate'] = 'auto'
    result['workload'] = args.workload
    result['systematic_pages'] = args.systematic_pages
    delta = {key: after[key] - before[key] for key in after}
    result.update(
        command=args.guest_command, interval_s=args.interval,
        salt=args.salt, memtrace={
            'tlb_entries': args.tlb_entries,
            'log_entries': args.log_entries,
            'references': delta['references'],
            'logged': delta['prl_logged'], 'missed': delta['prl_missed']},
        guest_output=[line for line in console.splitlines()
                      if re.match(r'^(wsswork: phase=\w\w passes|'
                                  'sampling-run: done)', line)])
    print('\nmean over %d intervals: WSS error %s %% (median %s %%, '
          'hash alone %s %%), window %s %%; curve MAE %s (max %s) over '
          '%d intervals; exact interval vs LRU %s (first touches %s); in '
          'the sample per interval %.1f extra, %.1f missed; memtrace '
          'missed %d of %d' % (
              len(rows), percent(result['wss_error']),
              percent(result['wss_error_median']),
              percent(result['hash_wss_error']),
              percent(result['window_wss_error']),
              figure(result['curve_mae']), figure(result['curve_mae_max']),
              result['curve_intervals_counted'],
              figure(result['interval_vs_lru_mae']),
              figure(result['interval_vs_lru_first_touch_mae']),
              result['extra_pages'] or 0, result['missed_pages'] or 0,
              delta['prl_missed'],
              delta['prl_logged'] + delta['prl_missed']))
    print('coverage of the 95 %% intervals %s %%, mean rate %s' % (
        percent(result['coverage']), figure(result['rate_mean'])))
    if args.plot:
        plot(rows, comparison.curves(), args.plot, '%s, rate %s' % (
            args.workload or args.guest_command, result['rate']))
    print(json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
