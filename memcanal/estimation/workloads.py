"""Workload generators from the papers, each with a known ground truth.

A workload is an endless stream of page references cut into traces by
``take(count)``; it keeps its position between calls so a simulated VM
runs it interval after interval. References are spaced evenly in time at
the workload's rate, as a CPU-bound loop issues them.

- ``PrlSyntheticApp``: the PRL paper's synthetic application over an
  array of ``size_pages`` pages (Listing 1: each page read or written
  with write intensity ``wi``; Listing 2: the phase orders RWRW, RRWW and
  WWRR). Its working set is exactly the array.
- ``WriteThenWork``: PRL section 2.4's variant: write all of x pages once,
  then work on the first y pages only. Its working set is y; PML, which
  sees each dirtied page once, reports x.
- ``FileServer``: the Hcache microbenchmarks (section 6.1): 500 files of
  4 MB read or overwritten whole, in 64 KB chunks, picked Sequentially,
  at Random, by Zipf(1.0) or by Class (a tenth of the files ten times as
  popular), with a write ratio.
- ``zipf_pages`` and ``uniform_pages``: plain page streams for benchmarks.
"""

import numpy as np

from memcanal.estimation import traces

PRL_ORDERS = ('RWRW', 'RRWW', 'WWRR', 'random')
FILE_PATTERNS = ('sequential', 'random', 'zipf', 'class')
MB = 2 ** 20


def zipf_pages(count, pages, alpha, rng):
    """``count`` references over ``pages`` pages, P(page i) ~ 1/(i+1)^alpha.

    Inverse-CDF sampling, so the distribution is bounded (numpy's own
    zipf is not) and page 0 is the hottest.
    """
    weights = 1.0 / np.arange(1, pages + 1) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(count)),
                      pages - 1).astype(np.int64)


def uniform_pages(count, pages, rng):
    return rng.integers(0, pages, size=count, dtype=np.int64)


class Workload:
    """Cuts the rounds a subclass generates into traces of any length.

    A subclass sets ``reference_ns`` (time between references) and
    implements ``_round()``, returning the (pages, writes) of one natural
    unit: a pass over the array, a batch of file requests.
    """

    reference_ns = 1000

    def __init__(self, base_page=0, vcpu=0):
        self.base_page = base_page
        self.vcpu = vcpu
        self._pending_pages = np.zeros(0, np.int64)
        self._pending_writes = np.zeros(0, bool)
        self._issued = 0

    def _round(self):
        raise NotImplementedError

    @property
    def working_set_pages(self):
        """The pages a correct WSS estimator should report."""
        raise NotImplementedError

    def take(self, count):
        """The next ``count`` references as a Trace."""
        pages, writes = [self._pending_pages], [self._pending_writes]
        have = len(self._pending_pages)
        while have < count:
            round_pages, round_writes = self._round()
            pages.append(round_pages)
            writes.append(round_writes)
            have += len(round_pages)
        pages, writes = np.concatenate(pages), np.concatenate(writes)
        self._pending_pages, self._pending_writes = pages[count:], writes[
            count:]
        times = (self._issued + np.arange(count, dtype=np.int64)) * \
            self.reference_ns
        self._issued += count
        return traces.Trace(pages[:count] + self.base_page, writes[:count],
                            times, np.full(count, self.vcpu, np.uint16))

    def run_for(self, seconds):
        """The references of the next ``seconds`` of run time."""
        end = int(seconds * traces.SECOND_NS)
        count = max(0, -(-(end - self._issued * self.reference_ns)
                         // self.reference_ns))
        return self.take(count)


class PrlSyntheticApp(Workload):
    """PRL's synthetic application: ``size_pages`` pages, one pass over
    them every ``pass_seconds``.

    ``order`` RWRW reads then writes each page in turn; RRWW makes read
    passes for ``phase_seconds``, then write passes for as long, and so
    on; WWRR starts with the writes; ``random`` is Listing 1, one
    operation per page, a write with probability ``write_intensity``.
    """

    def __init__(self, size_pages, order='RWRW', pass_seconds=1.0,
                 phase_seconds=60.0, write_intensity=0.5, rng=None,
                 base_page=0, vcpu=0):
        if order not in PRL_ORDERS:
            raise ValueError('order must be one of %s' % ', '.join(
                PRL_ORDERS))
        if size_pages <= 0 or pass_seconds <= 0 or phase_seconds <= 0:
            raise ValueError('size_pages, pass_seconds and phase_seconds '
                             'must be positive')
        if not 0.0 <= write_intensity <= 1.0:
            raise ValueError('write_intensity must be in [0, 1]')
        super().__init__(base_page, vcpu)
        self.size_pages = size_pages
        self.order = order
        self.write_intensity = write_intensity
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._array = np.arange(size_pages, dtype=np.int64)
        self._passes = 0
        self._passes_per_phase = max(1, round(phase_seconds / pass_seconds))
        per_pass = size_pages * (2 if order == 'RWRW' else 1)
        self.reference_ns = max(1, int(pass_seconds * traces.SECOND_NS
                                       / per_pass))

    @property
    def working_set_pages(self):
        return self.size_pages

    def _round(self):
        pages, size = self._array, self.size_pages
        if self.order == 'random':
            return pages, self._rng.random(size) * 100 < (
                self.write_intensity * 100)
        if self.order == 'RWRW':
            return np.repeat(pages, 2), np.tile([False, True], size)
        second_phase = (self._passes // self._passes_per_phase) % 2 == 1
        self._passes += 1
        writing = second_phase != (self.order == 'WWRR')
        return pages, np.full(size, writing)


class WriteThenWork(Workload):
    """Write all ``all_pages`` once, then RWRW over the first
    ``work_pages`` only, a pass every ``pass_seconds``."""

    def __init__(self, all_pages, work_pages, pass_seconds=1.0, base_page=0,
                 vcpu=0):
        if not 0 < work_pages <= all_pages:
            raise ValueError('work_pages must be in (0, all_pages]')
        super().__init__(base_page, vcpu)
        self.all_pages = all_pages
        self.work_pages = work_pages
        self._wrote_all = False
        self.reference_ns = max(1, int(pass_seconds * traces.SECOND_NS
                                       / (2 * work_pages)))

    @property
    def working_set_pages(self):
        return self.work_pages

    def _round(self):
        if not self._wrote_all:
            self._wrote_all = True
            return (np.arange(self.all_pages, dtype=np.int64),
                    np.ones(self.all_pages, bool))
        return (np.repeat(np.arange(self.work_pages, dtype=np.int64), 2),
                np.tile([False, True], self.work_pages))


class FileServer(Workload):
    """Hcache's microbenchmarks: whole-file reads and overwrites.

    Pages are storage blocks: file ``f``'s page ``k`` is page
    ``f * file_pages + k``. Each request reads (or, with probability
    ``write_ratio``, overwrites) one whole file; whatever the chunk size
    (64 KB in the paper), the page stream is the file's pages in order.
    """

    def __init__(self, pattern, files=500, file_mb=4,
                 write_ratio=0.0, rng=None, page_size=4096,
                 requests_per_round=16, reference_ns=1000, base_page=0,
                 vcpu=0):
        if pattern not in FILE_PATTERNS:
            raise ValueError('pattern must be one of %s' % ', '.join(
                FILE_PATTERNS))
        if not 0.0 <= write_ratio <= 1.0:
            raise ValueError('write_ratio must be in [0, 1]')
        super().__init__(base_page, vcpu)
        self.pattern = pattern
        self.files = files
        self.file_pages = file_mb * MB // page_size
        self.write_ratio = write_ratio
        self.requests_per_round = requests_per_round
        self.reference_ns = reference_ns
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._next_file = 0
        if pattern == 'zipf':
            weights = 1.0 / np.arange(1, files + 1)
        elif pattern == 'class':
            popular = max(1, files // 10)
            weights = np.where(np.arange(files) < popular, 10.0, 1.0)
        else:
            weights = np.ones(files)
        self._file_weights = weights / weights.sum()

    @property
    def working_set_pages(self):
        return self.files * self.file_pages

    def requests(self, count):
        """The files of the next ``count`` requests and whether each is a
        write."""
        if self.pattern == 'sequential':
            chosen = (self._next_file + np.arange(count)) % self.files
            self._next_file = int((self._next_file + count) % self.files)
        else:
            chosen = self._rng.choice(self.files, size=count,
                                      p=self._file_weights)
        return chosen, self._rng.random(count) < self.write_ratio

    def _round(self):
        files, is_write = self.requests(self.requests_per_round)
        offsets = np.arange(self.file_pages, dtype=np.int64)
        pages = (files[:, None] * self.file_pages + offsets).ravel()
        return pages, np.repeat(is_write, self.file_pages)
