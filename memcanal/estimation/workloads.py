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
- ``SpecWebLike``: SPECweb99's static content (Hcache 6.1): files of 1,
  10, 100 and 1000 KB asked 35/50/14/1 % of the time, Zipf(1.0) within a
  class, read whole. Its curve falls slowly, as a web server's does.
- ``IndexSearchLike``: Ask Jeeves index search (Hcache 6.1): per keyword
  a binary search of the mapping file, then its postings in the index.
  Its popular postings fill ``hot_mb``, so it gains much from memory up
  to there (Table 2: 0.06 of its 512 MB misses at 920 MB).
- ``TpchLike``: 17 decision-support queries in turn, scanning segments of
  a hot ``hot_mb`` of tables: no misses above it, LRU thrashing below.
- ``TpccLike``: OLTP whose demand grows almost linearly in time (U-tube
  Figs. 8-9); ``working_set_pages`` is the footprint so far.
- ``DacapoLike``: the DaCapo programs one after another (U-tube 4.6),
  the working set jumping at each program's start; ``phase_at``.
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

    @property
    def allocated_pages(self):
        """How many pages from ``base_page`` up the program holds now, for
        a program that frees memory; None if it keeps what it wrote."""
        return None

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


def _pages(megabytes, scale, page_size=4096):
    return max(1, int(megabytes * scale * MB // page_size))


class SpecWebLike(Workload):
    """SPECweb99's static content (Hcache section 6.1): files of 1, 10,
    100 and 1000 KB, the classes asked 35, 50, 14 and 1 % of the time,
    Zipf(1.0) within a class; each class holds a quarter of the dataset.
    A request reads its file's pages in order."""

    CLASS_PAGES = (1, 3, 25, 245)
    CLASS_MIX = (0.35, 0.50, 0.14, 0.01)

    def __init__(self, dataset_mb=4900, rng=None, scale=1.0,
                 requests_per_round=256, reference_ns=1000, base_page=0):
        super().__init__(base_page)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.reference_ns = reference_ns
        self.requests_per_round = requests_per_round
        quarter = _pages(dataset_mb, scale) // 4
        self.files = [max(1, quarter // size) for size in self.CLASS_PAGES]
        self.offsets = np.cumsum([0] + [
            files * size for files, size in zip(self.files,
                                                self.CLASS_PAGES)])
        self.requested_classes = np.zeros(4, np.int64)
        self._cdfs = []
        for files in self.files:
            cdf = np.cumsum(1.0 / np.arange(1, files + 1))
            self._cdfs.append(cdf / cdf[-1])

    @property
    def working_set_pages(self):
        return int(self.offsets[-1])

    def _round(self):
        classes = self._rng.choice(4, self.requests_per_round,
                                   p=self.CLASS_MIX)
        self.requested_classes += np.bincount(classes, minlength=4)
        draws = self._rng.random(classes.size)
        pages = []
        for kind, draw in zip(classes.tolist(), draws.tolist()):
            size = self.CLASS_PAGES[kind]
            chosen = min(int(np.searchsorted(self._cdfs[kind], draw)),
                         self.files[kind] - 1)
            start = self.offsets[kind] + chosen * size
            pages.append(np.arange(start, start + size, dtype=np.int64))
        pages = np.concatenate(pages)
        return pages, np.zeros(pages.size, bool)


class IndexSearchLike(Workload):
    """Ask Jeeves index search (Hcache section 6.1): per query 1-3
    keywords; per keyword a binary search over the mapping file (its
    bisection probes, the top levels hot) and a read of its postings in
    the index. Queries draw 99.5 % of keywords from a popular vocabulary
    whose postings fill ``hot_mb`` and the rest from the whole index, so
    the VM gains much from memory up to the hot size."""

    POSTINGS_PAGES = 4
    POPULAR_SHARE = 0.995

    def __init__(self, mapping_mb=66, index_mb=2400, hot_mb=820, rng=None,
                 scale=1.0, queries_per_round=32, reference_ns=1000,
                 base_page=0):
        super().__init__(base_page)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.reference_ns = reference_ns
        self.queries_per_round = queries_per_round
        self.mapping_pages = _pages(mapping_mb, scale)
        self.keywords = max(2, _pages(index_mb, scale)
                            // self.POSTINGS_PAGES)
        self.popular = max(1, min(self.keywords, _pages(hot_mb, scale)
                                  // self.POSTINGS_PAGES))
        # Popular keywords' postings are scattered through the index.
        self._placement = self._rng.permutation(self.keywords)

    @property
    def working_set_pages(self):
        return self.mapping_pages + self.keywords * self.POSTINGS_PAGES

    def _probes(self, keyword):
        """The mapping pages a binary search for ``keyword`` reads."""
        low, high, probes = 0, self.mapping_pages, []
        target = keyword * self.mapping_pages // self.keywords
        while low < high:
            middle = (low + high) // 2
            probes.append(middle)
            if middle == target:
                break
            low, high = (middle + 1, high) if middle < target else (
                low, middle)
        return probes

    def _round(self):
        count = int(self._rng.integers(1, 4, self.queries_per_round).sum())
        popular = self._rng.random(count) < self.POPULAR_SHARE
        keywords = np.where(
            popular, zipf_pages(count, self.popular, 0.3, self._rng),
            self._rng.integers(0, self.keywords, count))
        pages = []
        for keyword in keywords.tolist():
            pages.append(np.array(self._probes(keyword), np.int64))
            start = self.mapping_pages + int(
                self._placement[keyword]) * self.POSTINGS_PAGES
            pages.append(np.arange(start, start + self.POSTINGS_PAGES,
                                   dtype=np.int64))
        pages = np.concatenate(pages)
        return pages, np.zeros(pages.size, bool)


class TpchLike(Workload):
    """A decision-support run (Hcache's TPC-H): 17 queries in turn, each
    scanning two to four of eight table segments that together fill
    ``hot_mb``, plus a few index probes anywhere in the database. Above
    the hot set it barely misses; below, the scans thrash under LRU."""

    QUERIES = 17
    TABLES = 8
    PROBES_PER_QUERY = 16

    def __init__(self, database_mb=496, hot_mb=330, rng=None, scale=1.0,
                 reference_ns=1000, base_page=0):
        super().__init__(base_page)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.reference_ns = reference_ns
        self.database_pages = _pages(database_mb, scale)
        hot = min(self.database_pages, _pages(hot_mb, scale))
        weights = self._rng.random(self.TABLES) + 0.5
        bounds = np.round(np.cumsum(np.concatenate([[0], weights]))
                          / weights.sum() * hot).astype(np.int64)
        self.tables = list(zip(bounds[:-1], bounds[1:]))
        self.queries = [self._rng.choice(self.TABLES, int(
            self._rng.integers(2, 5)), replace=False)
            for _ in range(self.QUERIES)]
        self.hot_pages = hot
        self._next_query = 0

    @property
    def working_set_pages(self):
        return self.hot_pages

    def _round(self):
        query = self.queries[self._next_query]
        self._next_query = (self._next_query + 1) % self.QUERIES
        scans = [np.arange(*self.tables[table], dtype=np.int64)
                 for table in query]
        probes = self._rng.integers(0, self.database_pages,
                                    self.PROBES_PER_QUERY)
        pages = np.concatenate(scans + [probes])
        return pages, np.zeros(pages.size, bool)


class TpccLike(Workload):
    """An OLTP database whose memory demand grows almost linearly (U-tube
    Figs. 8-9): new orders append pages, so the footprint at time t is
    ``start_mb + growth_mb_per_s * t`` (up to ``max_mb``). 70 % of the
    references go to the newest tenth of it, the rest anywhere in it;
    30 % are writes."""

    RECENT_SHARE = 0.7
    WRITE_SHARE = 0.3

    def __init__(self, start_mb=300, growth_mb_per_s=0.25, max_mb=900,
                 rng=None, scale=1.0, reference_ns=100000,
                 references_per_round=4096, base_page=0):
        super().__init__(base_page)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.reference_ns = reference_ns
        self.references_per_round = references_per_round
        self.start_pages = _pages(start_mb, scale)
        self.growth_pages_per_s = growth_mb_per_s * scale * MB / 4096
        self.max_pages = _pages(max_mb, scale)
        self._generated = 0

    def footprint_at(self, seconds):
        return int(min(self.max_pages, self.start_pages
                       + self.growth_pages_per_s * seconds))

    @property
    def working_set_pages(self):
        return self.footprint_at(self._generated * self.reference_ns / 1e9)

    def _round(self):
        count = self.references_per_round
        footprint = self.working_set_pages
        self._generated += count
        recent = max(1, footprint // 10)
        pages = np.where(
            self._rng.random(count) < self.RECENT_SHARE,
            footprint - 1 - self._rng.integers(0, recent, count),
            self._rng.integers(0, footprint, count)).astype(np.int64)
        return pages, self._rng.random(count) < self.WRITE_SHARE


class DacapoLike(Workload):
    """The DaCapo programs one after another (U-tube section 4.6), each
    working over its own heap for its own time: the working set changes
    sharply at every program's start. ``phases``: (name, working set MB,
    seconds)."""

    PHASES = (('avrora', 60, 120), ('eclipse', 600, 420), ('fop', 80, 90),
              ('h2', 750, 480), ('jython', 150, 180), ('luindex', 90, 120),
              ('lusearch', 200, 180), ('pmd', 160, 150),
              ('sunflow', 120, 150), ('xalan', 300, 510))

    def __init__(self, phases=None, rng=None, scale=1.0,
                 reference_ns=100000, references_per_round=4096,
                 base_page=0):
        super().__init__(base_page)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self.reference_ns = reference_ns
        self.references_per_round = references_per_round
        self.phases = [(name, _pages(mb, scale), seconds)
                       for name, mb, seconds in (phases or self.PHASES)]
        self._ends = np.cumsum([seconds for _, _, seconds in self.phases])
        self._generated = 0

    def phase_at(self, seconds):
        """The (name, working-set pages, seconds) running at ``seconds``
        (the run repeats)."""
        index = int(np.searchsorted(self._ends, seconds % self._ends[-1],
                                    side='right'))
        return self.phases[index]

    @property
    def working_set_pages(self):
        return self.phase_at(self._generated * self.reference_ns / 1e9)[1]

    @property
    def allocated_pages(self):
        """The running program's heap: an earlier program's exited with
        its JVM."""
        return self.working_set_pages

    def _round(self):
        count = self.references_per_round
        pages = self._rng.integers(0, self.working_set_pages, count)
        self._generated += count
        return pages.astype(np.int64), self._rng.random(count) < 0.3
