"""Whether an offer of guest RAM is a domain's QEMU's own (issue #25).

The handoff socket is open to QEMU's group, so an offer's word about
itself counts for nothing: who sent it is the kernel's answer
(SO_PEERCRED), which domain's QEMU that is is libvirt's (the listener's
``domain_of``), and its descriptors must be that process's own: the
userfaultfd, the very open file QEMU holds (kcmp), and per region the
memfd QEMU maps shared and writable at the base the header gives. Only
then may they reach a root pager, which registers and serves that
memory as that domain's. Reading another user's /proc and kcmp need
root, as the agent runs.
"""

import ctypes
import dataclasses
import os
import socket
import struct
import time

from memcanal.agent import pager_client
from memcanal import exception

PAGE = 4096
UFFD_LINK = 'anon_inode:[userfaultfd]'
KCMP_FILE = 0
SYS_KCMP = {'x86_64': 312, 'aarch64': 272}[os.uname().machine]
_CREDENTIALS = struct.Struct('3i')           # struct ucred
_libc = ctypes.CDLL(None, use_errno=True)


class Refused(exception.MemcanalException):
    """An offer that is not what it must be; ``code`` says why, stably
    (the listener counts refusals by it)."""

    msg_fmt = '%(reason)s'

    def __init__(self, code, reason):
        self.code = code
        super().__init__(reason=reason)


@dataclasses.dataclass(frozen=True)
class Peer:
    """The process at the other end of a connection, as the kernel
    recorded it when it connected, and when it started (clock ticks
    since boot; None: it is gone)."""

    pid: int
    uid: int
    gid: int
    started: int | None

    @classmethod
    def of(cls, connection):
        pid, uid, gid = _CREDENTIALS.unpack(connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
        return cls(pid, uid, gid, pager_client.start_time(pid) if pid
                   else None)

    def started_at(self):
        """When it started, in seconds since the epoch (time.time)."""
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        return boot + self.started / os.sysconf('SC_CLK_TCK')

    def still_running(self):
        """Refused unless the process that connected still runs: its pid
        not reused since, so that every /proc read was of it."""
        if self.started is None or (
                pager_client.start_time(self.pid) != self.started):
            raise Refused('gone', 'pid %d exited while its offer was '
                          'checked' % self.pid)


def check_offer(peer, fds, regions):
    """Refused unless ``fds`` [uffd, memfd_0, ...] are ``peer``'s own
    userfaultfd and the memfds it maps at ``regions`` [(base, length,
    offset)], ``peer`` being the process that connected throughout."""
    try:
        check_uffd(fds[0], peer.pid)
        check_regions(peer.pid, regions, fds[1:])
    except (FileNotFoundError, ProcessLookupError):
        raise Refused('gone', 'pid %d exited while its offer was checked'
                      % peer.pid)
    peer.still_running()


def _kcmp_file(pid, fd, other_pid, other_fd):
    return _libc.syscall(SYS_KCMP, pid, other_pid, KCMP_FILE, fd, other_fd)


def check_uffd(fd, pid):
    """Refused unless our ``fd`` is a userfaultfd and process ``pid``
    holds the same open file. That proves QEMU holds it, not that QEMU
    made it on its own memory (issue #36); holding suffices, as a
    descriptor reaches QEMU's table only by QEMU's doing (made there, or
    taken over QMP's getfd, libvirt's alone) or by a process that may
    ptrace QEMU, each of which already reads and writes the guest's RAM:
    doc/pooling.md's threat model. The memfds, the memory itself, are
    checked apart (check_regions)."""
    link = os.readlink('/proc/self/fd/%d' % fd)
    if link != UFFD_LINK:
        raise Refused('not_uffd', 'its first descriptor is %s, not a '
                      'userfaultfd' % link)
    ours = os.getpid()
    for name in os.listdir('/proc/%d/fd' % pid):
        if _kcmp_file(ours, fd, pid, int(name)) == 0:
            return
    raise Refused('foreign_uffd', 'the userfaultfd it sent is none of '
                  'pid %d\'s' % pid)


def shared_mappings(pid):
    """Process ``pid``'s mappings in address order: (start, end,
    permissions, file offset, (device major, minor, inode))."""
    mappings = []
    with open('/proc/%d/maps' % pid) as maps:
        for line in maps:
            span, permissions, offset, device, inode = line.split()[:5]
            start, end = (int(address, 16) for address in span.split('-'))
            major, minor = (int(number, 16) for number in device.split(':'))
            mappings.append((start, end, permissions, int(offset, 16),
                             (major, minor, int(inode))))
    return mappings


def _maps(mappings, region, file):
    """Whether ``mappings`` map ``file`` shared and writable over all of
    ``region`` (base, length, offset), at that offset: one mapping or
    several adjoining ones (a madvise may split QEMU's)."""
    base, length, offset = region
    at = base
    for start, end, permissions, file_offset, mapped in mappings:
        if end <= at:
            continue
        if (start > at or permissions != 'rw-s' or mapped != file
                or file_offset + at - start != offset + at - base):
            return False
        at = end
        if at >= base + length:
            return True
    return False


def check_regions(pid, regions, memfds):
    """Refused unless each of ``memfds`` is the file process ``pid``
    maps shared and writable over its region, the regions page-aligned
    and in address order: the pager will serve that memory."""
    mappings = shared_mappings(pid)
    previous_end = 0
    for region, memfd in zip(regions, memfds):
        base, length, offset = region
        if (not length or (base | length | offset) % PAGE
                or base < previous_end):
            raise Refused('bad_header', 'region %#x+%#x is empty, not '
                          'page-aligned or out of order' % (base, length))
        previous_end = base + length
        status = os.fstat(memfd)
        file = (os.major(status.st_dev), os.minor(status.st_dev),
                status.st_ino)
        if not _maps(mappings, region, file):
            raise Refused('foreign_memory', 'pid %d does not map the file '
                          'sent for region %#x+%#x there, shared and '
                          'writable, at offset %#x'
                          % (pid, base, length, offset))
