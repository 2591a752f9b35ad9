"""What memcanal-pager's access sampling sees of a simulated VM.

The simulated pager (actuators.Pager) samples its VM as the real one
samples a guest through the userfaultfd of its RAM (doc/estimation.md,
"Sampled accesses"; hypervisor-patches/pager/README.md), so that the
agent's "sampled" estimates and the detector of simulated paging learn
from what a real host would give them. Per page it keeps whether the
page is mapped and whether it is write-protected, and sees a reference
the way the pager's fault rules do:

- each interval starts by zapping the sample (every page on a full pass:
  the ``full_pass_every``-th interval, the 12th, 24th, ...): a zapped
  page is unmapped until its next access. The agent may give another
  sample (``resample``: its adaptive rate), which the next interval
  zaps; each interval says which it had;
- an access to an unmapped page is a fault, seen (``touched``): MINOR on
  a zapped page, MISSING on a page paged out or never populated (a VM
  starts with none). A fault of a write is a write (``written``); a read
  maps a sampled page write-protected, so a later write is seen too (a
  WP fault), and any other page writable;
- an access to a mapped page is not seen, but a write to a protected one;
- a page the pager brings back without an access (a prefetch, a swap-in)
  is mapped writable, its next access unseen; the pager never does so
  with a sampled page, which stays out and faults instead.

References are the VM's guest pages as the agent's emulated logs take
them; the pager drops those beyond its memory. An interval ends at each
multiple of its length in the VM's time (the references' times).
"""

import dataclasses

import numpy as np

from memcanal.agent import adaptive
from memcanal.agent import driver
from memcanal.estimation import mrc


@dataclasses.dataclass(frozen=True)
class Settings:
    """The pager's sampling: ``rate`` and ``salt`` (mrc.sample_mask), the
    interval in VM nanoseconds and the full-pass period (0: none)."""

    rate: float
    interval_ns: int
    full_pass_every: int
    salt: int = mrc.DEFAULT_SALT

    @classmethod
    def of(cls, conf):
        """From [sampling]; None when it is disabled."""
        options = conf.sampling
        if not options.enabled:
            return None
        interval = options.interval or conf.agent.report_interval
        return cls(adaptive.initial_rate(options), int(interval * 1e9),
                   options.full_pass_every)


class Sampler:
    """The sampling of one VM of ``pages`` pages by ``settings``;
    ``on_close`` is called with each driver.AccessInterval it closes."""

    def __init__(self, pages, settings, on_close=None):
        self.pages = int(pages)
        self.settings = settings
        self.on_close = on_close
        self.sampled = self._mask(settings)
        # The sample the next interval zaps, once the agent set one.
        self._next = None
        self._mapped = np.zeros(self.pages, bool)
        self._protected = np.zeros(self.pages, bool)
        self._index = 0
        self._touched, self._written = [], []
        self._closed = []
        self._zap()

    def _mask(self, settings):
        return mrc.sample_mask(self.pages, settings.rate,
                               settings.salt).view(bool)

    def resample(self, rate, salt):
        """Zap the sample of ``rate`` and ``salt`` from the next interval
        on, as memcanal-pager's ``sample`` command: the interval under
        way keeps its own. A page that leaves the sample faults once
        more if it was zapped (seen as touched, outside the sample)."""
        self._next = dataclasses.replace(self.settings, rate=rate,
                                         salt=salt)

    @property
    def full(self):
        """Whether the current interval began with a full pass."""
        every = self.settings.full_pass_every
        return bool(every) and (self._index + 1) % every == 0

    def _zap(self):
        zapped = slice(None) if self.full else self.sampled
        self._mapped[zapped] = False
        self._protected[zapped] = False

    def access(self, pages, writes, times_ns):
        """References in order: page indexes below ``pages``, whether
        each writes, and their times (not decreasing)."""
        pages = np.asarray(pages, np.int64)
        writes = np.asarray(writes, bool)
        times_ns = np.asarray(times_ns, np.int64)
        start = 0
        while start < pages.size:
            stop = start + int(np.searchsorted(times_ns[start:],
                                               self._end_ns()))
            self._see(pages[start:stop], writes[start:stop])
            if stop < pages.size:
                self._close()
            start = stop

    def advance(self, now_ns):
        """Close every interval that ended by ``now_ns``."""
        while self._end_ns() <= now_ns:
            self._close()

    def swapped_out(self, pages):
        """The pager paged these out: their next access is a MISSING
        fault."""
        self._mapped[pages] = False
        self._protected[pages] = False

    def fetched(self, pages):
        """The pager brought these back without an access; the sampled
        ones it would have left out, to fault."""
        pages = np.asarray(pages, np.int64)
        pages = pages[~self.sampled[pages]]
        self._mapped[pages] = True
        self._protected[pages] = False

    def take(self):
        """The AccessIntervals closed since the last call, oldest first."""
        closed, self._closed = tuple(self._closed), []
        return closed

    def _end_ns(self):
        return (self._index + 1) * self.settings.interval_ns

    def _see(self, pages, writes):
        """References within one interval, in which no page changes
        state but by its own accesses."""
        distinct, first, inverse = np.unique(
            pages, return_index=True, return_inverse=True)
        write_first = writes[first]
        wrote = np.zeros(distinct.size, bool)
        wrote[inverse[writes]] = True
        faulted = ~self._mapped[distinct]
        # A read of a sampled page leaves it protected: a later write
        # faults again.
        protects = faulted & ~write_first & self.sampled[distinct]
        protected = ~faulted & self._protected[distinct]
        self._touched.append(distinct[faulted])
        self._written.append(distinct[
            (faulted & write_first) | ((protects | protected) & wrote)])
        self._mapped[distinct] = True
        self._protected[distinct] = (protects | protected) & ~wrote

    def _close(self):
        interval = driver.AccessInterval(
            np.unique(np.concatenate(self._touched or [[]])).astype(
                np.int64),
            np.unique(np.concatenate(self._written or [[]])).astype(
                np.int64),
            self.full, self.settings.interval_ns / 1e9,
            self.settings.rate, self.settings.salt)
        self._touched, self._written = [], []
        self._closed.append(interval)
        self._index += 1
        if self._next is not None:
            if self._next != self.settings:
                self.settings = self._next
                self.sampled = self._mask(self._next)
            self._next = None
        self._zap()
        if self.on_close is not None:
            self.on_close(interval)
