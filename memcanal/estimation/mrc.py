"""Miss-ratio curves from LRU stack distances (Mattson et al., 1970).

Under LRU, a reference hits in a memory of ``c`` pages exactly when its
stack distance (distinct pages touched since the previous reference to the
same page, plus one) is at most ``c``; so one pass gives the miss ratio at
every size.
"""

import numpy as np

COLD = -1


def stack_distances(references):
    """The LRU stack distance of every reference (COLD for a first touch).

    A Fenwick tree over positions marks each page's latest reference; the
    marks between a page's previous reference and now count the distinct
    pages touched in between. O(n log n).
    """
    refs = np.asarray(references).tolist()
    size = len(refs)
    tree = [0] * (size + 1)
    last_seen = {}
    distances = np.full(size, COLD, dtype=np.int64)

    def add(position, delta):
        position += 1
        while position <= size:
            tree[position] += delta
            position += position & -position

    def prefix(position):
        total = 0
        while position > 0:
            total += tree[position]
            position -= position & -position
        return total

    for index, page in enumerate(refs):
        previous = last_seen.get(page)
        if previous is not None:
            distances[index] = prefix(index) - prefix(previous + 1) + 1
            add(previous, -1)
        add(index, 1)
        last_seen[page] = index
    return distances


def miss_ratio_curve(references):
    """Miss ratio at every size from 1 page to the distinct-page count.

    Returns ``(sizes_in_pages, miss_ratios)``; cold misses count as misses
    at every size.
    """
    distances = stack_distances(references)
    total = distances.size
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    warm = distances[distances != COLD]
    distinct = total - warm.size
    hist = np.bincount(warm, minlength=distinct + 1)[:distinct + 1]
    hits_at_size = np.cumsum(hist)[1:]
    sizes = np.arange(1, distinct + 1, dtype=np.int64)
    return sizes, 1.0 - hits_at_size / total


def compact(sizes, miss_ratios, max_points, page_size):
    """At most ``max_points`` [bytes, miss ratio] pairs of a curve.

    Keeps the first and last points and spreads the rest evenly on a log
    scale of size, where miss-ratio curves change most at small sizes.
    """
    if len(sizes) <= max_points:
        chosen = np.arange(len(sizes))
    else:
        chosen = np.unique(np.round(
            np.geomspace(1, len(sizes), max_points) - 1).astype(np.int64))
    return [[int(sizes[i]) * page_size, float(miss_ratios[i])]
            for i in chosen]
