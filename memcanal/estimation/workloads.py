"""Workload generators: page-reference streams with a known working set.

Each workload keeps its state between calls to ``references`` so a
simulated VM can run one continuously, interval after interval.
"""

import numpy as np


class HotColdWorkload:
    """References that fall on a hot set with probability ``hot_probability``.

    The hot set is ``hot_pages`` contiguous pages starting at ``hot_start``;
    the rest of references are uniform over the VM's ``total_pages``. The
    true working set over a long window is the hot set plus the cold pages
    touched, which tests compute exactly from the stream.
    """

    def __init__(self, total_pages, hot_pages, hot_probability, rng,
                 hot_start=0):
        if not 0 < hot_pages <= total_pages:
            raise ValueError('hot_pages must be in (0, total_pages]')
        if not 0.0 <= hot_probability <= 1.0:
            raise ValueError('hot_probability must be in [0, 1]')
        if not 0 <= hot_start <= total_pages - hot_pages:
            raise ValueError('the hot set must lie inside the VM')
        self.total_pages = total_pages
        self.hot_pages = hot_pages
        self.hot_probability = hot_probability
        self.hot_start = hot_start
        self._rng = rng

    def references(self, count):
        hot = self._rng.random(count) < self.hot_probability
        pages = self._rng.integers(0, self.total_pages, size=count)
        pages[hot] = self.hot_start + self._rng.integers(
            0, self.hot_pages, size=int(hot.sum()))
        return pages


class LoopWorkload:
    """A sequential scan over ``loop_pages`` pages, repeated forever.

    The classic case where LRU misses on every reference until the whole
    loop fits, so its miss-ratio curve is a cliff at ``loop_pages``.
    """

    def __init__(self, loop_pages, start_page=0):
        if loop_pages <= 0:
            raise ValueError('loop_pages must be positive')
        self.loop_pages = loop_pages
        self.start_page = start_page
        self._position = 0

    def references(self, count):
        offsets = (self._position + np.arange(count)) % self.loop_pages
        self._position = int((self._position + count) % self.loop_pages)
        return self.start_page + offsets
