"""Holding a libvirt domain's guest-RAM handoff until the agent pages it.

libmemcanal-uffd.so, preloaded into a domain's QEMU, hands guest RAM over
once, as soon as QEMU maps it: it connects to ``MEMCANAL_PAGER_SOCKET``,
sends the handoff (a header and QEMU's [uffd, memfd]) and waits for the
one-byte answer; if nothing listens there it gives up, and the guest runs
unpaged until its QEMU restarts. But a memcanal-pager takes its stores
when it starts, and which memory servers a VM pages to is known only at
its first paging action, long after. So the agent listens on the
domains' pager sockets itself, as a pager would, and holds each handoff
(QEMU's descriptors and its waiting connection; the guest runs on), until
the first paging action starts a pager with that action's stores; the
handoff is then relayed to that pager, and its answer to QEMU.
"""

import dataclasses
import os
import select
import socket
import struct
import threading

from oslo_log import log as logging

from memcanal import exception

LOG = logging.getLogger(__name__)

# struct memcanal_handoff (hypervisor-patches/pager/handoff.h): magic,
# QEMU's pid, guest RAM's base and length in QEMU, its memfd offset.
HEADER = struct.Struct('=5Q')
MAGIC = 0x6d6375666664310a


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


@dataclasses.dataclass
class Handoff:
    """One QEMU's handoff, received and not answered yet."""

    header: bytes
    pid: int
    length: int
    uffd: int
    memfd: int
    connection: socket.socket

    def relay(self, path, timeout):
        """Hand QEMU's RAM to the pager listening on ``path`` and answer
        QEMU as the pager answered; the memfd, which the caller then owns
        (to see which pages are resident)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as pager:
                pager.settimeout(timeout)
                pager.connect(path)
                socket.send_fds(pager, [self.header], [self.uffd,
                                                       self.memfd])
                answer = pager.recv(1)
            if not answer:
                raise HandoffError(path=path, reason='the pager closed '
                                   'the connection without answering')
            self.connection.sendall(answer)
        except OSError as error:
            self.close()
            raise HandoffError(path=path, reason=str(error))
        except HandoffError:
            self.close()
            raise
        self.connection.close()
        os.close(self.uffd)
        return self.memfd

    def abandoned(self):
        """Whether QEMU closed its end: it exited."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        return bool(readable) and not self.connection.recv(
            1, socket.MSG_PEEK)

    def close(self):
        """Drop the handoff: QEMU's shim sees the connection close, gives
        up and runs the guest unpaged."""
        self.connection.close()
        os.close(self.uffd)
        os.close(self.memfd)


class Listener:
    """Listens on one pager socket, as memcanal-pager would, and holds
    the handoff of each QEMU that connects, by its domain's uuid.

    A QEMU whose handoff was taken offers it again every 200 ms (the
    shim, for a pager taking over from one that died): those offers are
    closed unanswered. ``uuid_of`` names a QEMU's domain by its pid
    (default: qemu_uuid).
    """

    def __init__(self, path, uuid_of=None):
        self.path = path
        self._uuid_of = uuid_of or qemu_uuid
        self._held = {}
        self._taken = set()
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
        threading.Thread(target=self._serve, daemon=True,
                         name='handoff %s' % path).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:             # closed
                return
            self._receive(connection)

    def _receive(self, connection):
        connection.settimeout(5)
        try:
            data, fds, _, _ = socket.recv_fds(connection, HEADER.size, 2)
        except OSError as error:
            LOG.warning('Handoff on %s: %s', self.path, error)
            connection.close()
            return
        magic, pid, _, length, _ = (HEADER.unpack(data)
                                    if len(data) == HEADER.size
                                    else (0,) * 5)
        uuid = None
        if magic == MAGIC and len(fds) == 2 and pid not in self._taken:
            uuid = self._uuid_of(pid)
        if uuid is None:
            if pid not in self._taken:
                LOG.warning('Handoff on %s from pid %s is not a domain\'s '
                            'QEMU handing its RAM over; closed', self.path,
                            pid)
            for fd in fds:
                os.close(fd)
            connection.close()
            return
        connection.settimeout(None)
        handoff = Handoff(data, pid, length, fds[0], fds[1], connection)
        with self._lock:
            previous = self._held.get(uuid)
            self._held[uuid] = handoff
        if previous is not None:        # a QEMU that exited since
            previous.close()
        LOG.info('QEMU %d of %s handed its %d MiB over on %s; held until '
                 'it is paged', pid, uuid, length >> 20, self.path)

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
