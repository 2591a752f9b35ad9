"""How a simulated VM's memory is resized: a balloon or memory hotplug,
with U-tube's semantics and the latencies Liu et al. measured (U-tube,
IEEE TPDS 2015, sections 2, 3.2 and 4.2), or paging (TMemCanal, Li,
Huang et al., sections III-IV), with the latencies of the paging
prototype (research/remote-paging.md).

- ``Balloon``: inflating takes pages from wherever the guest has them
  free, so the pages it holds are scattered over the guest's memory
  map (``holes``: the runs of them, section 4.3); deflating gives back
  the most recently taken pages first and can never give the VM more
  than it booted with (section 2.1, the memory cap).
- ``Hotplug``: growing onlines pages already plugged but offline, from
  low addresses up, and hot-adds whole sections only when those do not
  suffice; shrinking offlines pages from the highest address down and
  hot-removes a section once all its pages are offline (section 3.2).
  Online memory stays one run from address 0: no holes, and no cap.

``resize(current_bytes, target_bytes, loaded)`` returns the seconds the
change takes (``loaded``: the guest uses most of its memory, so removal
must page out or migrate what it uses). Each actuator applies the change
``target_bytes - current_bytes`` to its own state; the guest page cache
itself is resized by the driver. A resize that cannot be done raises
ResizeFailed and changes nothing; targets are at least one page.

- ``Pager``: the VM keeps its memory; its coldest pages go to other
  stores until the target stays resident on the host (see the class).
"""

import numpy as np

from memcanal.agent.drivers import simulated_sampling
from memcanal import estimation
from memcanal.estimation import coldpages
from memcanal.estimation import sampling
from memcanal import exception

MIB = 2 ** 20
SECTION_BYTES = 128 * MIB
"""x86-64's memory section, the unit of hot-add and hot-remove (2.2)."""

# Fig. 3 (idle VM, 128 MB steps): adding memory costs 60 ms per
# hot-added section and 55 ms per 128 MB deflated from a balloon.
HOTPLUG_ADD_SECTION_SECONDS = 0.060
BALLOON_DEFLATE_SECONDS = 0.055
# Fig. 5, idle VM: removing costs 46 ms per hot-removed section and
# 56 ms per 128 MB inflated into a balloon.
HOTPLUG_REMOVE_SECTION_SECONDS = 0.046
BALLOON_INFLATE_SECONDS = 0.056
# Figs. 4 and 6: onlining or offlining pages of sections already plugged
# only changes their state, "much faster" than either mechanism; the
# paper gives no number, so 5 ms per 128 MB is an assumption.
PAGE_STATE_SECONDS = 0.005
# Fig. 5, heavily loaded VM (TPC-C): removal must swap (balloon) or
# migrate and page out (hotplug) what the guest uses. The paper gives no
# absolute cost: ballooning is taken as 4 times its idle cost (an
# assumption read off the figure's slopes), and hotplug as the 30.4 %
# less than ballooning the text measures.
LOADED_BALLOON_FACTOR = 4.0
HOTPLUG_LOADED_SAVING = 0.304
# What a loaded removal adds to hotplug's idle cost, per 128 MB removed,
# so that removing a loaded section costs 30.4 % less than ballooning
# out 128 MB of a loaded VM.
HOTPLUG_LOADED_EXTRA_SECONDS = (
    BALLOON_INFLATE_SECONDS * LOADED_BALLOON_FACTOR
    * (1.0 - HOTPLUG_LOADED_SAVING) - HOTPLUG_REMOVE_SECTION_SECONDS)

_SECTION_PAGES = SECTION_BYTES // estimation.PAGE_SIZE


def _per_128mb(pages, seconds):
    """The cost of ``pages`` at ``seconds`` per 128 MB."""
    return pages / _SECTION_PAGES * seconds


def _pages(size_bytes):
    return size_bytes // estimation.PAGE_SIZE


class Balloon:
    """A balloon driver in a VM that booted with ``boot_bytes`` (its cap).

    The guest's memory map is its boot memory, a page each; ``rng``
    picks which free pages an inflation takes (the guest's free memory is
    scattered among the pages it uses, so anywhere).
    """

    def __init__(self, boot_bytes, uuid=None, rng=None):
        self.boot_bytes = boot_bytes
        self.uuid = uuid
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._held = np.zeros(_pages(boot_bytes), bool)
        # The pages each inflation took, oldest first: deflation gives
        # back the newest first, as Linux's balloon page list does.
        self._inflations = []

    @property
    def held_pages(self):
        return sum(len(pages) for pages in self._inflations)

    @property
    def holes(self):
        """Runs of pages the balloon holds in the guest's memory map: the
        fragmentation it causes (Fig. 7)."""
        held = self._held
        return int(held[:1].sum() + np.count_nonzero(held[1:] & ~held[:-1]))

    def _fail(self, reason):
        raise exception.ResizeFailed(uuid=self.uuid, reason=reason)

    def resize(self, current_bytes, target_bytes, loaded):
        change = _pages(target_bytes) - _pages(current_bytes)
        if change > 0:
            if target_bytes > self.boot_bytes:
                self._fail('a balloon cannot grow a VM past the %d bytes '
                           'it booted with' % self.boot_bytes)
            if change > self.held_pages:
                self._fail('the balloon holds only %d bytes to give back' % (
                    self.held_pages * estimation.PAGE_SIZE))
            self._deflate(change)
            return _per_128mb(change, BALLOON_DEFLATE_SECONDS)
        if change < 0:
            self._inflate(-change, _pages(current_bytes))
        return _per_128mb(-change, BALLOON_INFLATE_SECONDS) * (
            LOADED_BALLOON_FACTOR if loaded else 1.0)

    def _inflate(self, count, current_pages):
        # A VM grown by hotplug has more memory than it booted with.
        extra = current_pages + self.held_pages - self._held.size
        if extra > 0:
            self._held = np.concatenate([self._held, np.zeros(extra, bool)])
        taken = self._rng.choice(np.flatnonzero(~self._held), count,
                                 replace=False)
        self._held[taken] = True
        self._inflations.append(taken)

    def _deflate(self, count):
        while count:
            newest = self._inflations.pop()
            kept = max(0, newest.size - count)
            self._held[newest[kept:]] = False
            if kept:
                self._inflations.append(newest[:kept])
            count -= newest.size - kept


class Hotplug:
    """Memory hotplug (U-tube's hotmem driver) in a VM that booted with
    ``boot_bytes``.

    The address space is a list of sections: the boot memory's (the last
    one partial when the boot memory is not a whole number of sections),
    then the hot-added ones. Pages below ``online_pages`` are online, the
    rest of the plugged sections offline.
    """

    def __init__(self, boot_bytes, section_bytes=SECTION_BYTES):
        self.section_pages = _pages(section_bytes)
        full, partial = divmod(_pages(boot_bytes), self.section_pages)
        self._sections = [self.section_pages] * full + (
            [partial] if partial else [])
        self.online_pages = _pages(boot_bytes)

    @property
    def sections(self):
        return len(self._sections)

    @property
    def plugged_pages(self):
        return sum(self._sections)

    @property
    def offline_pages(self):
        return self.plugged_pages - self.online_pages

    @property
    def holes(self):
        """Hotplug keeps online memory contiguous: it never fragments."""
        return 0

    def resize(self, current_bytes, target_bytes, loaded):
        online = self.online_pages + _pages(target_bytes) - _pages(
            current_bytes)
        if online >= self.online_pages:
            return self._grow(online)
        return self._shrink(online, loaded)

    def _grow(self, online):
        plugged = self.plugged_pages
        # Offline pages first (page granularity), then new sections.
        seconds = _per_128mb(min(online, plugged) - self.online_pages,
                             PAGE_STATE_SECONDS)
        added = max(0, -(-(online - plugged) // self.section_pages))
        self._sections += [self.section_pages] * added
        self.online_pages = online
        return seconds + added * HOTPLUG_ADD_SECTION_SECONDS

    def _shrink(self, online, loaded):
        offlined = self.online_pages - online
        end = self.plugged_pages
        removed = 0
        # Pages offlined now in sections removed now: their cost is the
        # section's.
        in_removed = 0
        while end - self._sections[-1] >= online:
            start = end - self._sections.pop()
            in_removed += max(0, min(end, self.online_pages) - start)
            removed += 1
            end = start
        self.online_pages = online
        seconds = (removed * HOTPLUG_REMOVE_SECTION_SECONDS + _per_128mb(
            offlined - in_removed, PAGE_STATE_SECONDS))
        if loaded:
            seconds += _per_128mb(offlined, HOTPLUG_LOADED_EXTRA_SECONDS)
        return seconds


# Paging (remote-paging.md, measured on this machine's prototype): a
# fault served from the pager's pool, from a memory server over TCP, or
# from the local store read past the host's page cache (O_DIRECT). A
# memory server over TLS, as the service lends them, is taken at TCP's
# costs (not measured apart).
POOL_FAULT_SECONDS = 12e-6
STORE_FAULT_SECONDS = {'tcp': 30e-6, 'tls': 30e-6, 'file': 75e-6}
# Swap-out throughput by store: a page goes to every store at once, so
# the slowest sets the pace (213-267 MB/s over TCP, 490-1,100 MB/s to a
# local file).
STORE_SWAP_OUT_BYTES_PER_SECOND = {'tcp': 240e6, 'tls': 240e6,
                                   'file': 700e6}
LOCAL_STORE = 'file'
"""The agent's own store ([pager] local_store_dir), always written."""
SWAP_BATCH_PAGES = 512
"""Pages the prototype pager swaps out at once."""


def store_kind(spec):
    """The kind of a store spec: ``tls`` for ``tls:HOST:PORT``, what the
    service lends, or ``tcp`` for ``tcp:HOST:PORT``; ValueError for
    anything else."""
    kind, _, address = spec.partition(':')
    host, _, port = address.rpartition(':')
    if kind not in ('tcp', 'tls') or not host or not port.isdigit():
        raise ValueError('a store is tls:HOST:PORT or tcp:HOST:PORT, not '
                         '%r' % (spec,))
    return kind


class Pager:
    """TMemCanal's paging of one VM of ``pages`` guest pages, whose memory
    stays visible to the guest while only ``target_pages`` of it stay
    resident on the host.

    One ColdPageDetector (memcanal.estimation.coldpages) sees the pages
    the VM touched in each of the ``scans`` scan periods of every
    interval of ``interval_seconds``, paged or not, so it knows the cold
    pages when paging starts. ``run`` plays an interval's references in
    order, a scan an equal share of them. A reference to a page swapped
    out is a fault: the page comes back with its LRU-Zone prefetch. Once
    the faults have brought a batch of pages over the target (at most
    SWAP_BATCH_PAGES, at most 1/256 of the target), and at each
    scan's end, the coldest pages go out until the target stays
    resident: the detector's out queue first, oldest first, then the
    other resident pages least recently used first (the detector ranks
    only the pages it has let go, and knows nothing of the current scan).

    A fault is served from the pool (``pool_pages``: the latest
    swap-outs, TMemCanal's shared cache pool) or else from the fastest
    store: each swap-out goes to the local store and to every one of
    ``stores``. An unused prefetched page is the first to go again, and
    is only dropped (its copies are still there). What the pager did is
    kept as hcache GhostEvents for the paging miss-ratio curve: the pages
    copied out are the evictions, and the reads
    are the faults and the first use of each prefetched page (a prefetch
    saves a fault, not a miss of the resident memory, so the curve stays
    the VM's demand curve). References to pages beyond the VM's memory
    (a guest reading its storage) are not memory accesses: left out.

    With ``sampling_settings`` (simulated_sampling.Settings) it samples
    the VM's accesses as memcanal-pager does (simulated_sampling.Sampler,
    which ``run`` then needs each reference's write flag and time for),
    and the detector learns from those samples alone, as on a real host:
    each sampling interval, as it closes, feeds it through a
    sampling.ColdPageFeed, which also keeps pages in doubt out of the
    cold ones. ``take_samples`` gives what the agent gets.
    """

    def __init__(self, pages, interval_seconds, scans=4, pool_pages=0,
                 uuid=None, sampling_settings=None):
        self.pages = int(pages)
        self.uuid = uuid
        self.pool_pages = int(pool_pages)
        self.scans = int(scans)
        self.scan_seconds = interval_seconds / self.scans
        self.detector = coldpages.ColdPageDetector(self.pages,
                                                   self.scan_seconds)
        self.resident = np.ones(self.pages, bool)
        self.resident_pages = self.pages
        self.target_pages = None
        self.stores = ()
        self._scans_done = 0
        # The pager's LRU clock: references so far, the last use of each
        # page, and the clock when the current scan began.
        self._references = 0
        self._last_use = np.full(self.pages, -1, np.int64)
        self._scan_start = 0
        # Pages a prefetch brought back that were not used since.
        self._prefetched = np.zeros(self.pages, bool)
        # Swap-out serial number of each page: the pool holds the last
        # ``pool_pages`` of them.
        self._swap_serial = np.full(self.pages, -1, np.int64)
        self._swap_outs = 0
        self._blocks, self._reads = [], []
        self._faults, self._fault_seconds = 0, 0.0
        # The detector's time of the current scan.
        self._now = 0.0
        self.sampler = self.feed = None
        if sampling_settings is not None:
            self.sampler = simulated_sampling.Sampler(
                self.pages, sampling_settings, self._learn)
            self.feed = sampling.ColdPageFeed(
                self.detector, sampling_settings.rate, sampling_settings.salt)

    @property
    def paged(self):
        return self.target_pages is not None

    def resize(self, target_bytes, stores):
        """Keep ``target_bytes`` of the VM resident, paging out to the
        local store and ``stores``; the seconds it takes. A target of the
        whole VM pages everything back in and ends paging."""
        try:
            kinds = [store_kind(spec) for spec in stores]
        except ValueError as error:
            raise exception.ResizeFailed(uuid=self.uuid, reason=str(error))
        target = min(self.pages, _pages(target_bytes))
        self.stores = tuple(stores)
        self.target_pages = target if target < self.pages else None
        rate = min(STORE_SWAP_OUT_BYTES_PER_SECOND[kind]
                   for kind in [LOCAL_STORE] + kinds)
        out = self._swap_out(self.resident_pages - target)
        return (out * estimation.PAGE_SIZE / rate
                + self._swap_in(target - self.resident_pages))

    def _swap_out(self, count):
        """Swap the ``count`` coldest resident pages out; how many had to
        be copied."""
        if count <= 0:
            return 0
        cold = (self.detector if self.feed is None else self.feed).cold()
        cold = cold[self._last_use[cold] < self._scan_start][:count]
        rest = np.flatnonzero(self.resident)
        rest = rest[np.isin(rest, cold, invert=True)]
        needed = count - cold.size
        if needed < rest.size:
            rest = rest[np.argpartition(self._last_use[rest], needed)[
                :needed]]
        rest = rest[np.argsort(self._last_use[rest], kind='stable')]
        victims = np.concatenate([cold, rest])
        self.resident[victims] = False
        self.resident_pages -= victims.size
        self.detector.swapped_out(victims)
        if self.sampler is not None:
            self.sampler.swapped_out(victims)
        # A prefetched page never used still has its copies: it is only
        # dropped, and stays where it was in the list of evicted pages,
        # as it would without the prefetch.
        written = victims[~self._prefetched[victims]]
        self._prefetched[victims] = False
        self._swap_serial[written] = self._swap_outs + np.arange(
            written.size)
        self._swap_outs += written.size
        self._event(written, False)
        return written.size

    def _swap_in(self, count):
        """Bring the ``count`` latest swapped-out pages back without a
        fault; the seconds."""
        if count <= 0:
            return 0.0
        out = np.flatnonzero(~self.resident)
        latest = out[np.argsort(-self._swap_serial[out], kind='stable')[
            :count]]
        seconds = self._fetch_seconds(latest)
        self._bring_in(latest)
        self.detector.fetched(latest)
        if self.sampler is not None:
            self.sampler.fetched(latest)
        return seconds

    def _bring_in(self, pages):
        self.resident[pages] = True
        self.resident_pages += pages.size

    def _fetch_seconds(self, pages):
        """What bringing ``pages`` back costs: from the pool, or else
        from the fastest store."""
        pooled = int(np.count_nonzero(
            self._swap_serial[pages] >= self._swap_outs - self.pool_pages))
        store = min(STORE_FAULT_SECONDS[kind] for kind in [LOCAL_STORE] + [
            store_kind(spec) for spec in self.stores])
        return pooled * POOL_FAULT_SECONDS + (pages.size - pooled) * store

    def _event(self, pages, read):
        self._blocks.append(np.asarray(pages, np.int64))
        self._reads.append(np.full(len(pages), read))

    def run(self, pages, writes=None, times_ns=None):
        """One interval's references, in order (with a sampler, whether
        each writes and its time in ns); how many were memory accesses."""
        pages = np.asarray(pages, np.int64)
        inside = pages < self.pages
        pages = pages[inside]
        columns = [pages]
        if self.sampler is not None:
            columns += [np.asarray(writes, bool)[inside],
                        np.asarray(times_ns, np.int64)[inside]]
        for scan in zip(*(np.array_split(column, self.scans)
                          for column in columns)):
            self._scans_done += 1
            self._scan(scan, self._scans_done * self.scan_seconds)
        return int(pages.size)

    def _scan(self, references, now):
        """One scan period's references: (pages) or, with a sampler,
        (pages, writes, times)."""
        pages = references[0]
        self._now = now
        self._scan_start = self._references
        done = 0
        while done < pages.size:
            stop = self._fault_in(pages, done, now) if self.paged else (
                pages.size)
            if self.sampler is not None:
                self.sampler.access(*(column[done:stop]
                                      for column in references))
            self._use(pages[done:stop])
            done = stop
            if self.paged and stop < pages.size:
                self._swap_out(self.resident_pages - self.target_pages)
        if self.sampler is None:
            self.detector.observe(pages, now)
        if self.paged:
            self._scan_start = self._references
            self._swap_out(self.resident_pages - self.target_pages)

    def _use(self, pages):
        # The last reference of each page wins.
        self._last_use[pages] = self._references + np.arange(pages.size)
        self._references += pages.size

    def _fault_in(self, pages, start, now):
        """Fault in the pages referenced from ``start`` on until a batch
        is over the target; where the faults stopped."""
        batch = max(1, min(SWAP_BATCH_PAGES, self.target_pages // 256))
        distinct, first = np.unique(pages[start:], return_index=True)
        missing = ~self.resident[distinct] | self._prefetched[distinct]
        for index in np.sort(first[missing]).tolist():
            page = int(pages[start + index])
            self._event([page], True)
            if self._prefetched[page]:
                self._prefetched[page] = False
                continue
            self._faults += 1
            prefetched = self.detector.fault(page, now)
            if self.sampler is not None:
                self.sampler.fetched(prefetched)
            self._fault_seconds += self._fetch_seconds(
                np.concatenate([[page], prefetched]))
            self._bring_in(np.concatenate([[page], prefetched]))
            # Unused, a prefetched page is the first to go again.
            self._prefetched[prefetched] = True
            self._last_use[prefetched] = -1
            if self.resident_pages - self.target_pages >= batch:
                return start + index + 1
        return pages.size

    def _learn(self, interval):
        """A sampling interval closed: what the detector learns of it;
        a new sample zapped from the next one on."""
        self.feed.add_interval(interval.touched, interval.full, self._now)
        settings = self.sampler.settings
        if (interval.rate, interval.salt) != (settings.rate, settings.salt):
            self.feed.resample(settings.rate, settings.salt)

    def take_samples(self, until_ns):
        """The sampling intervals that ended by ``until_ns`` (VM time)
        since the last call, driver.AccessIntervals oldest first; None
        without a sampler."""
        if self.sampler is None:
            return None
        self.sampler.advance(until_ns)
        return self.sampler.take()

    def take_events(self):
        """The GhostEvents (blocks, reads) since the last call, the faults
        and the seconds they took, then starts afresh."""
        blocks = (np.concatenate(self._blocks) if self._blocks
                  else np.zeros(0, np.int64))
        reads = (np.concatenate(self._reads) if self._reads
                 else np.zeros(0, bool))
        taken = blocks, reads, self._faults, self._fault_seconds
        self._blocks, self._reads = [], []
        self._faults, self._fault_seconds = 0, 0.0
        return taken
