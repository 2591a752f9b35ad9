"""One memcanal-logdirty process per Xen domain, for as long as it runs.

``memcanal-logdirty DOMID INTERVAL 0`` turns log-dirty on for the domain
and prints one line per interval until it is signalled; SIGTERM makes it
turn log-dirty off before it exits (left on, each of the guest's first
writes to a frame per interval would keep trapping into Xen). So every
helper is ended by SIGTERM: when its domain leaves the listing, when the
driver stops, and, through the kernel's parent-death signal, when the
agent itself dies, however (an agent killed by SIGKILL cannot signal its
helpers; a helper left writing into a closed pipe would die of SIGPIPE
with log-dirty on).

Log-dirty is one per domain. A helper whose ENABLE fails (Xen answers
EINVAL on a domain already log-dirty: a live migration or ``xl save`` in
progress, or a helper some crash left without its signal) exits at once;
memcanal never turns another holder's log-dirty off, which would break a
migration. The domain is reported without a dirty log and its helper
started again after ``[xen] logdirty_retry_interval``. Helpers of this
binary left from an earlier agent of this host are signalled at start
(``end_strays``): their output went to a process that is gone, so they
cannot be adopted, only ended and replaced.
"""

import collections
import ctypes
import dataclasses
import os
import signal
import subprocess
import threading
import time

from oslo_log import log as logging

from memcanal.agent.drivers import logdirty

LOG = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# stderr lines of one helper kept for the log.
STDERR_LINES = 20


def _die_with_parent():
    """In the child, before exec: SIGTERM when the agent's thread that
    started it ends (Linux's PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclasses.dataclass(frozen=True)
class Taken:
    """What a domain's helper gave since the previous take: its
    intervals in order, the lines rejected, the frames dropped (outside
    the domain), the intervals lost to a full queue, whether it runs,
    and how many times it was started."""

    intervals: tuple
    rejected: int
    dropped: int
    overflowed: int
    running: bool
    starts: int


class Helper:
    """One domain's memcanal-logdirty and the thread reading it."""

    def __init__(self, command, limit, max_pending, popen=subprocess.Popen):
        self.limit = limit
        self._lock = threading.Lock()
        self._pending = collections.deque(maxlen=max_pending)
        self._counts = dict(rejected=0, dropped=0, overflowed=0)
        self.stderr = collections.deque(maxlen=STDERR_LINES)
        self.process = popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        self._threads = [
            threading.Thread(target=self._read, daemon=True,
                             name='logdirty-%s' % command[1]),
            threading.Thread(target=self._read_stderr, daemon=True,
                             name='logdirty-err-%s' % command[1])]
        for thread in self._threads:
            thread.start()

    def _line(self, line):
        try:
            interval = logdirty.parse_line(line, self.limit)
        except logdirty.BadLine as error:
            LOG.warning('memcanal-logdirty (pid %d) printed a line that is '
                        'not an interval: %s', self.process.pid, error)
            with self._lock:
                self._counts['rejected'] += 1
            return
        with self._lock:
            if len(self._pending) == self._pending.maxlen:
                self._counts['overflowed'] += 1
            self._pending.append(interval)
            self._counts['dropped'] += interval.dropped

    def _read(self):
        stream = self.process.stdout
        while line := stream.readline(logdirty.MAX_LINE_BYTES + 1):
            if not line.endswith(b'\n') and len(line) > \
                    logdirty.MAX_LINE_BYTES:
                # Too long: the rest of it up to its end is skipped.
                while (rest := stream.readline(logdirty.MAX_LINE_BYTES)) \
                        and not rest.endswith(b'\n'):
                    pass
            self._line(line)

    def _read_stderr(self):
        for line in self.process.stderr:
            self.stderr.append(line.decode('utf-8', 'replace').rstrip())

    @property
    def running(self):
        return self.process.poll() is None

    def take(self):
        """(intervals, counts) since the previous take."""
        with self._lock:
            intervals = tuple(self._pending)
            self._pending.clear()
            counts, self._counts = self._counts, dict.fromkeys(
                self._counts, 0)
        return intervals, counts

    def stop(self, timeout):
        """SIGTERM, so that it turns log-dirty off; SIGKILL (with an
        error: log-dirty stays on) if it has not exited by ``timeout``."""
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                LOG.error('memcanal-logdirty (pid %d) did not exit on '
                          'SIGTERM within %.0fs; killed: log-dirty may be '
                          'left on for its domain', self.process.pid,
                          timeout)
                self.process.kill()
                self.process.wait()
        for thread in self._threads:
            thread.join(timeout)


@dataclasses.dataclass
class _Domain:
    domid: int
    limit: int
    helper: Helper | None = None
    starts: int = 0
    retry_at: float = 0.0


class LogDirtyHelpers:
    """The helpers of every listed domain, by uuid.

    ``options`` is the [xen] group: logdirty_binary, logdirty_interval,
    logdirty_retry_interval, logdirty_stop_timeout.
    """

    def __init__(self, options, report_interval, popen=subprocess.Popen,
                 clock=time.monotonic):
        self.options = options
        self._popen = popen
        self._clock = clock
        # Intervals kept between two collections: two reports' worth.
        self._max_pending = max(4, 2 * int(
            report_interval / options.logdirty_interval + 1))
        self._domains = {}
        self._lock = threading.Lock()

    def _command(self, domid):
        return [self.options.logdirty_binary, str(domid),
                '%g' % self.options.logdirty_interval, '0']

    def _start(self, uuid, domain):
        domain.starts += 1
        try:
            domain.helper = Helper(self._command(domain.domid), domain.limit,
                                   self._max_pending, self._popen)
        except OSError as error:
            LOG.error('Cannot start %s for domain %d (%s): %s',
                      self.options.logdirty_binary, domain.domid, uuid, error)
            domain.helper = None
            domain.retry_at = (self._clock()
                               + self.options.logdirty_retry_interval)
            return
        LOG.info('memcanal-logdirty (pid %d) logs domain %d (%s) every %gs',
                 domain.helper.process.pid, domain.domid, uuid,
                 self.options.logdirty_interval)

    def _ended(self, uuid, domain):
        """A helper that exited by itself: why, and when to try again. One
        that exited cleanly was signalled (log-dirty is off): at once."""
        helper = domain.helper
        delay = (self.options.logdirty_retry_interval
                 if helper.process.returncode else 0.0)
        LOG.warning('memcanal-logdirty of domain %d (%s) exited with %s: '
                    '%s; starting it again in %gs', domain.domid, uuid,
                    helper.process.returncode,
                    ' / '.join(helper.stderr) or 'nothing on stderr', delay)
        domain.retry_at = self._clock() + delay

    def refresh(self, domains):
        """Start a helper for each of ``domains`` ({uuid: (domid,
        frame limit)}) without one, end those of domains not in it."""
        with self._lock:
            for uuid in set(self._domains) - set(domains):
                self._stop(self._domains.pop(uuid))
            for uuid, (domid, limit) in domains.items():
                domain = self._domains.get(uuid)
                if domain is not None and domain.domid != domid:
                    # Rebooted or restored: a domain id is not reused
                    # for another domain while it lives.
                    self._stop(self._domains.pop(uuid))
                    domain = None
                if domain is None:
                    domain = self._domains[uuid] = _Domain(domid, limit)
                self._upkeep(uuid, domain)

    def _upkeep(self, uuid, domain):
        if domain.helper is not None and not domain.helper.running:
            self._ended(uuid, domain)
            domain.helper.stop(self.options.logdirty_stop_timeout)
            domain.helper = None
        if domain.helper is None and self._clock() >= domain.retry_at:
            self._start(uuid, domain)

    def _stop(self, domain):
        if domain.helper is not None:
            domain.helper.stop(self.options.logdirty_stop_timeout)

    def take(self, uuid):
        """The domain's Taken since the previous take; None for a domain
        never listed."""
        with self._lock:
            domain = self._domains.get(uuid)
        if domain is None:
            return None
        helper = domain.helper
        if helper is None:
            return Taken((), 0, 0, 0, False, domain.starts)
        intervals, counts = helper.take()
        return Taken(intervals, running=helper.running, starts=domain.starts,
                     **counts)

    def stop(self):
        """End every helper (each turns its domain's log-dirty off)."""
        with self._lock:
            domains, self._domains = self._domains, {}
        for domain in domains.values():
            self._stop(domain)


def _helper_pids(binary, proc):
    """Processes under ``proc`` whose command line ends ``binary DOMID
    INTERVAL 0``, as the agent runs it (a script's starts with its
    interpreter)."""
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, 'cmdline'), 'rb') as file:
                argv = file.read().split(b'\0')[:-1]
        except OSError:
            continue
        if len(argv) >= 4 and argv[-4] == os.fsencode(binary) and \
                argv[-3].isdigit() and argv[-1] == b'0':
            yield int(entry)


def end_strays(binary, timeout, proc='/proc', kill=os.kill):
    """SIGTERM helpers of ``binary`` an earlier agent left (each turns
    its domain's log-dirty off), and wait up to ``timeout`` seconds for
    them to exit, so that the new helpers' ENABLE finds log-dirty off;
    the pids signalled."""
    ended = []
    for pid in _helper_pids(binary, proc):
        try:
            kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        LOG.warning('Ending memcanal-logdirty (pid %d), which an earlier '
                    'agent left running', pid)
        ended.append(pid)
    deadline = time.monotonic() + timeout
    while any(os.path.exists(os.path.join(proc, str(pid))) for pid in ended) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return ended
