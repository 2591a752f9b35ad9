"""Working sets, curves and page ages from sampled first touches.

memcanal-pager samples a guest's accesses through the userfaultfd of its
RAM (research/access-sampling.md): at the start of every interval the
mappings of a fixed hashed sample of the guest's pages (the hash of
SHARDS: mrc.sample_mask) are zapped, and the first access to each is a
fault the pager records; every ``full_pass_every`` intervals every page
is zapped instead (a full pass). Per interval it delivers sets of pages,
not references: ``touched`` (every page whose access it saw, sampled or
not: after a full pass each page faults once, on its first access) and
``written``. This module turns them into what the agent reports and
what the cold-page detector learns.

- ``SampledAccesses``: the working set per interval and over PRL's
  window, the pages written, and a fault-rate curve from the sampled
  pages' first touches, the promotion-rate curve of Google's far memory
  (Lagar-Cavilla et al., ASPLOS'19) from a hashed sample instead of full
  scans. Fed the per-interval page sets of a whole reference stream
  (``interval_sets``) at rate 1, it is the exact interval-granular
  curve: the ground truth of the benchmarks.
- ``ColdPageFeed``: what a coldpages.ColdPageDetector learns from the
  same intervals, so that it calls cold only pages known to be idle.
- ``curve_error``: how far a sampled curve is from its ground truth.

Only the sampled pages are counted by the estimators: the pager zaps them
in every interval, full pass or not, so for them each interval's set is
exact; the other pages show up once after each full pass, at their first
access, and say nothing of the intervals after it.
"""

import collections
import dataclasses

import numpy as np

from memcanal import estimation
from memcanal.estimation import intervals
from memcanal.estimation import mrc


@dataclasses.dataclass(frozen=True)
class _Interval:
    """One interval's sampled pages touched and written (sorted), its
    length and the sample it was drawn with."""

    touched: np.ndarray
    written: np.ndarray
    seconds: float
    rate: float
    salt: int


@dataclasses.dataclass(frozen=True)
class CurveBand:
    """A sampled curve and its 95 % band: three MissRatioCurves at the
    same sizes (``low`` and ``high`` hold the true curve at each size
    with the stated confidence), and the sampled first touches it
    counts."""

    curve: mrc.MissRatioCurve
    low: mrc.MissRatioCurve
    high: mrc.MissRatioCurve
    sampled_events: int


def _distinct(pages):
    return np.unique(mrc.as_pages(pages))


def _reuse_times(touched):
    """Per interval of ``touched`` (sorted distinct pages each, oldest
    first), each page's reuse time in intervals: 0 where it was not
    touched before in these intervals (cold, or longer ago)."""
    known = np.empty(0, np.int64)
    last = np.empty(0, np.int64)
    times = []
    for now, pages in enumerate(touched):
        position = np.searchsorted(known, pages)
        found = np.zeros(pages.size, bool)
        if known.size:
            inside = position < known.size
            found[inside] = known[position[inside]] == pages[inside]
        reuse = np.zeros(pages.size, np.int64)
        reuse[found] = now - last[position[found]]
        times.append(reuse)
        last[position[found]] = now
        new = position[~found]
        known = np.insert(known, new, pages[~found])
        last = np.insert(last, new, now)
    return times


class SampledAccesses:
    """The sampled accesses of one VM of ``pages`` pages, interval by
    interval, and the estimates they give, each with its 95 % interval
    (memcanal.estimation.intervals).

    ``rate`` and ``salt`` are the pager's: a page is in the sample when
    mrc.sample_mask(pages, rate, salt) says so (a page beyond the VM's
    ``pages``, after a hotplug, is hashed the same way). Each interval
    may come with a sample of its own (the agent adapts the rate, and
    may re-salt): an interval's working set counts at its own rate; the
    window's and the curve's at the lowest rate of their intervals (the
    samples of one salt are nested: a lower rate's is within a higher
    one's), over the latest intervals of the latest salt (a page's
    reuse is known only while it stays in the sample).
    ``interval_s`` is the intervals' nominal length (that of an interval
    added without its own); ``window_intervals`` is PRL's window, over
    which ``window_wss_bytes`` and ``written_wss_bytes`` take the union
    of the intervals' pages; ``curve_intervals`` the intervals whose
    touches ``curve`` counts, and ``max_reuse`` the longest reuse time in
    intervals it tells apart. ``systematic_pages`` lowers the low end of
    the working sets' intervals (intervals.count_interval).

    The curve, for T = 1 .. max_reuse intervals:

    - an event is a sampled page's first touch in an interval; its reuse
      time is the intervals since that page's previous touch (a page
      never touched before is cold: infinite);
    - WSS(T) is the memory that holds the pages touched within the last
      T intervals: the distinct sampled pages touched in the T intervals
      ending at each of the window's intervals, averaged over them, over
      the rate (Denning's average working set s(T));
    - its ratio at WSS(T) is the fraction of the window's events whose
      reuse time exceeds T: the pages a memory of that size would have
      to fault back in. Times ``touches_per_s`` it is a fault rate.

    Sizes merge where they are equal (the larger T holds), so they
    strictly increase; past WSS(max_reuse) only reuses longer than it
    and cold touches miss.
    """

    def __init__(self, pages, rate, salt=mrc.DEFAULT_SALT, interval_s=10.0,
                 window_intervals=1, page_size=estimation.PAGE_SIZE,
                 curve_intervals=12, max_reuse=12,
                 confidence=intervals.CONFIDENCE, systematic_pages=0.0):
        _check_rate(rate)
        if (pages < 0 or interval_s <= 0 or window_intervals < 1
                or curve_intervals < 1 or max_reuse < 1):
            raise ValueError('pages must not be negative; interval_s, '
                             'window_intervals, curve_intervals and '
                             'max_reuse must be positive')
        self.pages = int(pages)
        self.rate = float(rate)
        self.salt = salt
        self.interval_s = float(interval_s)
        self.window_intervals = int(window_intervals)
        self.page_size = page_size
        self.curve_intervals = int(curve_intervals)
        self.max_reuse = int(max_reuse)
        self.confidence = confidence
        if systematic_pages < 0:
            raise ValueError('systematic_pages must not be negative')
        self.systematic_pages = float(systematic_pages)
        # A curve over curve_intervals needs the pages of max_reuse - 1
        # intervals before it, and no reuse longer than their sum.
        self._reach = self.curve_intervals + self.max_reuse
        self._intervals = collections.deque(
            maxlen=max(self.window_intervals, self._reach))
        self._accessed = np.empty(0, np.int64)

    def sample(self, pages, rate=None, salt=None):
        """The pages of ``pages`` in the sample (the latest, or that of
        ``rate`` and ``salt``), in their order."""
        return mrc.shards_sample(pages, self.rate if rate is None else rate,
                                 self.salt if salt is None else salt)

    def add_interval(self, touched, written=(), full=False, seconds=None,
                     rate=None, salt=None):
        """One interval the pager closed: the page indexes it saw touched
        and written (any order, repeats allowed), whether it was a full
        pass, how long it lasted (``interval_s`` if None) and the sample
        it zapped (the latest if None; it becomes the latest).

        ``full`` is accepted for the pager's records as they come; it
        changes no estimate, sampled pages being zapped in every
        interval (ColdPageFeed is what needs it).
        """
        if rate is not None:
            _check_rate(rate)
            self.rate = float(rate)
        if salt is not None:
            self.salt = salt
        touched = _distinct(touched)
        self._accessed = touched
        self._intervals.append(_Interval(
            self.sample(touched), self.sample(_distinct(written)),
            self.interval_s if seconds is None else float(seconds),
            self.rate, self.salt))

    def accessed(self):
        """Every page touched in the last interval, sampled or not,
        sorted: what the pager saw accessed."""
        return self._accessed

    def _bytes(self, sampled_pages, rate):
        return int(round(sampled_pages / rate)) * self.page_size

    def _common(self, count):
        """The last ``count`` intervals that share the latest salt, and
        the lowest rate among them, whose sample each one's holds."""
        chosen = []
        for interval in reversed(self._intervals):
            if len(chosen) == count or interval.salt != self.salt:
                break
            chosen.append(interval)
        chosen.reverse()
        return chosen, min(interval.rate for interval in chosen)

    def _union(self, kind):
        """The sampled pages of ``kind`` ('touched', 'written') over
        PRL's window at its common rate, and the rate."""
        window, rate = self._common(self.window_intervals)
        union = np.unique(np.concatenate(
            [self.sample(getattr(interval, kind), rate)
             for interval in window]))
        return union.size, rate

    def wss_bytes(self):
        """The last interval's working set, None before any interval."""
        if not self._intervals:
            return None
        last = self._intervals[-1]
        return self._bytes(last.touched.size, last.rate)

    def wss_bounds(self):
        """The 95 % interval [low, high] in bytes of the last interval's
        working set, None before any interval."""
        if not self._intervals:
            return None
        last = self._intervals[-1]
        return intervals.bytes_interval(last.touched.size, last.rate,
                                        self.page_size, self.confidence,
                                        self.systematic_pages)

    def recent_low_pages(self, count=3):
        """The lowest lower bound, in pages, of the working sets of the
        last ``count`` intervals (None before any): what the next
        interval's rate must resolve, a quiet interval needing the
        largest share."""
        recent = list(self._intervals)[-count:]
        if not recent:
            return None
        return min(float(intervals.count_interval(
            interval.touched.size, interval.rate, self.confidence)[0])
            for interval in recent)

    def window_wss_bytes(self):
        """The pages touched over PRL's window (its last
        ``window_intervals`` intervals), None before any interval."""
        if not self._intervals:
            return None
        return self._bytes(*self._union('touched'))

    def written_wss_bytes(self):
        """The pages written over PRL's window, the sampled counterpart
        of PML's dirty pages (reads then writes included), None before
        any interval."""
        if not self._intervals:
            return None
        return self._bytes(*self._union('written'))

    def window_bounds(self, kind='touched'):
        """The 95 % interval [low, high] in bytes of the window's
        working set (``kind`` 'written': of its pages written), and the
        sampled pages behind it; None before any interval."""
        if not self._intervals:
            return None
        count, rate = self._union(kind)
        return (intervals.bytes_interval(count, rate, self.page_size,
                                         self.confidence,
                                         self.systematic_pages), count)

    def touches_per_s(self):
        """First touches per second of the whole VM over the curve's
        window (each interval's sampled touches over its rate), None
        before any interval: a curve's ratio times this is faults per
        second."""
        window = list(self._intervals)[-self.curve_intervals:]
        seconds = sum(interval.seconds for interval in window)
        if not seconds:
            return None
        return sum(interval.touched.size / interval.rate
                   for interval in window) / seconds

    def curve(self):
        """The fault-rate curve (a mrc.MissRatioCurve, sizes in pages,
        ratios the fraction of first touches that miss), None before a
        sampled page was touched in the window."""
        band = self.curve_band()
        return None if band is None else band.curve

    def curve_band(self):
        """The fault-rate curve and its 95 % band (a CurveBand), None
        before a sampled page was touched in the window.

        Per size, the ratio's interval (intervals.ratio_interval: pages
        are the sample's units), widened by the size's own: WSS(T) is an
        estimate too, so the true curve at a size may be that of a
        point whose size lies anywhere in its interval. ``high`` at a
        size is the upper ratio of the last point whose upper size is
        at most it (1 below all), ``low`` the lower ratio of the last
        point whose lower size is.
        """
        if not self._intervals:
            return None
        chosen, rate = self._common(self._reach)
        touched = [self.sample(interval.touched, rate)
                   for interval in chosen]
        count = len(touched)
        window = min(self.curve_intervals, count)
        reuse = _reuse_times(touched)
        events = np.concatenate(touched[count - window:])
        if not events.size:
            return None
        times = np.concatenate(reuse[count - window:])
        histograms = np.array([
            np.bincount(t, minlength=self._reach + 1)[:self._reach + 1]
            for t in reuse])
        sizes = self._average_working_sets(
            np.array([pages.size for pages in touched], np.int64),
            histograms, window)
        # Events whose reuse time exceeds T (cold: 0), T = 1 .. max_reuse,
        # per sampled page.
        pages, page_of = np.unique(events, return_inverse=True)
        longer = (times[None, :] == 0) | (
            times[None, :] > np.arange(1, self.max_reuse + 1)[:, None])
        misses = np.array([np.bincount(page_of, weights=row,
                                       minlength=pages.size)
                           for row in longer])
        ratios, low, high = intervals.ratio_interval(
            np.bincount(page_of, minlength=pages.size), misses, rate,
            self.confidence)
        size_low, size_high = intervals.count_interval(sizes, rate,
                                                       self.confidence)
        as_pages = lambda sampled: np.maximum(  # noqa: E731
            1, np.rint(sampled / rate)).astype(np.int64)
        points = as_pages(sizes)
        last_of_size = np.append(points[1:] != points[:-1], True)
        points, ratios = points[last_of_size], ratios[last_of_size]
        low_curve = mrc.MissRatioCurve(
            *_steps(np.rint(size_low[last_of_size]), low[last_of_size]),
            0)
        high_curve = mrc.MissRatioCurve(
            *_steps(np.rint(size_high[last_of_size]), high[last_of_size]),
            0)
        references = int(round(events.size / rate))
        return CurveBand(
            mrc.MissRatioCurve(points, ratios, references),
            mrc.MissRatioCurve(points, np.minimum(low_curve.at(points),
                                                  ratios), references),
            mrc.MissRatioCurve(points, np.maximum(high_curve.at(points),
                                                  ratios), references),
            int(events.size))

    def _average_working_sets(self, touched, reuse, window):
        """Mean over the last ``window`` intervals j of the distinct
        sampled pages touched in (j - T, j], for T = 1 .. max_reuse.

        latest[k, j] counts the pages whose latest touch up to interval
        j was k: those touched in k less those touched again in (k, j],
        each of which shows once as a touch at j' with reuse j' - k.
        """
        count = touched.size
        later = np.zeros((count, count), np.int64)
        touch_at = np.arange(count)[:, None]
        since = touch_at - np.arange(1, self._reach + 1)[None, :]
        known = since >= 0
        later[since[known], np.broadcast_to(touch_at, since.shape)[known]] \
            = reuse[:, 1:][known]
        latest = touched[:, None] - np.cumsum(later, axis=1)
        ends = np.arange(count - window, count)[:, None]
        starts = ends - np.arange(self.max_reuse)[None, :]
        pages = np.where(starts >= 0,
                         latest[np.maximum(starts, 0), ends], 0)
        return np.cumsum(pages, axis=1).mean(axis=0)


def _check_rate(rate):
    if not 0.0 < rate <= 1.0:
        raise ValueError('the sampling rate must be in (0, 1]')


def _steps(sizes, ratios):
    """A step curve's points from sizes that may repeat (the last ratio
    of a size holds) and must not fall."""
    sizes = np.maximum(1, sizes).astype(np.int64)
    last = np.append(sizes[1:] != sizes[:-1], True)
    return sizes[last], ratios[last]


def curve_error(curve, truth, points=256):
    """The mean absolute difference of two curves over ``points`` sizes
    spread evenly up to the larger one's last: SHARDS' accuracy figure
    (mean absolute error), for a sampled curve against its ground
    truth."""
    top = max(int(curve.sizes[-1]), int(truth.sizes[-1]))
    sizes = np.linspace(1, top, points)
    return float(np.abs(curve.at(sizes) - truth.at(sizes)).mean())


def interval_sets(trace, interval_ns, start_ns=0):
    """A traces.Trace (build one from a page and time stream with
    Trace.of) cut into intervals of ``interval_ns`` from ``start_ns``:
    [(touched, written), ...], the distinct pages referenced and written
    in each, empty intervals included, up to the one of the last
    reference. Times must not decrease.

    That is what a pager zapping every page in every interval would see;
    SampledAccesses at rate 1 fed these sets is the exact
    interval-granular curve. It differs from mrc.exact's per-reference
    LRU curve in two ways: it counts an interval's first touch of a page
    only (re-references within an interval hit at any size of at least
    its working set, and are invisible to access sampling), and it
    places a reuse after T intervals at the average working set of T
    intervals rather than at that reference's own stack distance
    (Denning's working-set model against LRU: close for a steady
    workload, apart around phase changes).
    """
    if interval_ns <= 0:
        raise ValueError('interval_ns must be positive')
    times = trace.times_ns()
    if not len(times):
        return []
    index = (times - start_ns) // interval_ns
    if index[0] < 0 or np.any(np.diff(index) < 0):
        raise ValueError('times must not decrease nor precede start_ns')
    bounds = np.searchsorted(index, np.arange(int(index[-1]) + 2))
    pages = mrc.as_pages(trace.pages)
    writes = np.asarray(trace.writes, bool)
    return [(np.unique(pages[start:stop]),
             np.unique(pages[start:stop][writes[start:stop]]))
            for start, stop in zip(bounds[:-1], bounds[1:])]


class ColdPageFeed:
    """Feeds ``detector`` (a coldpages.ColdPageDetector over the VM's
    pages) from the pager's sampled intervals, so that a page it calls
    cold is one known to have been idle that long.

    A zap works like kstaled's clearing of an accessed bit: a page seen
    after it was accessed at some time between that zap and the next
    one it is zapped by; after the access it is mapped again, and what
    it does until then is unknown. Hence:

    - a sampled page is zapped every interval: it is observed at the end
      of each interval in which the pager saw it;
    - a page outside the sample is zapped only by full passes: one seen
      between two full passes is observed at the second (its bit read
      by the next scan), so its age counts from the last moment it may
      have been used. Until then it is in doubt, and never called cold:
      only pages not seen since the last full pass go cold;
    - before any full pass nothing is known of the pages outside the
      sample: all are in doubt. A page the first full pass did not see
      has been idle since it began, but the detector's clock for it ran
      from the detector's start: pages outside the sample stay in doubt
      until expire-time-II has passed since the first full pass (no page
      observed after it can go cold sooner anyway). Nothing is counted
      as an access that the pager did not see, so the detector's
      frequencies stay those of real accesses.

    Pages beyond the detector's are left out. Faults on paged-out pages
    are also touches (the pager saw them); the pager's own
    ``detector.fault`` counts them as well, as an access always did.
    """

    def __init__(self, detector, rate, salt=mrc.DEFAULT_SALT):
        self.detector = detector
        self._sampled = mrc.sample_mask(detector.pages, rate, salt).view(bool)
        # Pages outside the sample seen since the last full pass.
        self._seen = np.zeros(detector.pages, bool)
        # The detector's time at the end of the first full pass.
        self._first_pass = None

    def resample(self, rate, salt):
        """The pager zaps another sample from now on. A page that leaves
        it is in doubt until the next full pass (its use from now is
        seen only then); one that joins it stays as it was until then."""
        sampled = mrc.sample_mask(self.detector.pages, rate, salt).view(bool)
        self._seen |= self._sampled & ~sampled
        self._sampled = sampled

    def add_interval(self, touched, full, now):
        """One interval the pager closed (``touched``: page indexes, any
        order; ``full``: it began with a full pass), at ``now`` in the
        detector's time."""
        touched = _distinct(touched)
        touched = touched[touched < self.detector.pages]
        sampled = self._sampled[touched]
        observed = touched[sampled]
        if full:
            observed = np.concatenate([observed,
                                       np.flatnonzero(self._seen)])
            self._seen[:] = False
            if self._first_pass is None:
                self._first_pass = now
        self._seen[touched[~sampled]] = True
        self.detector.observe(observed, now)

    def in_doubt(self):
        """Per page, True while its use is unknown: outside the sample
        and seen since the last full pass, or in the first expire-time-II
        after the first full pass, or before it."""
        if (self._first_pass is None or self.detector.now
                < self._first_pass + self.detector.expire_ii):
            return ~self._sampled
        return self._seen.copy()

    def cold(self, limit=None):
        """The detector's cold pages (oldest in its out queue first)
        without those in doubt."""
        cold = self.detector.cold()
        return cold[~self.in_doubt()[cold]][:limit]
