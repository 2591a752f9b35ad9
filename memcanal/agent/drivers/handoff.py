"""Receiving a libvirt domain's guest RAM and relaying it to its pager.

libmemcanal-uffd.so, preloaded into a domain's QEMU, hands guest RAM over
as soon as QEMU maps it: it connects to ``MEMCANAL_PAGER_SOCKET``, sends
the handoff (a header naming every RAM region, one per memory backend,
and QEMU's descriptors ``[uffd, memfd_0, ...]``) and waits for the
one-byte answer; if nothing listens there it gives up, and the guest runs
unpaged and unsampled until its QEMU restarts. The agent listens on the
domains' pager sockets itself, as a pager would, since it decides when a
domain's memcanal-pager starts and with which stores: at once where the
driver samples every guest, else at the domain's first paging action
(until then the handoff is held, QEMU's descriptors and its waiting
connection, and the guest runs on).

A relay forwards the header (QEMU's pid as the kernel gave it) to the
pager with the shim's connection as the last descriptor
(hypervisor-patches/pager/handoff.h, spec section 1): the pager answers
QEMU on it, keeps it open to ask the shim to zap pages (sampling), and
answers the relay too. The relay then closes its
own copies, so that the shim sees the connection end when the pager dies
and offers its uffd again: those re-offers reach this listener too, and
are relayed to the pager that takes over.

Who may hand RAM over (issue #25): the socket is root's and QEMU's
group's only (0660), in a directory only root may write to; an offer is
taken only from the process libvirt runs as a domain's QEMU, by the
kernel's word, with that process's own uffd and memory
(memcanal.agent.drivers.handoff_checks), one held per domain. A
connection waits at most HEADER_WAIT for its header, at most PENDING
wait at once, one per process: idle connections cannot take the place
of a QEMU's. Refusals are closed, logged and counted by reason.
"""

import collections
import dataclasses
import os
import select
import selectors
import socket
import struct
import threading
import time

from oslo_log import log as logging

from memcanal.agent.drivers import handoff_checks
from memcanal import exception

LOG = logging.getLogger(__name__)

MAGIC = 0x6d6375666664320a          # "mcuffd2\n"
MAX_REGIONS = 8
# struct memcanal_handoff: magic, QEMU's pid, nregions, then MAX_REGIONS
# regions of (base in QEMU, length, offset in its memfd).
HEADER = struct.Struct('=%dQ' % (3 + 3 * MAX_REGIONS))


class HandoffError(exception.MemcanalException):
    msg_fmt = 'guest RAM handoff on %(path)s: %(reason)s'


def pack(pid, regions):
    """The v2 header of ``regions`` [(base, length, offset)]."""
    words = [MAGIC, pid, len(regions)]
    for region in regions:
        words.extend(region)
    return HEADER.pack(*words, *[0] * (HEADER.size // 8 - len(words)))


def unpack(data, nfds):
    """(pid, regions) of a v2 header that came with ``nfds``
    descriptors (a uffd and one memfd per region), or None."""
    if len(data) != HEADER.size:
        return None
    magic, pid, count, *words = HEADER.unpack(data)
    if magic != MAGIC or not 1 <= count <= MAX_REGIONS or nfds != count + 1:
        return None
    return pid, [tuple(words[3 * i:3 * i + 3]) for i in range(count)]


@dataclasses.dataclass
class Handoff:
    """One QEMU's offer of its RAM, received and not answered yet.
    ``reoffer``: the shim offers a uffd it handed over before, its pager
    having died."""

    header: bytes                  # with QEMU's pid as the kernel gave it
    pid: int
    started: int                   # when QEMU started (pager_client)
    regions: list
    fds: list                      # [uffd, memfd_0, ...]
    connection: socket.socket
    reoffer: bool = False

    @property
    def length(self):
        return sum(length for _, length, _ in self.regions)

    def relay(self, path, timeout, alive=lambda: True):
        """Hand QEMU's RAM and its connection to the pager listening (or
        about to listen, while ``alive()``) on ``path``; once the pager
        said it took them, let go of every descriptor: the pager answers
        QEMU itself."""
        deadline = time.monotonic() + timeout
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as pager:
                _connect(pager, path, deadline, alive)
                pager.settimeout(max(0.1, deadline - time.monotonic()))
                socket.send_fds(pager, [self.header],
                                self.fds + [self.connection.fileno()])
                answer = pager.recv(1)
            if not answer:
                raise HandoffError(path=path, reason='the pager closed '
                                   'the connection without answering')
        except OSError as error:
            raise HandoffError(path=path, reason=str(error))
        finally:
            self.close()

    def abandoned(self):
        """Whether QEMU closed its end: it exited."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        return bool(readable) and not self.connection.recv(
            1, socket.MSG_PEEK)

    def close(self):
        """Let go of the handoff. Unrelayed, QEMU's shim sees its
        connection close: a first offer gives up (the guest runs
        unpaged), a re-offer is made again 200 ms later."""
        self.connection.close()
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def _connect(connection, path, deadline, alive):
    """Connect to a pager that may not listen yet: it was just started."""
    while True:
        try:
            connection.settimeout(max(0.1, deadline - time.monotonic()))
            connection.connect(path)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() >= deadline or not alive():
                raise
            time.sleep(0.02)


def listening_socket(path, gid):
    """A socket listening on ``path`` for root and group ``gid`` only
    (mode 0660; 0600 without ``gid``), in a directory only we may write
    to: whoever could, could put a socket of their own in its place and
    take the RAM of the QEMUs that connect."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    status = os.stat(directory)
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise HandoffError(path=path, reason=(
            'its directory %s is writable by others than the agent (owner '
            '%d, mode %o)' % (directory, status.st_uid,
                              status.st_mode & 0o7777)))
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # bind makes the file with the socket's mode: never wider than
        # 0600, then given to the group before anyone may connect.
        os.fchmod(listening.fileno(), 0o600)
        listening.bind(path)
        if gid is not None:
            os.chown(path, -1, gid)
            os.chmod(path, 0o660)
        listening.listen(Listener.BACKLOG)
        listening.setblocking(False)
    except BaseException:
        listening.close()
        raise
    return listening


class Listener:
    """Listens on one pager socket, as memcanal-pager would, for the
    offers of QEMUs, filed by their domain's uuid.

    ``domain_of(peer)`` (a handoff_checks.Peer, as the kernel gives it)
    is the uuid of the domain whose QEMU ``peer`` is, or raises
    handoff_checks.Refused. ``take_now(uuid, handoff)``, called in the
    listener's thread for each offer that passed every check, relays it
    (and returns True) or leaves it held: the driver starts pagers at
    once when it samples every guest, and always takes a re-offer whose
    pager died. Held offers wait for ``take``; one per domain, a later
    one refused while it is open. ``gid``: the group QEMU runs as.
    ``refused`` counts refusals by code, ``accepted`` the offers taken
    or held.
    """

    BACKLOG = 64
    PENDING = 16              # connections waiting for their header
    HEADER_WAIT = 2.0         # seconds; the shim sends it as it connects
    ACCEPTS = 64              # connections accepted per round

    def __init__(self, path, domain_of, take_now=None, gid=None):
        self.path = path
        self._domain_of = domain_of
        self._take_now = take_now
        self._held = {}
        self._taken = set()
        self._lock = threading.Lock()
        self._pending = {}        # connection: (peer, uuid, deadline)
        self.refused = collections.Counter()
        self.accepted = 0
        self._socket = listening_socket(path, gid)
        self._wake, self._waker = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._socket, selectors.EVENT_READ)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name='handoff %s' % path)
        self._thread.start()

    def _serve(self):
        try:
            while True:
                for key, _ in self._selector.select(self._next_deadline()):
                    if key.fileobj is self._wake:
                        return
                    try:
                        if key.fileobj is self._socket:
                            self._accept()
                        else:
                            self._receive(key.fileobj)
                    except Exception:       # the listener must go on
                        LOG.exception('Handoff on %s failed', self.path)
                self._expire()
        finally:
            for connection in self._pending:
                connection.close()
            self._pending.clear()

    def _next_deadline(self):
        if not self._pending:
            return None
        deadline = min(entry[2] for entry in self._pending.values())
        return max(0.0, deadline - time.monotonic())

    def _refuse(self, connection, refusal, peer=None):
        self.refused[refusal.code] += 1
        LOG.warning('Handoff on %s from pid %s refused: %s', self.path,
                    peer.pid if peer else '?', refusal)
        connection.close()

    def _accept(self):
        """Accept what waits (a bounded round, so that headers that came
        meanwhile are read too), refusing at once who is no domain's
        QEMU, or has an offer waiting already, or comes while PENDING
        do."""
        for _ in range(self.ACCEPTS):
            try:
                connection, _ = self._socket.accept()
            except BlockingIOError:
                return
            except OSError as error:
                LOG.warning('Handoff on %s: %s', self.path, error)
                time.sleep(0.1)             # out of descriptors, say
                return
            peer = None
            try:
                peer = handoff_checks.Peer.of(connection)
                uuid = self._domain_of(peer)
                if any(waiting.pid == peer.pid
                       for waiting, _, _ in self._pending.values()):
                    raise handoff_checks.Refused(
                        'busy', 'it has an offer waiting already')
                if len(self._pending) >= self.PENDING:
                    raise handoff_checks.Refused(
                        'busy', '%d offers wait already' % self.PENDING)
            except handoff_checks.Refused as refusal:
                self._refuse(connection, refusal, peer)
                continue
            except Exception:
                connection.close()
                raise
            connection.setblocking(False)
            self._pending[connection] = (
                peer, uuid, time.monotonic() + self.HEADER_WAIT)
            self._selector.register(connection, selectors.EVENT_READ)

    def _expire(self):
        now = time.monotonic()
        for connection, (peer, _, deadline) in list(self._pending.items()):
            if deadline <= now:
                self._forget(connection)
                self._refuse(connection, handoff_checks.Refused(
                    'timeout', 'no offer within %gs' % self.HEADER_WAIT),
                    peer)

    def _forget(self, connection):
        self._selector.unregister(connection)
        return self._pending.pop(connection)

    def _receive(self, connection):
        """Read a waiting connection's offer, check it, and hand it on."""
        peer, uuid, _ = self._forget(connection)
        fds = []
        try:
            data, fds, flags, _ = socket.recv_fds(
                connection, HEADER.size, MAX_REGIONS + 1,
                socket.MSG_CMSG_CLOEXEC)
            offer = (None if flags & socket.MSG_CTRUNC
                     else unpack(data, len(fds)))
            if offer is None:
                raise handoff_checks.Refused('bad_header', (
                    'not a v2 handoff header with a uffd and a memfd per '
                    'region') if data else 'closed without an offer')
            _, regions = offer
            handoff_checks.check_offer(peer, fds, regions)
            with self._lock:
                previous = self._held.get(uuid)
                if previous is not None and not previous.abandoned():
                    raise handoff_checks.Refused('held', (
                        'the handoff of %s is held already' % uuid))
        except Exception as error:
            for fd in fds:
                os.close(fd)
            if not isinstance(error, handoff_checks.Refused):
                error = handoff_checks.Refused('error', (
                    'its offer could not be read or checked: %s' % error))
            self._refuse(connection, error, peer)
            return
        connection.setblocking(True)    # the pager gets the same file
        self._offered(uuid, Handoff(
            pack(peer.pid, regions), peer.pid, peer.started, regions, fds,
            connection, reoffer=(peer.pid, peer.started) in self._taken))

    def _offered(self, uuid, handoff):
        self.accepted += 1
        LOG.info('QEMU %d of %s %s its %d MiB (%d regions) on %s',
                 handoff.pid, uuid,
                 'offered again' if handoff.reoffer else 'handed',
                 handoff.length >> 20, len(handoff.regions), self.path)
        try:
            taken = self._take_now is not None and self._take_now(uuid,
                                                                  handoff)
        except Exception:
            LOG.exception('The handoff of %s failed', uuid)
            handoff.close()
            return
        if taken:
            self._taken.add((handoff.pid, handoff.started))
            return
        with self._lock:
            previous = self._held.get(uuid)
            self._held[uuid] = handoff
        if previous is not None:        # its QEMU let go of it
            previous.close()

    def held(self):
        """The uuids whose handoff is held."""
        with self._lock:
            return set(self._held)

    def drop_abandoned(self):
        """Close the handoffs of QEMUs that exited: a held memfd would
        keep their guest's RAM allocated."""
        with self._lock:
            gone = [uuid for uuid, held in self._held.items()
                    if held.abandoned()]
            dropped = [self._held.pop(uuid) for uuid in gone]
        for held in dropped:
            held.close()

    def take(self, uuid):
        """The handoff held for domain ``uuid`` (the caller relays or
        closes it), or None."""
        with self._lock:
            handoff = self._held.pop(uuid, None)
        if handoff is not None:
            self._taken.add((handoff.pid, handoff.started))
        return handoff

    def close(self):
        """Stop listening; the offers waiting or held are let go."""
        self._waker.send(b'x')
        self._thread.join()
        self._selector.close()
        for end in (self._socket, self._wake, self._waker):
            end.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for handoff in held:
            handoff.close()
