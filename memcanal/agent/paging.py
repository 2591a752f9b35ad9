"""Paging a VM's cold memory out through memcanal-pager (issue #17).

The agent's half of TMemCanal's remote paging: ``PagerClient`` runs one
memcanal-pager daemon (hypervisor-patches/pager) for one QEMU guest and
speaks its stdin protocol, one command a line, one JSON line answered;
``GuestPager`` decides which pages go out. It feeds the VM's accessed
pages of each interval to memcanal.estimation.coldpages.ColdPageDetector
(TMemCanal's modified MQ), swaps out the detector's cold pages until the
memory the agent was asked to leave resident is all that is, turns every
fault into the detector's LRU-Zone prefetch, and records the swap-outs
and faults as a paging trace for mrc.ghost_curve.

Page numbers: the pager counts memfd pages from the mapping's offset, the
detector and PRL count guest-physical frames. On q35 the two are the same
below 4 GiB (RAM above it is mapped after the PCI hole, so frames there
would need the low/high split translated): guests of more than 2 GiB
(q35's low RAM) are refused here rather than paged wrongly.
"""

import json
import os
import queue
import subprocess
import threading
import time
import uuid

import numpy as np
from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.estimation import coldpages
from memcanal import exception

LOG = logging.getLogger(__name__)
PAGE = 4096
# q35 maps at most 2 GiB of RAM below 4 GiB (lowmem), the rest above it.
IDENTITY_LIMIT = 2 ** 31
STDERR_TAIL = 2000


class PagerError(exception.MemcanalException):
    msg_fmt = 'memcanal-pager %(name)s: %(reason)s'


class UnsupportedCommand(PagerError):
    """The pager answered a command with an error: this build lacks it."""


def owner_of(instance_uuid):
    """The VM's key in memory servers and the host's pool: pagers of
    every VM of the cloud may share one server, so it comes from the
    VM's uuid (its first 63 bits), not from the host."""
    return int(uuid.UUID(instance_uuid).hex[:16], 16) >> 1


class PagerClient:
    """One memcanal-pager daemon: started with its stores, driven by its
    line protocol, its death turned into PagerError with its stderr."""

    def __init__(self, binary, socket, stores, pool_mb=0, log_path=None,
                 timeout=120.0, owner=1, pool_path=None):
        self.name = os.path.basename(socket)
        self.stores = list(stores)
        self.timeout = timeout
        self.log_path = log_path or socket + '.log'
        command = [binary, '--socket', socket, '--owner', str(owner)]
        for store in self.stores:
            command += ['--store', store]
        if pool_mb:
            command += ['--pool-mb', str(pool_mb)]
            if pool_path:
                command += ['--pool', pool_path]
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, text=True, bufsize=1)
        self._lines = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()
        self.attached = None
        self.wait_event('listening')

    def _pump(self):
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _died(self, doing):
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            code = 'still running'
        with open(self.log_path, errors='replace') as log:
            tail = log.read()[-STDERR_TAIL:].strip()
        return PagerError(name=self.name, reason='died (exit %s) %s: %s' % (
            code, doing, tail or 'nothing on stderr'))

    def _next(self, doing, timeout):
        """The next JSON line, or PagerError if the pager ended or said
        nothing in time."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise PagerError(name=self.name, reason='no answer %s in %.0fs'
                             % (doing, timeout))
        if line is None:
            self._lines.put(None)          # every later call fails too
            raise self._died(doing)
        try:
            return json.loads(line)
        except ValueError:
            raise PagerError(name=self.name, reason='said %r %s' % (
                line.strip(), doing))

    def wait_event(self, name, timeout=None):
        """Skip to the pager's ``name`` event (listening, attached)."""
        while True:
            answer = self._next('waiting for %s' % name,
                                timeout or self.timeout)
            if answer.get('event') == name:
                if name == 'attached':
                    self.attached = answer
                return answer

    def commands(self, lines):
        """Send ``lines`` at once and return their answers in order: the
        pager reads the next command while the previous answer travels."""
        if not lines:
            return []
        with self._lock:
            try:
                self.process.stdin.write(''.join(line + '\n'
                                                 for line in lines))
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise self._died('on %r' % lines[0])
            # Every answer is read, errors too, so none is left to be
            # taken for the answer to a later command.
            answers = [self._answer(line) for line in lines]
        for line, answer in zip(lines, answers):
            if answer.get('event') == 'error':
                raise UnsupportedCommand(name=self.name, reason='%r: %s' % (
                    line, answer.get('line', answer)))
        return answers

    def command(self, line):
        return self.commands([line])[0]

    def _answer(self, line):
        verb = line.split()[0]
        while True:
            answer = self._next('to %r' % line, self.timeout)
            if answer.get('event') in (None, verb, 'error'):
                return answer
            LOG.debug('memcanal-pager %s: %s', self.name, answer)

    def stop(self, timeout=30):
        """End of input: the pager serves faults until its guest exits,
        then exits itself (stop the guest first)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def runs(pages):
    """Sorted pages as [(first, count)] of consecutive runs."""
    pages = np.unique(np.asarray(pages, dtype=np.int64))
    if not pages.size:
        return []
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    firsts = pages[np.r_[0, breaks]]
    counts = np.diff(np.r_[0, breaks, pages.size])
    return list(zip(firsts.tolist(), counts.tolist()))


def memfd_of(pid):
    """A descriptor of QEMU ``pid``'s guest-RAM memfd (the largest), to
    see which of its pages are resident."""
    best, size = None, -1
    fd_dir = '/proc/%d/fd' % pid
    for name in os.listdir(fd_dir):
        path = os.path.join(fd_dir, name)
        try:
            if not os.readlink(path).startswith('/memfd:'):
                continue
            length = os.stat(path).st_size
        except OSError:
            continue
        if length > size:
            best, size = path, length
    if best is None:
        raise PagerError(name=str(pid), reason='QEMU has no memfd')
    return os.open(best, os.O_RDONLY | os.O_CLOEXEC)


def resident_mask(fd, pages):
    """Which of the memfd's first ``pages`` pages hold data (SEEK_DATA /
    SEEK_HOLE): what swapping out would free."""
    mask = np.zeros(pages, bool)
    end, offset = pages * PAGE, 0
    while offset < end:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:                    # ENXIO: no data after offset
            break
        stop = min(os.lseek(fd, start, os.SEEK_HOLE), end)
        mask[start // PAGE:-(-stop // PAGE)] = True
        offset = stop
    return mask


class GuestPager:
    """The paging of one VM: its cold-page detector and its pager.

    ``interval`` is called once per collection with the pages the VM
    accessed (PRL pages; None where nothing logs them, and then the
    pager's faults and cancelled swap-outs are the only accesses seen);
    ``set_resident`` pages out or in. Times come from ``clock``.
    """

    def __init__(self, client, memfd, pages, scan_period, cold_after=None,
                 clock=time.monotonic):
        if pages * PAGE > IDENTITY_LIMIT:
            raise PagerError(name=client.name, reason=(
                'a guest of more than 2 GiB has RAM above 4 GiB, whose '
                'frames are not memfd pages'))
        self.client = client
        self.memfd = memfd
        self.pages = pages
        self.clock = clock
        self.detector = coldpages.ColdPageDetector(
            pages, scan_period, expire_ii=cold_after, now=clock())
        self.paging = False
        self.faults = 0
        self.swapped_out = 0
        self._events = []              # (pages, reads) since last interval
        self._faults_supported = True
        self._swapin_supported = True

    def resident(self):
        return resident_mask(self.memfd, self.pages)

    def resident_bytes(self):
        return int(np.count_nonzero(self.resident())) * PAGE

    def paged_bytes(self):
        stats = self.client.command('stats')
        return int(stats.get('out_pages', stats.get('pages_out', 0))) * PAGE

    # -- each interval -----------------------------------------------------

    def interval(self, accessed=None, accesses=0):
        """Feed the interval's accesses and the pager's faults to the
        detector; the interval's paging trace (None until paged)."""
        now = self.clock()
        faulted, cancelled = self._take_faults()
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
        return self._trace(accesses)

    def _take_faults(self):
        empty = np.empty(0, np.int64)
        if not (self.paging and self._faults_supported):
            return empty, empty
        try:
            answer = self.client.command('faults')
        except UnsupportedCommand:
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
        ``target_bytes`` stay resident (or swap recent ones in up to it);
        the resident bytes before. Stops early when no page is cold."""
        resident = self.resident()
        previous = int(np.count_nonzero(resident)) * PAGE
        self.paging = True
        excess = (previous - int(target_bytes)) // PAGE
        while excess > 0:
            cold = self.detector.cold()
            cold = cold[resident[cold]][:excess]
            if not cold.size:
                LOG.info('memcanal-pager %s: no more cold pages, %d pages '
                         'above the target stay', self.client.name, excess)
                break
            dropped = self._swap_out(cold)
            excess -= dropped
            resident[cold] = False
        if excess < 0:
            self._swap_in(-excess)
        return previous

    def _swap_out(self, pages):
        answers = self.client.commands(
            ['swapout %d %d' % run for run in runs(pages)])
        self.detector.swapped_out(pages)
        self._events.append((np.sort(pages), False))
        dropped = sum(answer.get('dropped', 0) for answer in answers)
        self.swapped_out += dropped
        return dropped

    def _swap_in(self, count):
        self._prefetch(self.detector.prefetch(count))

    def _prefetch(self, pages):
        """Bring ``pages`` in without a fault (LRU-Zone prefetch)."""
        if not (len(pages) and self._swapin_supported):
            return
        try:
            self.client.commands(['swapin %d %d' % run for run in runs(pages)])
        except UnsupportedCommand:
            LOG.warning('memcanal-pager %s has no swapin command: pages '
                        'come back by faults only', self.client.name)
            self._swapin_supported = False
            return
        self.detector.fetched(pages)

    def stop(self):
        self.client.stop()
        os.close(self.memfd)
