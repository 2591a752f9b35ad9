"""Which of a guest's pages go out, from what its pager sees (issues #17, #24).

The agent's half of TMemCanal's remote paging: a ``GuestPager`` decides
which pages of one VM its memcanal-pager (memcanal.agent.pager_client)
swaps out. It feeds the pages the VM accessed to
memcanal.estimation.coldpages.ColdPageDetector (TMemCanal's modified MQ):
each of the pager's completed sampling intervals (every page whose access
it caught: the hashed sample, and every page after a full pass, which is
what makes per-page coldness real), memtrace's PRL pages where a TCG
guest has them, and the pager's faults, each a TMemCanal LRU-Zone
prefetch. It swaps out the detector's cold pages until what the agent
was asked to leave resident is all that is, and records swap-outs and
faults as a paging trace for mrc.ghost_curve.

Page numbers are the pager's page indexes (spec): region 0's pages, then
region 1's, ..., a region being one memory backend (a NUMA cell) of any
size. Guest-physical frames (memtrace's) differ from them above q35's
low RAM: ``frame_indexes`` and ``guest_frames`` translate.
"""

import os
import time

import numpy as np
from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.agent import pager_client
from memcanal.estimation import coldpages
from memcanal.estimation import sampling
from memcanal import owners

LOG = logging.getLogger(__name__)
PAGE = 4096
FOUR_GIB_FRAME = (4 << 30) // PAGE
# q35 keeps RAM below 4 GiB up to 2.75 GiB; from there on, 2 GiB below
# it and the rest above (QEMU's pc_q35_init).
Q35_ALL_LOW = 0xb0000000
# The pager reads commands into a 4096-byte buffer (daemon.h's
# LINE_MAX_LEN), newline included.
LINE_LIMIT = 4000


# The VM's owner id (memcanal.owners: one VM's alone, as the service
# keeps it).
owner_of = owners.owner_of


def runs(pages):
    """Sorted pages as [(first, count)] of consecutive runs."""
    pages = np.unique(np.asarray(pages, dtype=np.int64))
    if not pages.size:
        return []
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    firsts = pages[np.r_[0, breaks]]
    counts = np.diff(np.r_[0, breaks, pages.size])
    return list(zip(firsts.tolist(), counts.tolist()))


def expand(flat_runs):
    """The pages of ``[first, count, first, count, ...]`` (the pager's
    runs), in order."""
    pairs = np.asarray(flat_runs, dtype=np.int64).reshape(-1, 2)
    firsts, counts = pairs[:, 0], pairs[:, 1]
    if not counts.sum():
        return np.empty(0, np.int64)
    # Each page is its run's first plus its rank within the run.
    starts = np.repeat(firsts - (np.cumsum(counts) - counts), counts)
    return starts + np.arange(counts.sum())


def swapoutv_lines(page_runs, limit=LINE_LIMIT):
    """``swapoutv`` commands for ``page_runs`` [(first, count)], each
    line shorter than ``limit`` characters (the pager's line buffer)."""
    lines, words, length = [], [], len('swapoutv')
    for first, count in page_runs:
        word = '%d %d' % (first, count)
        if words and length + 1 + len(word) >= limit:
            lines.append(' '.join(['swapoutv'] + words))
            words, length = [], len('swapoutv')
        words.append(word)
        length += 1 + len(word)
    if words:
        lines.append(' '.join(['swapoutv'] + words))
    return lines


def _low_pages(ram_bytes):
    return (2 << 30 if ram_bytes >= Q35_ALL_LOW else ram_bytes) // PAGE


def guest_frames(indexes, ram_bytes):
    """Guest-physical frames of the page indexes of a q35 guest of
    ``ram_bytes`` in one region: the low RAM is mapped from frame 0, the
    rest from 4 GiB up."""
    indexes = np.asarray(indexes, dtype=np.int64)
    low = _low_pages(ram_bytes)
    return np.where(indexes < low, indexes, indexes - low + FOUR_GIB_FRAME)


def frame_indexes(frames, ram_bytes):
    """The page indexes of guest-physical ``frames`` (guest_frames'
    inverse); frames that are not RAM (the PCI hole, beyond) are left
    out."""
    frames = np.asarray(frames, dtype=np.int64)
    low = _low_pages(ram_bytes)
    indexes = np.where(frames < low, frames, frames - FOUR_GIB_FRAME + low)
    ram = (frames < low) | ((frames >= FOUR_GIB_FRAME)
                            & (indexes < ram_bytes // PAGE))
    return indexes[ram & (frames >= 0)]


def resident_mask(fd, pages, first=0):
    """Which of the memfd's pages ``first``..``first + pages - 1`` hold
    data (SEEK_DATA / SEEK_HOLE): what swapping out would free."""
    mask = np.zeros(pages, bool)
    offset, end = first * PAGE, (first + pages) * PAGE
    while offset < end:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:                    # ENXIO: no data after offset
            break
        if start >= end:
            break
        stop = min(os.lseek(fd, start, os.SEEK_HOLE), end)
        mask[start // PAGE - first:-(-stop // PAGE) - first] = True
        offset = stop
    return mask


def region_memfds(pid, regions):
    """A read-only descriptor of the memfd of each of QEMU ``pid``'s RAM
    ``regions`` [(base, length, offset)], found by the inode its mapping
    at ``base`` shows, to see which pages are resident."""
    inodes = {}
    with open('/proc/%d/maps' % pid) as maps:
        for line in maps:
            fields = line.split()
            start = int(fields[0].split('-')[0], 16)
            inodes[start] = int(fields[4])
    by_inode = {}
    fd_dir = '/proc/%d/fd' % pid
    for name in os.listdir(fd_dir):
        path = os.path.join(fd_dir, name)
        try:
            by_inode.setdefault(os.stat(path).st_ino, path)
        except OSError:
            continue
    fds = []
    try:
        for base, _, _ in regions:
            path = by_inode.get(inodes.get(base))
            if path is None:
                raise pager_client.PagerError(name=str(pid), reason=(
                    'QEMU has no memfd mapped at %#x' % base))
            fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def access_interval(answer):
    """A driver.AccessInterval from one of the ``intervals`` of a
    ``samples`` answer, and when it ended (seconds, CLOCK_MONOTONIC)."""
    return driver.AccessInterval(
        touched=expand(answer['touched']), written=expand(answer['written']),
        full=bool(answer['full']),
        seconds=(answer['end_ns'] - answer['start_ns']) / 1e9,
        rate=answer.get('rate'), salt=answer.get('salt')), \
        answer['end_ns'] / 1e9


class GuestPager:
    """The paging and sampling of one VM: its pager and its cold-page
    detector.

    ``interval`` is called once per collection, with the pages memtrace
    saw accessed if it traces the guest; ``set_resident`` pages out or
    in. ``regions`` [(base, length, offset)] are the guest's RAM as the
    pager numbers it, ``memfds`` their memfds. ``paged``: the pager may
    hold pages out already (an earlier agent, or a pager that died,
    paged the guest), which are then every page not resident. Times
    come from ``clock`` (the pager's are CLOCK_MONOTONIC, as
    time.monotonic).
    """

    def __init__(self, client, memfds, regions, scan_period, cold_after=None,
                 clock=time.monotonic, paged=False):
        self.client = client
        self.memfds = list(memfds)
        self.regions = [tuple(region) for region in regions]
        self.pages = sum(length for _, length, _ in self.regions) // PAGE
        self.clock = clock
        self.detector = coldpages.ColdPageDetector(
            self.pages, scan_period, expire_ii=cold_after, now=clock())
        self.paging = paged
        if paged:
            self.detector.swapped_out(np.flatnonzero(~self.resident()))
        # The sampled intervals' feed, once the pager said how it samples.
        self.feed = None
        self.faults = 0
        # The pager's last answer to ``stats`` (paged_bytes).
        self.last_stats = {}
        self.swapped_out = 0
        self._events = []              # (pages, reads) since last interval
        self._faults_supported = True
        self._swapin_supported = True
        self._swapoutv_supported = True
        self._samples_supported = True
        self._resample_supported = True
        # The sample the feed follows, (rate, salt).
        self._sample = None

    def resident(self):
        return np.concatenate([
            resident_mask(fd, length // PAGE, offset // PAGE)
            for fd, (_, length, offset) in zip(self.memfds, self.regions)])

    def resident_bytes(self):
        return int(np.count_nonzero(self.resident())) * PAGE

    def paged_bytes(self):
        stats = self.client.command('stats')
        self.last_stats = stats
        return int(stats.get('out_pages', stats.get('pages_out', 0))) * PAGE

    def fault_latency(self):
        """The latency quantiles of the pager's recent faults, as its
        last ``stats`` said (read by paged_bytes), in seconds:
        {'paging_fault_p50_seconds': .., 'paging_fault_p99_seconds': ..};
        empty before it has timed a fault."""
        stats = self.last_stats
        if not stats.get('fault_samples'):
            return {}
        return {'paging_fault_p%s_seconds' % quantile:
                float(stats['fault_p%s_us' % quantile]) / 1e6
                for quantile in ('50', '99')}

    def unauthentic(self):
        """Faults the pager refused as its last ``stats`` said (read by
        paged_bytes): pages whose every copy that came back failed
        authentication (issue 36). The guest waits at such a page rather
        than read zeros, so the VM has failed: {'paging_unauthentic_pages':
        n, 'paging_unauthentic_page': the last page} once there is one,
        else empty."""
        stats = self.last_stats
        if not stats.get('unauthentic'):
            return {}
        return {'paging_unauthentic_pages': float(stats['unauthentic']),
                'paging_unauthentic_page': float(stats['unauthentic_page'])}

    # -- each interval -----------------------------------------------------

    def interval(self, accessed=None, accesses=0):
        """Feed the pager's sampling intervals, ``accessed`` (memtrace's
        page indexes, None: no memtrace) and the pager's faults to the
        detector. Returns what the pager's sampling saw (a
        driver.AccessSamples; None where it does not sample) and the
        interval's paging trace (None until paged)."""
        now = self.clock()
        samples, ends = self._take_samples()
        faulted, cancelled = self._take_faults()
        for sampled, end in zip(samples.intervals if samples else (), ends):
            self._follow_sample(sampled)
            self.feed.add_interval(sampled.touched, sampled.full,
                                   min(max(end, self.detector.now), now))
        # In fault order (each moves its zone to the LRU head), then one
        # batch of swapins: a fault's neighbours are no longer remote
        # for the next.
        neighbours = [self.detector.fault(page, now) for page in faulted]
        if neighbours:
            self._prefetch(np.concatenate(neighbours))
        seen = np.asarray(cancelled, dtype=np.int64)
        if accessed is not None:
            seen = np.union1d(seen, np.asarray(accessed, dtype=np.int64))
        seen = np.setdiff1d(seen, faulted)   # a fault already counted them
        self.detector.observe(seen[(seen >= 0) & (seen < self.pages)], now)
        if faulted.size:
            self._events.append((faulted, True))
        return samples, self._trace(accesses)

    def _follow_sample(self, interval):
        """The feed takes the sample of ``interval``, if another."""
        sample = (interval.rate, interval.salt)
        if None not in sample and sample != self._sample:
            self.feed.resample(*sample)
            self._sample = sample

    def resample(self, rate, salt):
        """Have the pager zap the sample of ``rate`` and ``salt`` from its
        next interval on; False if it cannot (a pager before it)."""
        if not self._resample_supported:
            return False
        try:
            self.client.command('resample %r %d' % (float(rate), int(salt)))
        except pager_client.UnsupportedCommand:
            LOG.warning('memcanal-pager %s cannot change its sample (no '
                        'resample command): its rate stays',
                        self.client.name)
            self._resample_supported = False
            return False
        return True

    def cold(self):
        """The swap-out candidates, oldest in the out queue first: the
        detector's cold pages, less, where the pager samples, those whose
        use since the last full pass is unknown."""
        if self.feed is None:
            return self.detector.cold()
        return self.feed.cold()

    def _take_samples(self):
        """The pager's intervals since the last call, and their ends."""
        if not self._samples_supported:
            return None, ()
        try:
            answer = self.client.command('samples')
        except pager_client.UnsupportedCommand:
            LOG.warning('memcanal-pager %s does not sample (no samples '
                        'command)', self.client.name)
            self._samples_supported = False
            return None, ()
        if not answer.get('sampling'):
            return None, ()
        if answer.get('overflow'):
            LOG.warning('memcanal-pager %s: %d sampling intervals were '
                        'dropped before the agent took them',
                        self.client.name, answer['overflow'])
        rate, salt = float(answer['rate']), int(answer['salt'])
        pairs = [access_interval(interval)
                 for interval in answer.get('intervals', ())]
        if self.feed is None:
            # The sample of the oldest interval, which the feed follows.
            first = pairs[0][0] if pairs else None
            self._sample = ((first.rate, first.salt)
                            if first is not None and first.rate is not None
                            else (rate, salt))
            self.feed = sampling.ColdPageFeed(self.detector, *self._sample)
        return (driver.AccessSamples(tuple(pair[0] for pair in pairs), rate,
                                     salt), [pair[1] for pair in pairs])

    def _take_faults(self):
        empty = np.empty(0, np.int64)
        if not (self.paging and self._faults_supported):
            return empty, empty
        try:
            answer = self.client.command('faults')
        except pager_client.UnsupportedCommand:
            LOG.warning('memcanal-pager %s has no faults command: no '
                        'prefetch, and faults are not in the paging trace',
                        self.client.name)
            self._faults_supported = False
            return empty, empty
        if answer.get('overflow'):
            LOG.warning('memcanal-pager %s: %d faults overflowed its ring',
                        self.client.name, answer['overflow'])
        faulted = np.asarray(answer.get('faults', []), dtype=np.int64)
        faulted = faulted[(faulted >= 0) & (faulted < self.pages)]
        self.faults += faulted.size
        return faulted, answer.get('cancelled', [])

    def _trace(self, accesses):
        if not self.paging:
            return None
        events, self._events = self._events, []
        blocks = np.concatenate([pages for pages, _ in events] or
                                [np.empty(0, np.int64)])
        reads = np.concatenate([np.full(pages.size, read)
                                for pages, read in events] or
                               [np.empty(0, bool)])
        return driver.CacheTrace(
            blocks=blocks, reads=reads,
            direct_pages=self.resident_bytes() // PAGE,
            accesses=max(int(accesses), int(np.count_nonzero(reads))))

    # -- resizing ----------------------------------------------------------

    def set_resident(self, target_bytes):
        """Swap the coldest resident pages out until at most
        ``target_bytes`` stay resident (or swap recent ones in up to it;
        the whole VM as the target: every page out); the resident bytes
        before. Stops early when no page is cold."""
        # What has turned cold since the last interval, too.
        self.detector.observe([], self.clock())
        resident = self.resident()
        previous = int(np.count_nonzero(resident)) * PAGE
        self.paging = True
        excess = (previous - int(target_bytes)) // PAGE
        while excess > 0:
            cold = self.cold()
            cold = cold[resident[cold]][:excess]
            if not cold.size:
                LOG.info('memcanal-pager %s: no more cold pages, %d pages '
                         'above the target stay', self.client.name, excess)
                break
            dropped = self._swap_out(cold)
            excess -= dropped
            resident[cold] = False
        if excess < 0 and target_bytes >= self.pages * PAGE:
            # What the detector takes for remote is not exact (a page
            # seen accessed in an interval that ended after its swap-out
            # is not remote to it): the pager knows, and skips pages it
            # does not hold out.
            self.swap_in_all()
        elif excess < 0:
            self._swap_in(-excess)
        return previous

    def _swap_out(self, pages):
        answers = self._swap_out_runs(runs(pages))
        self.detector.swapped_out(pages)
        self._events.append((np.sort(pages), False))
        dropped = sum(answer.get('dropped', 0) for answer in answers)
        self.swapped_out += dropped
        return dropped

    def _swap_out_runs(self, page_runs):
        """The pager's answers to swapping ``page_runs`` out: as few
        ``swapoutv`` lines as its line limit allows (one swap-out each,
        its batches spanning runs: a cold set in thousands of short runs
        goes out as fast as one long run), or one ``swapout`` a run from
        a pager without ``swapoutv`` (an older build)."""
        if self._swapoutv_supported:
            try:
                return self.client.commands(swapoutv_lines(page_runs))
            except pager_client.UnsupportedCommand:
                LOG.info('memcanal-pager %s has no swapoutv command: one '
                         'swapout a run', self.client.name)
                self._swapoutv_supported = False
        return self.client.commands(
            ['swapout %d %d' % run for run in page_runs])

    def _swap_in(self, count):
        self._prefetch(self.detector.prefetch(count))

    def swap_in_all(self):
        """Bring every page the pager holds out back in, without a
        fault (one ``swapin`` of the whole VM: the pager knows which are
        out); the pages it fetched."""
        return self._prefetch(np.arange(self.pages))

    def _prefetch(self, pages):
        """Bring ``pages`` in without a fault (LRU-Zone prefetch); the
        pages the pager fetched (those it held out)."""
        if not (len(pages) and self._swapin_supported):
            return 0
        try:
            answers = self.client.commands(
                ['swapin %d %d' % run for run in runs(pages)])
        except pager_client.UnsupportedCommand:
            LOG.warning('memcanal-pager %s has no swapin command: pages '
                        'come back by faults only', self.client.name)
            self._swapin_supported = False
            return 0
        self.detector.fetched(pages)
        return sum(answer.get('fetched', 0) for answer in answers)

    def close(self):
        """Let go of the pager (it serves its guest on) and the memfds."""
        self.client.close()
        for fd in self.memfds:
            os.close(fd)
        self.memfds = []
