"""Log-buffer emulation: what PML and PRL hardware would give the hypervisor.

Both logs are 512 64-bit entries per vCPU, filled from index 511 down
(Bitchebe et al., sections 2.1 and 3.2):

- PML logs a page when a write sets its dirty bit, so once per page until
  the dirty bits are cleared. A full log is a VM exit handled on the VM's
  own CPU: the vCPU stops, nothing is missed, and the VM pays the
  handler's time (``vm_cpu_ns``).
- PRL_PAML logs the page of every reference that reaches a page walk
  (a TLB miss), reads and writes alike, the same page as often as it
  misses. A full log raises an IPI to another CPU and the VM keeps
  running; references that arrive while the handler runs (index
  negative) are missed and counted, as in the paper's Table 2.

The TLB is a fully associative LRU of ``tlb_entries`` per vCPU: a
reference misses exactly when its stack distance in that vCPU's stream
exceeds the TLB size, so it reuses the MRC code.

The log-full handler hands each full log to a ``CumulativeBuffer``, the
per-VM count of every page's log entries (section 3.3).
"""

import dataclasses

import numpy as np

from memcanal.estimation import _lru
from memcanal.estimation import mrc

LOG_ENTRIES = 512
TLB_ENTRIES = 64
# A log-full event costs an IPI or exit, entry and return (about 1 us on
# current CPUs) plus copying and counting each entry.
HANDLER_BASE_NS = 1000
HANDLER_ENTRY_NS = 2


def covering(array, pages):
    """``array`` (per page, zero for pages it lacks) long enough for every
    page of ``pages``; grown at least twofold so growth is rare."""
    highest = int(pages.max()) if len(pages) else -1
    if highest < len(array):
        return array
    grown = np.zeros(max(highest + 1, 2 * len(array)), array.dtype)
    grown[:len(array)] = array
    return grown


@dataclasses.dataclass
class LogStats:
    events: int = 0          # log-full events
    logged: int = 0          # GPAs written to a log
    missed: int = 0          # GPAs lost while a PRL handler ran
    handler_ns: int = 0      # CPU time of the log-full handlers
    vm_cpu_ns: int = 0       # of which taken from the VM's own CPU (PML)

    @property
    def missed_per_event(self):
        return self.missed / self.events if self.events else 0.0

    def add(self, other):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name)
                    + getattr(other, field.name))

    def as_dict(self):
        return dict(dataclasses.asdict(self),
                    missed_per_event=self.missed_per_event)


@dataclasses.dataclass(frozen=True)
class Delivery:
    """The GPAs of the logs that filled, in order, and what it took."""

    gpas: np.ndarray
    stats: LogStats


def most_recent_distinct(pages, count):
    """The last ``count`` distinct pages of ``pages``, oldest first."""
    length = min(len(pages), 4 * count)
    while True:
        tail = pages[len(pages) - length:][::-1]
        distinct, first = np.unique(tail, return_index=True)
        if len(distinct) >= count or length == len(pages):
            return tail[np.sort(first)[:count]][::-1]
        length = min(len(pages), 4 * length)


class Tlb:
    """A fully associative LRU TLB of ``entries`` translations."""

    def __init__(self, entries=TLB_ENTRIES):
        if entries < 1:
            raise ValueError('a TLB has at least one entry')
        self.entries = entries
        self._recent = np.zeros(0, np.int64)

    def misses(self, pages):
        """Which of ``pages`` miss; the TLB keeps its content across calls.

        The pages the TLB holds are replayed first, in recency order, so
        the stack distances of ``pages`` are those of the whole stream.
        """
        pages = np.asarray(pages, dtype=np.int64)
        if not len(pages):
            return np.zeros(0, bool)
        stream = np.concatenate([self._recent, pages])
        distances = mrc.stack_distances(stream)[len(self._recent):]
        self._recent = most_recent_distinct(stream, self.entries)
        return (distances == mrc.FIRST_TOUCH) | (distances > self.entries)


class _VcpuLog:
    """One vCPU's log buffer: the entries of the log being filled."""

    def __init__(self):
        self.pending = []
        self.filled = 0
        self.busy_until = np.iinfo(np.int64).min


class _Log:
    """Per-vCPU logs of ``log_entries``; subclasses choose what is logged."""

    def __init__(self, log_entries=LOG_ENTRIES,
                 handler_base_ns=HANDLER_BASE_NS,
                 handler_entry_ns=HANDLER_ENTRY_NS):
        if log_entries < 1:
            raise ValueError('a log has at least one entry')
        self.log_entries = log_entries
        self.handler_ns = handler_base_ns + handler_entry_ns * log_entries
        self.stats = LogStats()
        self._vcpus = {}

    def _vcpu(self, vcpu):
        return self._vcpus.setdefault(int(vcpu), _VcpuLog())

    def feed(self, trace):
        """Run ``trace`` through the logs; return what the handlers got."""
        logged, times, vcpus = self._candidates(trace)
        stats, full = LogStats(), []
        for vcpu in np.unique(vcpus):
            mine = vcpus == vcpu
            full.extend(self._fill(self._vcpu(vcpu), logged[mine],
                                   times[mine], stats))
        self.stats.add(stats)
        gpas = np.concatenate(full) if full else np.zeros(0, np.int64)
        return Delivery(gpas, stats)

    def flush(self):
        """Take the entries of the logs not yet full (no log-full event).

        KVM reads partial PML logs at every exit and dirty-log request; a
        PML-based estimator does so before each iteration.
        """
        pending = [gpas for log in self._vcpus.values()
                   for gpas in log.pending]
        for log in self._vcpus.values():
            log.pending, log.filled = [], 0
        return (np.concatenate(pending) if pending
                else np.zeros(0, np.int64))

    def _fill(self, log, gpas, times, stats):
        """Fill one vCPU's log with ``gpas``; return the logs that filled."""
        full, start, count = [], 0, len(gpas)
        while start < count:
            if times[start] < log.busy_until:
                resume = start + int(np.searchsorted(
                    times[start:], log.busy_until))
                stats.missed += resume - start
                start = resume
                continue
            take = min(self.log_entries - log.filled, count - start)
            log.pending.append(gpas[start:start + take])
            log.filled += take
            stats.logged += take
            start += take
            if log.filled == self.log_entries:
                full.extend(log.pending)
                log.pending, log.filled = [], 0
                stats.events += 1
                stats.handler_ns += self.handler_ns
                log.busy_until = self._handler_end(times[start - 1], stats)
        return full

    def _candidates(self, trace):
        raise NotImplementedError

    def _handler_end(self, full_at, stats):
        raise NotImplementedError


class PrlLog(_Log):
    """PRL_PAML: every TLB miss is logged; the handler runs elsewhere."""

    def __init__(self, tlb_entries=TLB_ENTRIES, **kwargs):
        super().__init__(**kwargs)
        self.tlb_entries = tlb_entries
        self._tlbs = {}

    def _candidates(self, trace):
        pages = np.asarray(trace.pages, dtype=np.int64)
        vcpus = np.asarray(trace.vcpus)
        walks = np.zeros(len(pages), bool)
        for vcpu in np.unique(vcpus):
            mine = vcpus == vcpu
            tlb = self._tlbs.setdefault(int(vcpu), Tlb(self.tlb_entries))
            walks[mine] = tlb.misses(pages[mine])
        return pages[walks], trace.times_ns()[walks], vcpus[walks]

    def _handler_end(self, full_at, stats):
        # The VM runs on; the log stays off until the handler is done.
        return full_at + self.handler_ns


class PmlLog(_Log):
    """PML: a page is logged by the write that sets its dirty bit."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._dirty = np.zeros(0, bool)

    def clear_dirty(self):
        """Clear every dirty bit, so each page is logged again when next
        written (the start of a new dirty epoch)."""
        self._dirty[:] = False

    def _candidates(self, trace):
        writes = np.asarray(trace.writes, dtype=bool)
        pages = np.asarray(trace.pages, dtype=np.int64)[writes]
        times, vcpus = trace.times_ns()[writes], np.asarray(trace.vcpus)[
            writes]
        self._dirty = covering(self._dirty, pages)
        # The first write of each page in this trace, if it was clean.
        distinct, first = np.unique(pages, return_index=True)
        first = np.sort(first[~self._dirty[distinct]])
        self._dirty[distinct] = True
        return pages[first], times[first], vcpus[first]

    def _handler_end(self, full_at, stats):
        # The vCPU stops for the handler: nothing is missed, the VM pays.
        stats.vm_cpu_ns += self.handler_ns
        return np.iinfo(np.int64).min


class CumulativeBuffer:
    """Per-VM count of log entries by page, filled by log-full handlers."""

    def __init__(self):
        self.counts = np.zeros(0, np.int64)

    def add(self, gpas):
        gpas = mrc.as_pages(gpas)
        try:
            _lru.accumulate(gpas, self.counts)
        except ValueError:
            # A page beyond the buffer; nothing was counted yet.
            self.counts = covering(self.counts, gpas)
            _lru.accumulate(gpas, self.counts)

    def pages_logged_at_least(self, times):
        return int(np.count_nonzero(self.counts >= times))

    def pages_logged(self):
        return int(np.count_nonzero(self.counts))

    def reset(self):
        self.counts[:] = 0
