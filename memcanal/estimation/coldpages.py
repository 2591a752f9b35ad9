"""Under-loaded (cold) page detection for remote paging.

TMemCanal (Li, Huang et al., section IV.C) picks the pages of a VM to swap
out with a modified multi-queue (MQ) algorithm (Zhou and Philbin, USENIX
2001) and brings neighbours of a faulting page back with LRU-Zone
prefetching (figure 5). This module is that algorithm and nothing else: it
is fed which pages were accessed each scan period (PRL page-reference logs,
or the pager's own write-protect and fault signals) and answers which pages
to swap out and which to prefetch. It never touches memory itself.

All state is a handful of arrays with one entry per guest page, so a period
costs a few vectorised passes over the VM (a 1 GiB VM is 262,144 pages).
"""

import numpy as np

OUT = -1
"""Queue number of a page in the out queue (an under-loaded page)."""

DEFAULT_QUEUES = 8
MAX_QUEUES = 16
EXPIRE_I_FACTOR = 10
EXPIRE_II_FACTOR = 20
ZONE_PAGES = 16
PREFETCH_ZONES = 4
PREFETCH_COUNT = 32


class ColdPageDetector:
    """TMemCanal's modified multi-queue over every page of one VM.

    What the paper fixes, kept as written:

    - Priority queues Q0..Q(m-1) hold recently accessed pages; an out queue
      holds the under-loaded ones, "swapped later".
    - A page's queue follows its access frequency. The paper takes this from
      MQ, where QueueNum(f) = min(floor(log2 f), m - 1): the 8th access
      moves a page from Q2 to Q3.
    - Expire-time-I drops a page from a queue to the next lower one when it
      has not been accessed for that long; it is 10 scan periods ("a factor
      of 10~20 ... we select 10").
    - Expire-time-II drops a page from the queues to the out queue; the
      paper leaves it to the application.
    - LRU-Zones: fixed-size runs of guest-physical pages, kept in LRU order;
      an accessed page moves its zone to the head; a prefetch request walks
      the zones of a range from the most recent and returns up to ``count``
      remote pages of them (figure 5).

    Where the paper is silent, chosen here:

    - Like MQ, a demotion re-arms the page's clock: a page in Qk not
      accessed for k x expire-time-I reaches Q0, and goes out after a
      further expire-time-II. Frequency thus buys time, as MQ intends; a
      page in Q0 goes out after expire-time-II. The clock is anchored at
      the time the page was due, not at the observation that noticed it,
      so the scan period does not stretch it.
    - Like MQ's history buffer, a page in the out queue keeps its
      frequency; its next access counts on from it.
    - Frequency counts periods with an access, not references: a scan sees
      at most one access per page per period, and PRL logs are reduced to
      the same set so both sources mean the same thing.
    - Every page starts in Q0 with frequency 0, last touched at ``now``:
      a page never accessed goes out after expire-time-II.
    - Expire-time-II is 20 scan periods unless given (twice
      expire-time-I); tune it per workload, as the paper says.
    - ``cold()`` lists the out queue in the order pages entered it (a
      queue, FIFO, like MQ's history buffer), ties by page number.
    - Zones are 16 pages (64 KiB, the aligned block that cut zero-fill
      faults twelvefold in our userfaultfd measurements). A fault's prefetch
      range is the faulting page's zone and 4 zones either side; up to 32
      pages. The faulting page itself is not in the returned array.
    - A prefetched page was not accessed: its frequency is unchanged, it
      goes back to Q0 and out again after expire-time-II unless touched.

    Times are in any unit, the same as ``scan_period``; they must not go
    backwards.
    """

    def __init__(self, pages, scan_period, queues=DEFAULT_QUEUES,
                 expire_i=None, expire_ii=None, zone_pages=ZONE_PAGES,
                 prefetch_zones=PREFETCH_ZONES,
                 prefetch_count=PREFETCH_COUNT, now=0.0):
        if pages < 1 or scan_period <= 0:
            raise ValueError('pages and scan_period must be positive')
        if not 1 <= queues <= MAX_QUEUES:
            # Queue m - 1 needs 2**(m - 1) accesses: 16 is 32,768 periods.
            raise ValueError(f'queues must be in [1, {MAX_QUEUES}]')
        self.expire_i = (EXPIRE_I_FACTOR * scan_period
                         if expire_i is None else float(expire_i))
        self.expire_ii = (EXPIRE_II_FACTOR * scan_period
                          if expire_ii is None else float(expire_ii))
        if self.expire_i <= 0 or self.expire_ii <= 0:
            raise ValueError('expire times must be positive')
        if zone_pages < 1 or prefetch_zones < 0 or prefetch_count < 0:
            raise ValueError('zone_pages must be positive, prefetch_zones '
                             'and prefetch_count not negative')
        self.pages = int(pages)
        self.scan_period = float(scan_period)
        self.queues = int(queues)
        self.zone_pages = int(zone_pages)
        self.prefetch_zones = int(prefetch_zones)
        self.prefetch_count = int(prefetch_count)
        self.now = float(now)

        self._freq = np.zeros(self.pages, np.uint32)
        self._queue = np.zeros(self.pages, np.int8)
        # When the page drops a queue (or, from Q0, goes out); inf once out.
        self._expire = np.full(self.pages, self.now + self.expire_ii)
        self._out_at = np.full(self.pages, np.inf)
        self._remote = np.zeros(self.pages, bool)
        zones = -(-self.pages // self.zone_pages)
        # LRU-Zone list as recency stamps: the head is the largest stamp.
        self._zone_stamp = np.full(zones, -1, np.int64)
        self._tick = 0
        # MQ's QueueNum(f) = min(floor(log2 f), m - 1) as a table over
        # f = 0 .. 2**(m - 1) (frequencies above are clipped to the end),
        # and each queue's time to its next drop.
        top = 1 << (self.queues - 1)
        freqs = np.arange(top + 1)
        self._queue_num = np.minimum(
            np.frexp(np.maximum(freqs, 1))[1] - 1,
            self.queues - 1).astype(np.int8)
        self._lifetime = np.full(self.queues, self.expire_i)
        self._lifetime[0] = self.expire_ii

    # -- feeding -----------------------------------------------------------

    def observe(self, accessed, now):
        """One scan period: the pages accessed in it (any order, repeats
        allowed), then every page whose expire time has passed drops."""
        now = self._advance(now)
        hits = self._pages(accessed)
        if hits.size:
            seen = np.zeros(self.pages, bool)
            seen[hits] = True
            self._access(np.flatnonzero(seen), now)
        self._expire_due(now)

    def fault(self, page, now=None):
        """A swapped page was accessed: it leaves the out queue as an
        access, its zone becomes the most recent, and the remote pages to
        fetch with it are returned (and counted as resident again)."""
        now = self._advance(self.now if now is None else now)
        page = int(self._pages([page])[0])
        self._access(np.array([page]), now)
        zone = page // self.zone_pages
        first = max(0, zone - self.prefetch_zones) * self.zone_pages
        stop = (zone + self.prefetch_zones + 1) * self.zone_pages
        neighbours = self.prefetch(self.prefetch_count, first, stop)
        self.fetched(neighbours, now)
        return neighbours

    def swapped_out(self, pages):
        """The pager has moved these pages to remote memory (after its
        validate step): they are what a prefetch may bring back."""
        pages = self._pages(pages)
        newly = pages[self._queue[pages] != OUT]
        self._go_out(newly, self.now)
        self._remote[pages] = True

    def fetched(self, pages, now=None):
        """Remote pages brought back without an access (a prefetch): back
        in Q0 with a fresh expire-time-II, frequency unchanged."""
        now = self._advance(self.now if now is None else now)
        pages = self._pages(pages)
        pages = pages[self._remote[pages]]
        self._remote[pages] = False
        self._queue[pages] = 0
        self._expire[pages] = now + self.expire_ii
        self._out_at[pages] = np.inf

    # -- answers -----------------------------------------------------------

    def cold(self, limit=None):
        """Pages in the out queue still resident: the swap-out candidates,
        oldest in the out queue first."""
        candidates = np.flatnonzero((self._queue == OUT) & ~self._remote)
        order = np.argsort(self._out_at[candidates], kind='stable')
        return candidates[order[:limit]]

    def prefetch(self, count, start=0, stop=None):
        """Figure 5: up to ``count`` remote pages of the zones within
        [start, stop), most recently accessed zone first, each zone's pages
        in address order. Changes nothing."""
        stop = self.pages if stop is None else min(int(stop), self.pages)
        start = max(0, int(start))
        if count <= 0 or start >= stop:
            return np.empty(0, np.int64)
        zones = np.arange(start // self.zone_pages,
                          (stop - 1) // self.zone_pages + 1)
        # Most recent first; equal stamps (never accessed) by address.
        zones = zones[np.argsort(-self._zone_stamp[zones], kind='stable')]
        candidates = (zones[:, None] * self.zone_pages
                      + np.arange(self.zone_pages)).ravel()
        candidates = candidates[(candidates >= start) & (candidates < stop)]
        return candidates[self._remote[candidates]][:count]

    def queue_of(self, pages):
        """Each page's queue; OUT (-1) for the out queue."""
        return self._queue[self._pages(pages)].astype(np.int64)

    def frequency(self, pages):
        return self._freq[self._pages(pages)].astype(np.int64)

    def stats(self):
        """Pages per queue, in the out queue, and of those, remote."""
        return {
            'queues': np.bincount(self._queue[self._queue >= 0],
                                  minlength=self.queues).tolist(),
            'out': int(np.count_nonzero(self._queue == OUT)),
            'remote': int(np.count_nonzero(self._remote)),
        }

    # -- internals ---------------------------------------------------------

    def _advance(self, now):
        now = float(now)
        if now < self.now:
            raise ValueError(f'time went backwards: {now} < {self.now}')
        self.now = now
        return now

    def _pages(self, pages):
        pages = np.asarray(pages, dtype=np.int64).ravel()
        if pages.size and (pages.min() < 0 or pages.max() >= self.pages):
            raise ValueError(f'page numbers must be in [0, {self.pages})')
        return pages

    def _access(self, pages, now):
        """MQ on a hit: frequency up, queue from it, clock re-armed."""
        freq = self._freq[pages]
        freq += 1
        self._freq[pages] = freq
        # In place: these arrays are as long as the VM on a busy period.
        np.minimum(freq, self._queue_num.size - 1, out=freq)
        queue = self._queue_num[freq]
        self._queue[pages] = queue
        expire = self._lifetime[queue]
        expire += now
        self._expire[pages] = expire
        self._out_at[pages] = np.inf
        self._remote[pages] = False
        self._tick += 1
        self._zone_stamp[pages // self.zone_pages] = self._tick

    def _expire_due(self, now):
        """Drop every page whose clock ran out, as many levels as the time
        since covers, in one pass: a page of Qq due at E drops at E,
        E + I, E + 2I, ... and, from Q0 (reached at E + (q - 1)I), goes
        out expire-time-II later."""
        due = np.flatnonzero(self._expire <= now)
        queue = self._queue[due]
        in_q0 = queue == 0
        self._go_out(due[in_q0], self._expire[due[in_q0]])
        due = due[~in_q0]
        if not due.size:
            return
        queue = queue[~in_q0].astype(np.int64)
        due_at = self._expire[due]
        drops = np.floor((now - due_at) / self.expire_i).astype(np.int64)
        drops += 1
        np.minimum(drops, queue, out=drops)
        left = queue - drops
        next_at = due_at + (drops - 1) * self.expire_i + self._lifetime[left]
        # Only a page that reached Q0 can be due again before now.
        leaving = next_at <= now
        self._go_out(due[leaving], next_at[leaving])
        staying = ~leaving
        self._queue[due[staying]] = left[staying]
        self._expire[due[staying]] = next_at[staying]

    def _go_out(self, pages, when):
        self._queue[pages] = OUT
        self._expire[pages] = np.inf
        self._out_at[pages] = when
