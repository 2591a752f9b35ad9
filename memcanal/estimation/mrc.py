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

import dataclasses

import numpy as np

from memcanal.estimation import _lru

FIRST_TOUCH = 0
"""The stack distance of a page's first reference (a cold miss)."""

HASH_MODULUS = _lru.HASH_MODULUS
DEFAULT_SALT = 0x6d656d63616e616c
# Renumbering costs a sort; page numbers up to this many times the number
# of references (or below DENSE_UNIVERSE) are used as array indexes as is.
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


def stack_distances(pages):
    """The LRU stack distance of every reference (FIRST_TOUCH: cold)."""
    pages, universe = dense(pages)
    distances = np.empty(pages.size, dtype=np.int64)
    _lru.stack_distances(pages, universe, distances, None)
    return distances


def _curve_from_histogram(histogram, references):
    """A curve from hits per distance (index 0: first touches)."""
    last = int(np.flatnonzero(histogram)[-1]) if histogram[1:].any() else 1
    last = max(last, 1)
    hits = np.cumsum(histogram[1:last + 1])
    ratios = 1.0 - hits / references if references else np.ones(last)
    return MissRatioCurve(np.arange(1, last + 1, dtype=np.int64),
                          np.clip(ratios, 0.0, 1.0), int(references))


def exact(pages):
    """The exact LRU miss-ratio curve, at every size up to the footprint.

    Cold misses count as misses at every size.
    """
    pages, universe = dense(pages)
    histogram = np.zeros(universe + 1, dtype=np.int64)
    if pages.size:
        _lru.stack_distances(pages, universe, None, histogram)
    return _curve_from_histogram(histogram, pages.size)


def _threshold(rate):
    if not 0.0 < rate <= 1.0:
        raise ValueError('the sampling rate must be in (0, 1]')
    return max(1, int(round(rate * HASH_MODULUS)))


def shards_fixed_rate(pages, rate, salt=DEFAULT_SALT, adjust=True):
    """SHARDS at a fixed sampling rate.

    Only references to pages whose hash is under ``rate`` are simulated,
    each standing for 1/rate references at 1/rate times its distance.
    ``adjust`` applies SHARDS_adj: the difference between the expected
    and the actual number of sampled references is added to the first
    bucket, which removes most of the error a few very hot pages falling
    in or out of the sample would cause.
    """
    pages = as_pages(pages)
    threshold = _threshold(rate)
    rate = threshold / HASH_MODULUS
    kept = np.empty(pages.size, dtype=np.int64)
    count = _lru.sample(pages, threshold, salt, kept)
    sampled, universe = dense(kept[:count])
    histogram = np.zeros(universe + 1, dtype=np.int64)
    if count:
        _lru.stack_distances(sampled, universe, None, histogram)
    distances = np.flatnonzero(histogram[1:]) + 1
    scaled = np.maximum(1, np.rint(distances / rate).astype(np.int64))
    rescaled = np.zeros(int(scaled.max(initial=1)) + 1)
    np.add.at(rescaled, scaled, histogram[distances])
    expected = pages.size * rate
    if adjust:
        rescaled[1] += expected - count
    # In sampled references: each stands for 1/rate of the trace's.
    return _curve_from_histogram(rescaled, expected if adjust else count)


def shards_fixed_size(pages, max_pages, salt=DEFAULT_SALT):
    """SHARDS tracking at most ``max_pages`` sampled pages (s_max).

    The rate starts at 1 and drops whenever a new page would overflow the
    sample, so memory stays constant whatever the footprint. SHARDS_adj
    is applied at the final rate, as for ``shards_fixed_rate``.
    """
    pages, universe = dense(pages)
    histogram = np.zeros(universe + 1)
    if not pages.size:
        return _curve_from_histogram(histogram, 0)
    _, threshold = _lru.shards_fixed_size(pages, universe, max_pages, salt,
                                          histogram)
    # SHARDS_adj at the final rate, in whose units the histogram is.
    expected = pages.size * threshold / HASH_MODULUS
    histogram[1] += expected - histogram.sum()
    return _curve_from_histogram(histogram, expected)


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
