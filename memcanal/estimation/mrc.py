"""Miss-ratio curves: the miss rate a VM would see at every memory size.

Under LRU a reference hits in a memory of ``c`` pages exactly when its
stack distance (distinct pages touched since the previous reference to the
same page, itself included) is at most ``c`` (Mattson et al., 1970), so
one pass gives the whole curve. Three ways to get it, all from the C loops
in ``_lru.c``:

- ``exact``: every reference's stack distance.
- ``shards_fixed_rate`` / ``shards_fixed_size``: SHARDS (Waldspurger et
  al., FAST'15) keeps only pages whose hash falls under a threshold and
  scales their distances by 1/rate; constant memory for the fixed-size
  variant.
- ``aet``: AET (Hu et al., ATC'16), from the reuse-time histogram alone.

Pages are guest-physical page numbers, dense from 0, so the C code
indexes arrays by page; sparse identifiers (traces of other tools) are
renumbered first.
"""

import collections
import dataclasses

import numpy as np

from memcanal.estimation import _lru

FIRST_TOUCH = 0
"""The stack distance of a page's first reference (a cold miss)."""

HASH_MODULUS = _lru.HASH_MODULUS
DEFAULT_SALT = 0x6d656d63616e616c
# Page numbers below this, or below four times the number of references,
# are used as array indexes as they are; others are renumbered (a sort).
DENSE_UNIVERSE = 1 << 24


@dataclasses.dataclass(frozen=True)
class MissRatioCurve:
    """Miss ratio at memory sizes in pages, sizes strictly increasing.

    ``references`` is how many references the curve stands for, so
    curves of different windows can be weighed.
    """

    sizes: np.ndarray
    miss_ratios: np.ndarray
    references: int

    def at(self, sizes):
        """Miss ratio at each of ``sizes`` pages (a step function).

        A size below the first point misses always; beyond the last, the
        curve stays at its last value (only cold misses remain).
        """
        index = np.searchsorted(self.sizes, np.asarray(sizes), side='right')
        padded = np.concatenate([[1.0], self.miss_ratios])
        return padded[index]

    def compact(self, max_points, page_size):
        """At most ``max_points`` [bytes, miss ratio] pairs for a report.

        Keeps the first and last points and spreads the rest evenly on a
        log scale of size, where curves change most at small sizes.
        """
        count = len(self.sizes)
        if count <= max_points:
            chosen = np.arange(count)
        else:
            chosen = np.unique(np.round(
                np.geomspace(1, count, max_points) - 1).astype(np.int64))
        ratios = np.clip(self.miss_ratios[chosen], 0.0, 1.0)
        return [[int(size) * page_size, float(ratio)]
                for size, ratio in zip(self.sizes[chosen], ratios)]


def as_pages(pages):
    """``pages`` as an int64/uint64 array the C code reads without a copy.

    Strided views (a column of a memory-mapped trace) are kept as they
    are; other integer arrays are converted.
    """
    pages = np.asarray(pages)
    if pages.dtype not in (np.int64, np.uint64):
        pages = pages.astype(np.int64)
    return pages


def dense(pages):
    """``(pages, universe)`` with every page in [0, universe).

    Page numbers already small are kept; others are renumbered by rank.
    """
    pages = as_pages(pages)
    if pages.size == 0:
        return pages, 0
    low, high = int(pages.min()), int(pages.max())
    if low >= 0 and high < max(DENSE_UNIVERSE, 4 * pages.size):
        return pages, high + 1
    distinct, renumbered = np.unique(pages, return_inverse=True)
    return renumbered.astype(np.int64), int(distinct.size)


def _histogram(pages, universe):
    """Zeros for hits by distance: no distance exceeds the references."""
    return np.zeros(min(universe, pages.size) + 1, dtype=np.int64)


def stack_distances(pages):
    """The LRU stack distance of every reference (FIRST_TOUCH: cold)."""
    pages, universe = dense(pages)
    distances = np.empty(pages.size, dtype=np.int64)
    _lru.stack_distances(pages, universe, distances, None)
    return distances


def exact(pages):
    """The exact LRU miss-ratio curve, at every size up to the footprint.

    Cold misses count as misses at every size.
    """
    pages, universe = dense(pages)
    histogram = _histogram(pages, universe)
    if pages.size:
        _lru.stack_distances(pages, universe, None, histogram)
    # A distance never exceeds the footprint (the first touches), where
    # only cold misses remain.
    footprint = max(1, int(histogram[0]))
    hits = np.cumsum(histogram[1:footprint + 1])
    ratios = 1.0 - hits / pages.size if pages.size else np.ones(footprint)
    return MissRatioCurve(np.arange(1, footprint + 1, dtype=np.int64),
                          ratios, int(pages.size))


def _threshold(rate):
    if not 0.0 < rate <= 1.0:
        raise ValueError('the sampling rate must be in (0, 1]')
    return max(1, int(round(rate * HASH_MODULUS)))


def sample_mask(universe, rate, salt=DEFAULT_SALT):
    """Per page below ``universe``, 1 if SHARDS at ``rate`` samples it.

    Guest pages are dense, so a long-lived sampler (the agent's) tests a
    byte per reference instead of hashing it.
    """
    hashes = np.empty(universe, dtype=np.int64)
    _lru.page_hashes(np.arange(universe, dtype=np.int64), salt, hashes)
    return (hashes < _threshold(rate)).astype(np.uint8)


def shards_sample(pages, rate, salt=DEFAULT_SALT, mask=None):
    """The references to pages whose hash falls under ``rate``, in order.

    The sampling is spatial: a page is in or out for the whole trace, so
    its reuses stay visible among the sampled references. ``mask``, from
    sample_mask with the same rate and salt, makes it faster.
    """
    pages = as_pages(pages)
    kept = np.empty(pages.size, dtype=np.int64)
    count = _lru.sample(pages, _threshold(rate), salt, kept, mask)
    return kept[:count].copy()


def _curve_from_hits(sizes, hits, references):
    """A curve at ``sizes`` only (sorted, may repeat), from the hits each
    adds: what sampled methods give, a point per distinct distance."""
    sizes, first = np.unique(sizes, return_index=True)
    hits = np.add.reduceat(hits, first) if len(hits) else hits
    if not len(sizes):
        sizes, hits = np.ones(1, np.int64), np.zeros(1)
    ratios = 1.0 - np.cumsum(hits) / references if references else \
        np.ones(len(sizes))
    return MissRatioCurve(sizes, np.clip(ratios, 0.0, 1.0), int(references))


def shards_curve(sampled, references, rate, adjust=True):
    """The curve of ``references`` references from their SHARDS sample.

    Each sampled reference stands for 1/rate references at 1/rate times
    its distance. ``adjust`` applies SHARDS_adj: the difference between
    the expected and the actual number of sampled references is added to
    the first bucket, which removes most of the error a few very hot
    pages falling in or out of the sample would cause.
    """
    rate = _threshold(rate) / HASH_MODULUS
    sampled, universe = dense(sampled)
    histogram = _histogram(sampled, universe)
    if sampled.size:
        _lru.stack_distances(sampled, universe, None, histogram)
    distances = np.flatnonzero(histogram[1:]) + 1
    sizes = np.maximum(1, np.rint(distances / rate).astype(np.int64))
    hits = histogram[distances].astype(float)
    expected = references * rate
    if adjust:
        sizes = np.concatenate([[1], sizes])
        hits = np.concatenate([[expected - sampled.size], hits])
    curve = _curve_from_hits(sizes, hits,
                             expected if adjust else sampled.size)
    return dataclasses.replace(curve, references=int(references))


def ghost_curve(blocks, reads, direct_pages, references, count_from=0):
    """The miss-ratio curve from ``direct_pages`` upward, from what a
    hypervisor exclusive cache saw (Lu and Shen, section 4.1).

    ``blocks`` and ``reads`` are hcache.GhostEvents: admitted evictions
    and I/O reads, in order. Under LRU the VM holds its ``direct_pages``
    most recent blocks and the blocks it evicted follow in eviction order,
    so a read at place k in the hypervisor's list of evicted blocks has
    stack distance ``direct_pages + k``; a read of a block not listed
    misses at every size. Hits in direct memory are invisible, so the
    VM's own count of accesses, ``references``, is the denominator.
    Events before ``count_from`` only warm the list up. Sizes below
    ``direct_pages`` are not known: the curve starts there.
    """
    blocks, universe = dense(blocks)
    reads = np.ascontiguousarray(reads, dtype=bool)
    positions = np.empty(blocks.size, dtype=np.int64)
    if blocks.size:
        _lru.ghost_positions(blocks, reads.view(np.uint8), universe,
                             positions)
    counted = positions[count_from:]
    counted = counted[counted >= 0]
    if counted.size > references:
        raise ValueError('%d reads cannot come from %d references' % (
            counted.size, references))
    places, hits = np.unique(counted[counted > 0], return_counts=True)
    return _curve_from_hits(
        np.concatenate([[direct_pages], direct_pages + places]),
        np.concatenate([[references - counted.size], hits]), references)


def shards_fixed_rate(pages, rate, salt=DEFAULT_SALT, adjust=True):
    """SHARDS at a fixed sampling rate (see shards_sample, shards_curve)."""
    pages = as_pages(pages)
    return shards_curve(shards_sample(pages, rate, salt), pages.size, rate,
                        adjust)


def shards_fixed_size(pages, max_pages, salt=DEFAULT_SALT):
    """SHARDS tracking at most ``max_pages`` sampled pages (s_max).

    The rate starts at 1 and drops whenever a new page would overflow the
    sample, so memory stays constant whatever the footprint. SHARDS_adj
    is applied at the final rate, as for ``shards_fixed_rate``.
    """
    pages, universe = dense(pages)
    histogram = np.zeros(universe + 1)
    if not pages.size:
        return _curve_from_hits(np.ones(1, np.int64), np.zeros(1), 0)
    _, threshold = _lru.shards_fixed_size(pages, universe, max_pages, salt,
                                          histogram)
    # SHARDS_adj at the final rate, in whose units the histogram is.
    expected = pages.size * threshold / HASH_MODULUS
    histogram[1] += expected - histogram.sum()
    sizes = np.flatnonzero(histogram[1:]) + 1
    return dataclasses.replace(
        _curve_from_hits(sizes, histogram[sizes], expected),
        references=int(pages.size))


def reuse_time_histogram(pages):
    """References by reuse time (index 0: first touches)."""
    pages, universe = dense(pages)
    histogram = np.zeros(pages.size + 1, dtype=np.int64)
    if pages.size:
        _lru.reuse_times(pages, universe, histogram)
    return histogram


def aet(pages):
    """AET's approximate curve from the reuse-time histogram.

    With P(t) the fraction of references whose reuse time exceeds t
    (first touches: never reused), a cache of c(T) = sum_{t<T} P(t)
    pages misses a fraction P(T) of references.
    """
    histogram = reuse_time_histogram(pages)
    total = int(histogram.sum())
    if total == 0:
        return MissRatioCurve(np.ones(1, dtype=np.int64), np.ones(1), 0)
    last = int(np.flatnonzero(histogram[1:])[-1]) + 1 \
        if histogram[1:].any() else 1
    # P(t) for t = 0..last: references with reuse time > t, cold included.
    longer = total - np.cumsum(histogram[1:last + 1])
    above = np.concatenate([[total], longer]) / total
    cache = np.cumsum(above)[:-1]           # c(T) for T = 1..last
    sizes = np.floor(cache).astype(np.int64)
    keep = np.concatenate([sizes[1:] != sizes[:-1], [True]]) & (sizes >= 1)
    return MissRatioCurve(sizes[keep], above[1:][keep], total)


METHODS = {
    'exact': exact,
    'shards': shards_fixed_rate,
    'shards_fixed_size': shards_fixed_size,
    'aet': aet,
}


class WindowedCurve:
    """The curve of the last ``intervals`` batches of references.

    The agent adds each interval's logged references and reports the
    curve of the window, so reuses across interval boundaries count as
    hits, not as cold misses. SHARDS keeps only each batch's sample;
    other methods keep the references themselves.
    """

    def __init__(self, method, intervals, rate=0.01, max_pages=8192,
                 salt=DEFAULT_SALT, universe=0):
        if method not in METHODS:
            raise ValueError('unknown MRC method %r' % method)
        if intervals < 1:
            raise ValueError('the window holds at least one interval')
        self.method = method
        self.intervals = intervals
        self.rate = rate
        self.max_pages = max_pages
        self.salt = salt
        self._batches = collections.deque(maxlen=intervals)
        # Pages of the VM (``universe``) are sampled by table; any beyond
        # it by hashing, with the same result.
        self._mask = (sample_mask(universe, rate, salt)
                      if method == 'shards' else None)

    def add(self, pages):
        pages = as_pages(pages)
        if self.method != 'shards':
            self._batches.append((pages.copy(), pages.size))
            return
        kept = shards_sample(pages, self.rate, self.salt, self._mask)
        self._batches.append((kept, pages.size))

    def curve(self):
        """The window's curve, or None before any reference."""
        references = sum(count for _, count in self._batches)
        if not references:
            return None
        pages = np.concatenate([kept for kept, _ in self._batches])
        if self.method == 'shards':
            return shards_curve(pages, references, self.rate)
        if self.method == 'shards_fixed_size':
            return shards_fixed_size(pages, self.max_pages, self.salt)
        return METHODS[self.method](pages)
