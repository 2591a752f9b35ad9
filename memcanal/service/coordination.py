"""Which memcanal-service process runs each periodic job: the holder of
the job's tooz lock for a job that must run once, and for the per-host
work, the process a hash ring over the live processes gives the host.

Several service processes share the reports' queue (doc/scaling.md), and
each runs the same periodic jobs. The optimizer and its planners,
following up sent actions, marking gone instances and retention must run
in one of them at a time: two optimizers recommend the same change and
supersede each other's, two resenders cast the same action twice, and
every extra run costs CPU for nothing. So each such job has a lock in
the ``[coordination] backend_url`` backend. At each tick a process runs
the job only while it holds the job's lock; it tries to take the lock
when it does not (without waiting), and keeps it for as long as it
lives: tooz's heartbeat thread refreshes it. When the holder dies, its
lock expires (Redis: after the URL's ``timeout``, 30 s by default) or is
freed with its connection (MySQL), and the next process whose timer
ticks takes the job over. Jobs' locks are independent, so the jobs
spread over the processes.

A holder that stalls past the lock's expiry may find another process
holding it: before each run it checks it still owns the lock (where the
backend says: Redis) and otherwise lets the job go. What two processes
could still both do in that moment is kept safe by the database: sending
an action claims it (memcanal.db.action_delivery.claim), and the
decision writers lock the hosts first (memcanal.db.decisions).

Work that is done host by host (following up a host's sent actions,
watching it go down or up) is shared out instead: every process joins
one tooz group, and a host is served by the member a consistent hash
ring over the group's live members (tooz.hashring) gives it. The ring
is rebuilt from the group's members at each tick, so when a process
dies and its membership expires (Redis: the URL's ``timeout``; file:
its ``timeout``, 10 s), its hosts go to the others at their next tick,
and when one joins it takes a share, each moving only the hosts that
change hands. For the moment two processes see different members, a
host may be served by both or neither for a tick: what they do is safe
twice (a resend is applied once by the agent's journal) or waits for
the next tick. A backend without groups (MySQL) has no ring: there the
per-host work is a job like the others, and the holder of its lock
serves every host.

Without a backend every process runs every job and serves every host,
as before: a single process, or several an operator keeps from running
the same jobs.
"""

import threading

from oslo_log import log as logging
from oslo_utils import encodeutils
import tooz
from tooz import coordination
from tooz import hashring

LOG = logging.getLogger(__name__)
LOCK_PREFIX = 'memcanal-job-'
# The tooz group every service process joins: its live members share
# the hosts.
GROUP = b'memcanal-service'
# The job whose lock's holder serves every host on a backend without
# groups.
HOSTS_JOB = 'hosts'


class JobLeases:
    """The jobs this process leads, one tooz lock each, and the hosts it
    serves."""

    def __init__(self, backend_url, member_id):
        self.backend_url = backend_url
        self.member_id = member_id
        self._coordinator = None
        self._locks = {}
        # The ring of the members last read, and what serves() last
        # logged.
        self._ring = (frozenset(), None)
        self._share = None
        # Whether the backend has groups (MySQL has not).
        self._grouped = True
        # Until start(), and after stop(), nothing connects.
        self._stopped = True
        # Timers of several jobs may tick at once in their own threads.
        self._mutex = threading.Lock()

    @classmethod
    def from_conf(cls, conf):
        return cls(conf.coordination.backend_url, conf.host)

    def start(self):
        """Connect to the backend and start its heartbeat; nothing
        without one. A backend that cannot be reached is tried again at
        the next tick of a job (the process leads nothing meanwhile)."""
        with self._mutex:
            self._stopped = False
            self._connect()

    def _connect(self):
        if not self.backend_url or self._coordinator is not None:
            return
        coordinator = coordination.get_coordinator(
            self.backend_url, encodeutils.safe_encode(self.member_id))
        try:
            coordinator.start(start_heart=True)
            self._grouped = _join(coordinator)
        except Exception:
            LOG.error('Cannot reach the coordination backend; this '
                      'process runs no coordinated job until it can',
                      exc_info=True)
            return
        self._coordinator = coordinator
        LOG.info('Coordinating periodic jobs through %s as %s',
                 coordinator.__class__.__name__, self.member_id)

    def stop(self):
        """Let every job go (another process takes them at its next
        tick) and disconnect."""
        with self._mutex:
            self._stopped = True
            coordinator, self._coordinator = self._coordinator, None
            locks, self._locks = self._locks, {}
        if coordinator is None:
            return
        for name, lock in locks.items():
            if lock.acquired:
                try:
                    lock.release()
                except Exception:
                    LOG.warning('Could not release the lock of job %s',
                                name, exc_info=True)
        coordinator.stop()

    def leads(self, job):
        """Whether this process runs ``job`` now: always without a
        backend; with one, while it holds (or has just taken) the job's
        lock. A backend that cannot be reached leads nothing: the
        processes that can reach it run the jobs."""
        if not self.backend_url:
            return True
        with self._mutex:
            if not self._stopped:
                self._connect()
            if self._coordinator is None:
                return False
            lock = self._locks.get(job)
            if lock is None:
                lock = self._locks[job] = self._coordinator.get_lock(
                    encodeutils.safe_encode(LOCK_PREFIX + job))
            try:
                if lock.acquired and _still_owner(lock):
                    return True
                if lock.acquired:
                    LOG.warning('Lost the lock of job %s; another process '
                                'runs it', job)
                    _forget(lock)
                if lock.acquire(blocking=False):
                    LOG.info('This process (%s) now runs job %s',
                             self.member_id, job)
                    return True
            except Exception:
                LOG.warning('Coordination backend unavailable; job %s not '
                            'run here this time', job, exc_info=True)
            return False

    def served(self, items, key=str, log=False):
        """Of ``items``, those whose host (``key(item)``, its name) this
        process serves: all without a backend; with one, those the hash
        ring over the group's live members gives it; none while the
        backend cannot be reached (once this process's membership
        expires, the others serve its hosts). ``log``: ``items`` are all
        the hosts, and the process logs its share when it changes."""
        items = list(items)
        if not self.backend_url:
            return items
        me = encodeutils.safe_encode(self.member_id)
        with self._mutex:
            if not self._stopped:
                self._connect()
            if self._coordinator is None:
                return []
            grouped = self._grouped
            if grouped:
                members = self._members(me)
                if members is None:
                    return []
                ring = self._ring_of(members)
                mine = [item for item in items if me in ring.get_nodes(
                    encodeutils.safe_encode(key(item)))]
        if not grouped:
            members = [me]
            mine = items if self.leads(HOSTS_JOB) else []
        if log:
            with self._mutex:
                self._log_share(members, len(mine), len(items))
        return mine

    def _members(self, me):
        """The group's live members, this process among them (joined
        again if it was taken for dead after a stall, or the group was
        lost); None if the backend cannot say."""
        try:
            try:
                members = set(self._coordinator.get_members(GROUP).get())
            except coordination.GroupNotCreated:
                members = set()     # e.g. Redis restarted empty
            if me not in members:
                _join(self._coordinator)
                members.add(me)
        except Exception:
            LOG.warning('Coordination backend unavailable; no host '
                        'served here this time', exc_info=True)
            return None
        return members

    def _ring_of(self, members):
        members = frozenset(members)
        if self._ring[0] != members:
            self._ring = (members, hashring.HashRing(members))
        return self._ring[1]

    def _log_share(self, members, mine, hosts):
        share = (frozenset(members), mine, hosts)
        if share != self._share:
            self._share = share
            LOG.info('This process (%s) serves %d of %d hosts; service '
                     'processes: %s', self.member_id, mine, hosts,
                     ', '.join(sorted(encodeutils.safe_decode(member)
                                      for member in members)))

    def guard(self, job, callback):
        """``callback`` run only while this process leads ``job``; its
        result, or None."""
        def run_if_leading():
            if self.leads(job):
                return callback()
            return None
        run_if_leading.__qualname__ = callback.__qualname__
        return run_if_leading


def _join(coordinator):
    """Join the service processes' group, made by the first to come;
    False if the backend has no groups."""
    try:
        coordinator.create_group(GROUP).get()
    except coordination.GroupAlreadyExist:
        pass
    except tooz.NotImplemented:
        return False
    try:
        coordinator.join_group(GROUP).get()
    except coordination.MemberAlreadyExist:
        # A process restarted under the same host name before its
        # previous membership expired: that membership is its own.
        pass
    return True


def _still_owner(lock):
    """Whether the backend still gives the lock to this process; taken
    as yes where the backend cannot say (MySQL: a lock lives as long as
    the connection that holds it)."""
    try:
        return lock.is_still_owner()
    except NotImplementedError:
        return True


def _forget(lock):
    """Drop a lock the backend gave to another process: releasing it
    there fails (tooz logs it, and forgets the lock)."""
    try:
        lock.release()
    except Exception:
        LOG.debug('Releasing a lost lock failed', exc_info=True)
