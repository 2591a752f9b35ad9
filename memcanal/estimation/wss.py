"""Working-set size estimators.

Each is driven the way the hypervisor would drive it: log-full handlers
(or page faults, for ESX) feed it as the VM runs, and ``iterate()`` is
called every observation interval (ESX keeps its own period and is told
the time with ``advance(now_ns)``). An estimate is in bytes; None until
the estimator has one.

- ``PrlWss``: PRL's hot-page estimator (Bitchebe et al., section 3.4).
- ``PmlWss``: distinct dirty pages until no new page appears (section 2.4).
- ``EsxSampling``: VMware ESX's sampling (Waldspurger, OSDI'02, as the PRL
  paper ran it): every period, a random sample of pages is invalidated and
  the fraction touched again scales the VM's memory.
"""

import math

import numpy as np

from memcanal import estimation
from memcanal.estimation import logsim

PRL_TAU = 50
PRL_OMEGA_S = 120.0
PRL_MU_S = 30.0
ESX_SAMPLE_PAGES = 100
ESX_PERIOD_S = 30.0


def distinct_pages(pages):
    """Pages touched in a window: Denning's working set W(t, tau), the
    ground truth the estimators are judged against."""
    return int(np.unique(pages).size)


class PrlWss:
    """WSS = hotPages x pageSize + epsilon.

    A page is hot once the cumulative buffer holds at least ``tau`` log
    entries of it. Every ``mu_s`` seconds the hot pages are counted into
    dist[t_i]; the estimate is taken when dist[t_i] - dist[t_i - omega] = 0,
    the VM having touched all of its working set. A new round then starts
    from an empty buffer, so the estimate follows the VM over time.

    One guard beyond the paper: an iteration with no hot page at all is not
    convergence (dist 0 = 0 would otherwise end the first round of a VM
    whose pages have not yet reached tau).
    """

    name = 'prl'

    def __init__(self, tau=PRL_TAU, omega_s=PRL_OMEGA_S, mu_s=PRL_MU_S,
                 epsilon_bytes=0, page_size=estimation.PAGE_SIZE):
        if tau < 1 or omega_s <= 0 or mu_s <= 0 or epsilon_bytes < 0:
            raise ValueError('tau, omega and mu must be positive, '
                             'epsilon not negative')
        self.tau = tau
        self.window = max(1, math.ceil(omega_s / mu_s - 1e-9))
        self.epsilon_bytes = epsilon_bytes
        self.page_size = page_size
        self.buffer = logsim.CumulativeBuffer()
        self.dist = []
        self.estimate = None
        self.rounds = 0

    def handle(self, gpas):
        """The log-full handler: count the entries of full logs."""
        self.buffer.add(gpas)

    def iterate(self):
        """One iteration; returns the estimate when this one converged."""
        hot = self.buffer.pages_logged_at_least(self.tau)
        self.dist.append(hot)
        if (len(self.dist) > self.window and hot > 0
                and hot == self.dist[-1 - self.window]):
            self.estimate = hot * self.page_size + self.epsilon_bytes
            self.rounds += 1
            self.buffer.reset()
            self.dist = []
            return self.estimate
        return None


class PmlWss:
    """Distinct pages PML logged, taken once an interval adds none.

    As in the paper, an interval without any new page ends the round,
    even one in which the VM only read: that is PML's blind spot.

    The caller starts a new dirty epoch (``PmlLog.clear_dirty``) when a
    round converges, so the next round sees pages written again.
    """

    name = 'pml'

    def __init__(self, page_size=estimation.PAGE_SIZE):
        self.page_size = page_size
        self.buffer = logsim.CumulativeBuffer()
        self._previous = 0
        self.estimate = None
        self.rounds = 0

    def handle(self, gpas):
        self.buffer.add(gpas)

    def iterate(self):
        seen = self.buffer.pages_logged()
        new, self._previous = seen - self._previous, seen
        if not new:
            self.estimate = seen * self.page_size
            self.rounds += 1
            self.buffer.reset()
            self._previous = 0
            return self.estimate
        return None


class EsxSampling:
    """Every ``period_s``, ``sample_pages`` random pages of the VM's
    ``memory_pages`` are invalidated; the fraction of them touched before
    the period ends, times the VM's memory, is the estimate.
    """

    name = 'esx'

    def __init__(self, memory_pages, rng, sample_pages=ESX_SAMPLE_PAGES,
                 period_s=ESX_PERIOD_S, page_size=estimation.PAGE_SIZE):
        if memory_pages < 1 or sample_pages < 1 or period_s <= 0:
            raise ValueError('memory, sample and period must be positive')
        self.memory_pages = memory_pages
        self.sample_pages = min(sample_pages, memory_pages)
        self.period_ns = int(period_s * 1e9)
        self.page_size = page_size
        self._rng = rng
        self._invalid = np.zeros(memory_pages, bool)
        self._period_end = None
        self.estimate = None
        self.history = []

    def _new_sample(self, start_ns):
        self._invalid[:] = False
        chosen = self._rng.choice(self.memory_pages, self.sample_pages,
                                  replace=False)
        self._invalid[chosen] = True
        self._period_end = start_ns + self.period_ns

    def _end_period(self):
        touched = self.sample_pages - int(np.count_nonzero(self._invalid))
        self.estimate = int(touched / self.sample_pages * self.memory_pages
                            ) * self.page_size
        self.history.append(self.estimate)

    def feed(self, trace):
        """Take the page faults ``trace`` makes on invalidated pages."""
        pages = np.asarray(trace.pages, dtype=np.int64)
        times = trace.times_ns()
        inside = pages < self.memory_pages
        pages, times = pages[inside], times[inside]
        start = 0
        while start < len(pages):
            if self._period_end is None:
                self._new_sample(int(times[start]))
            stop = start + int(np.searchsorted(times[start:],
                                               self._period_end))
            window = pages[start:stop]
            self._invalid[window[self._invalid[window]]] = False
            if stop < len(pages):
                self._end_period()
                self._new_sample(self._period_end)
            start = stop

    def advance(self, now_ns):
        """Close the periods that ended by ``now_ns`` with no reference."""
        while self._period_end is not None and now_ns >= self._period_end:
            self._end_period()
            self._new_sample(self._period_end)
