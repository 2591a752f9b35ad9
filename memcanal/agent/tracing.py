"""One VM's hypervisor-cache curves: tracing windows (Lu and Shen's
Fig. 6) and, while it is paged, its pager's.

Every ``[hcache] tracing_period`` the agent has the driver lend
``cache_fraction`` of a VM's memory to a hypervisor exclusive cache for
``tracing_window``, then give it back. What the cache saw over the window
becomes the VM's miss-ratio curve from the memory it kept upward, the
"hcache" curve, reported until the next window replaces it. The window's
first interval only fills the hypervisor's list of evicted pages: reads
of pages evicted before tracing began would look like cold misses.

A paged VM's pager is such a cache for good (Hcache's idea applied to
TMemCanal's paging): what it swapped out and what faulted back over the
last ``[estimation] mrc_window`` intervals give the "paging" curve from
the VM's resident memory up to its size, with no window to schedule.
"""

import collections
import math

import numpy as np

from memcanal.estimation import mrc

METHOD = 'hcache'
PAGING_METHOD = 'paging'


def window_curve(cache_traces):
    """The miss-ratio curve of consecutive CacheTraces (at least two): the
    first only fills the list of evicted pages, the others are counted,
    from the memory the VM kept at the last one upward."""
    warmup, counted = cache_traces[0], cache_traces[1:]
    return mrc.ghost_curve(
        np.concatenate([t.blocks for t in cache_traces]),
        np.concatenate([t.reads for t in cache_traces]),
        counted[-1].direct_pages, sum(t.accesses for t in counted),
        count_from=len(warmup.blocks))


class CacheTracing:
    """When one VM is traced, and the curve its last window gave."""

    def __init__(self, conf, page_size):
        options, interval = conf.hcache, conf.agent.report_interval
        self.period = (math.ceil(options.tracing_period / interval)
                       if options.tracing_period else 0)
        self.window = max(2, math.ceil(options.tracing_window / interval))
        self.cache_fraction = options.cache_fraction
        self.max_points = conf.agent.max_mrc_points
        self.page_size = page_size
        self.active = False
        self._intervals_since_start = None
        self._window_traces = []
        self._points = None

    def due(self):
        """Whether a window should start now."""
        return self.period > 0 and not self.active and (
            self._intervals_since_start is None or
            self._intervals_since_start >= self.period)

    def start(self):
        self.active = True
        self._intervals_since_start = 0
        self._window_traces = []

    def stop(self):
        self.active = False
        self._window_traces = []

    @property
    def window_complete(self):
        return self.active and len(self._window_traces) >= self.window

    def add(self, cache_trace):
        """One report interval passed, with what the cache saw (None when
        the VM was not traced)."""
        if self._intervals_since_start is not None:
            self._intervals_since_start += 1
        if cache_trace is None or not self.active:
            return
        self._window_traces.append(cache_trace)
        if self.window_complete:
            self._points = window_curve(self._window_traces).compact(
                self.max_points, self.page_size)

    def curves(self):
        """{"hcache": points} once a window has completed, else {}."""
        return {METHOD: self._points} if self._points else {}


class PagingCurve:
    """The "paging" curve of one VM over its last ``intervals`` paged
    intervals, after one more that fills the list of paged-out pages."""

    def __init__(self, intervals, max_points, page_size):
        self.max_points = max_points
        self.page_size = page_size
        self._traces = collections.deque(maxlen=intervals + 1)

    def add(self, paging_trace):
        """One report interval passed, with what the pager did (None when
        the VM was not paged: the curve starts afresh)."""
        if paging_trace is None:
            self._traces.clear()
        else:
            self._traces.append(paging_trace)

    def curves(self):
        """{"paging": points} once two paged intervals have passed."""
        if len(self._traces) < 2:
            return {}
        return {PAGING_METHOD: window_curve(list(self._traces)).compact(
            self.max_points, self.page_size)}
