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

A relay forwards the same header to the pager with the shim's connection
as the last descriptor (hypervisor-patches/pager/handoff.h, spec section
1): the pager answers QEMU on it, keeps it open to ask the shim to zap
pages (sampling), and answers the relay too. The relay then closes its
own copies, so that the shim sees the connection end when the pager dies
and offers its uffd again: those re-offers reach this listener too, and
are relayed to the pager that takes over.
"""

import dataclasses
import errno
import os
import select
import socket
import struct
import threading
import time

from oslo_log import log as logging

from memcanal import exception

LOG = logging.getLogger(__name__)

MAGIC = 0x6d6375666664320a          # "mcuffd2\n"
MAX_REGIONS = 8
# struct memcanal_handoff: magic, QEMU's pid, nregions, then MAX_REGIONS
# regions of (base in QEMU, length, offset in its memfd).
HEADER = struct.Struct('=%dQ' % (3 + 3 * MAX_REGIONS))


class HandoffError(exception.MemcanalException):
    msg_fmt = 'guest RAM handoff on %(path)s: %(reason)s'


def qemu_uuid(pid):
    """The ``-uuid`` QEMU ``pid`` runs with (libvirt always passes the
    domain's), or None."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
            args = cmdline.read().split(b'\0')
    except OSError:
        return None
    for flag, value in zip(args, args[1:]):
        if flag == b'-uuid':
            return value.decode()
    return None


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

    header: bytes
    pid: int
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


class Listener:
    """Listens on one pager socket, as memcanal-pager would, for the
    offers of QEMUs, filed by their domain's uuid.

    ``take_now(uuid, handoff)``, called in the listener's thread for each
    offer, relays it (and returns True) or leaves it held: the driver
    starts pagers at once when it samples every guest, and always takes
    a re-offer whose pager died. Held offers wait for ``take``.
    ``uuid_of`` names a QEMU's domain by its pid (default: qemu_uuid).
    """

    def __init__(self, path, uuid_of=None, take_now=None):
        self.path = path
        self._uuid_of = uuid_of or qemu_uuid
        self._take_now = take_now
        self._held = {}
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(path)
        # QEMU runs as libvirt's user (libvirt-qemu, qemu).
        os.chmod(path, 0o666)
        self._socket.listen(16)
        self._taken = set()
        threading.Thread(target=self._serve, daemon=True,
                         name='handoff %s' % path).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError as error:
                if error.errno in (errno.EINVAL, errno.EBADF):
                    return                  # closed
                LOG.warning('Handoff on %s: %s', self.path, error)
                time.sleep(0.1)             # out of descriptors, say
                continue
            try:
                self._receive(connection)
            except Exception:               # the listener must go on
                LOG.exception('Handoff on %s failed', self.path)

    def _receive(self, connection):
        connection.settimeout(5)
        try:
            data, fds, _, _ = socket.recv_fds(connection, HEADER.size,
                                              MAX_REGIONS + 1)
        except OSError as error:
            LOG.warning('Handoff on %s: %s', self.path, error)
            connection.close()
            return
        offer = unpack(data, len(fds))
        uuid = self._uuid_of(offer[0]) if offer else None
        if uuid is None:
            LOG.warning('Handoff on %s from pid %s is not a domain\'s QEMU '
                        'handing its RAM over; closed', self.path,
                        offer[0] if offer else '?')
            for fd in fds:
                os.close(fd)
            connection.close()
            return
        connection.settimeout(None)
        pid, regions = offer
        handoff = Handoff(data, pid, regions, fds, connection,
                          reoffer=pid in self._taken)
        LOG.info('QEMU %d of %s %s its %d MiB (%d regions) on %s', pid,
                 uuid, 'offered again' if handoff.reoffer else 'handed',
                 handoff.length >> 20, len(regions), self.path)
        try:
            taken = self._take_now is not None and self._take_now(uuid,
                                                                  handoff)
        except Exception:
            LOG.exception('The handoff of %s failed', uuid)
            handoff.close()
            return
        if taken:
            self._taken.add(pid)
            return
        with self._lock:
            previous = self._held.get(uuid)
            self._held[uuid] = handoff
        if previous is not None:        # a QEMU that exited since
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
            self._taken.add(handoff.pid)
        return handoff

    def close(self):
        self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for handoff in held:
            handoff.close()
