"""The agent's end of memtrace, the guest-tracing QEMU plugin.

hypervisor-patches/memtrace/memtrace.c emulates PRL_PAML and PML logs
from every load and store of a running guest and hands full logs to a
consumer on a Unix socket, as the PRL paper's hardware hands them to a
dom0 CPU. This module is that consumer: a reader thread takes records
off the socket as fast as the plugin sends them (a slow consumer fills
the plugin's rings, and then the guest's references are missed), and
``sync`` returns everything delivered since the previous one.

The wire format, little-endian, is a record header (``HEADER``) followed
by ``count`` 64-bit words; see the plugin's source for each kind.
"""

import dataclasses
import socket
import struct
import threading
import time

import numpy as np

HEADER = struct.Struct('<IHHIIQ')
MAGIC = 0x3152544d
HELLO, PRL, PML, PML_PARTIAL, SYNC = 1, 2, 3, 4, 5
COUNTERS = ('references', 'tlb_misses', 'prl_events', 'prl_logged',
            'prl_missed', 'prl_handler_ns', 'pml_events', 'pml_logged',
            'pml_vm_ns', 'epochs', 'beyond_bitmap')
HELLO_FIELDS = ('mode', 'log_entries', 'tlb_entries', 'vcpus', 'page_size',
                'epoch_ns', 'memory_mb', 'handler_base_ns')
UUID_BYTES = 40


class MemtraceError(Exception):
    """The plugin's socket could not be read as memtrace records."""


@dataclasses.dataclass(frozen=True)
class Hello:
    """The plugin's configuration, sent when a consumer connects."""

    mode: int
    log_entries: int
    tlb_entries: int
    vcpus: int
    page_size: int
    epoch_ns: int
    memory_mb: int
    handler_base_ns: int
    uuid: str


@dataclasses.dataclass(frozen=True)
class Delivered:
    """What the plugin delivered between two syncs: the pages of the full
    PRL and PML logs and of the partial PML logs, and its counters since
    it started (``COUNTERS``) at the end."""

    prl: np.ndarray
    pml: np.ndarray
    pml_partial: np.ndarray
    counters: dict
    time_ns: int


def _pages(chunks):
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)


class Connection:
    """One guest's plugin, connected to at ``path``."""

    def __init__(self, path, timeout=30.0):
        self.path = path
        self._socket = self._connect(path, timeout)
        self._stream = self._socket.makefile('rb', buffering=1 << 20)
        self._condition = threading.Condition()
        self._chunks = {PRL: [], PML: [], PML_PARTIAL: []}
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._synced_at = 0
        self._syncs = 0
        self.closed = False
        self.error = None
        try:
            self.hello = self._read_hello()
        except (MemtraceError, OSError):
            self._socket.close()
            raise
        self._reader = threading.Thread(
            target=self._read, name='memtrace-%s' % self.hello.uuid,
            daemon=True)
        self._reader.start()

    @staticmethod
    def _connect(path, timeout):
        """Connect, waiting up to ``timeout`` for the plugin to listen."""
        deadline = time.monotonic() + timeout
        while True:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.connect(path)
                return connection
            except (FileNotFoundError, ConnectionRefusedError):
                connection.close()
                if time.monotonic() >= deadline:
                    raise MemtraceError('no memtrace plugin listens on %s'
                                        % path)
                time.sleep(0.05)

    def _record(self):
        """The next record's kind and words, or None at the end."""
        header = self._stream.read(HEADER.size)
        if not header:
            return None
        if len(header) < HEADER.size:
            raise MemtraceError('truncated record header')
        magic, kind, _vcpu, count, _reserved, _time_ns = HEADER.unpack(
            header)
        if magic != MAGIC:
            raise MemtraceError('bad record magic %#x' % magic)
        data = self._stream.read(8 * count)
        if len(data) < 8 * count:
            raise MemtraceError('truncated record')
        return kind, np.frombuffer(data, '<i8')

    def _read_hello(self):
        record = self._record()
        if record is None or record[0] != HELLO:
            raise MemtraceError('the plugin did not say hello')
        words = record[1]
        uuid = words[len(HELLO_FIELDS):].tobytes()[:UUID_BYTES]
        return Hello(*(int(word) for word in words[:len(HELLO_FIELDS)]),
                     uuid=uuid.rstrip(b'\0').decode('ascii', 'replace'))

    def _read(self):
        try:
            while (record := self._record()) is not None:
                kind, words = record
                with self._condition:
                    if kind in self._chunks:
                        self._chunks[kind].append(words)
                    elif kind == SYNC:
                        self._counters = dict(zip(COUNTERS, map(int, words)))
                        self._synced_at = time.monotonic_ns()
                        self._syncs += 1
                        self._condition.notify_all()
        except (MemtraceError, OSError) as error:
            self.error = error
        with self._condition:
            self.closed = True
            self._condition.notify_all()

    def _send(self, command):
        try:
            self._socket.sendall(command)
        except OSError:
            pass  # The guest exited; the reader sees the end.

    def sync(self, timeout=10.0):
        """Everything delivered since the previous sync, once the plugin
        has flushed its partial PML logs and sent its counters. After the
        guest exited, what it delivered last. Raises MemtraceError if the
        plugin does not answer, or sent something else."""
        with self._condition:
            wanted = self._syncs + 1
        self._send(b'S')
        with self._condition:
            if not self._condition.wait_for(
                    lambda: self._syncs >= wanted or self.closed, timeout):
                raise MemtraceError('the plugin on %s did not answer a sync '
                                    'within %.0fs' % (self.path, timeout))
            if self.error is not None:
                raise MemtraceError('the plugin on %s sent what is not '
                                    'memtrace: %s' % (self.path, self.error))
            chunks = self._chunks
            self._chunks = {PRL: [], PML: [], PML_PARTIAL: []}
            return Delivered(_pages(chunks[PRL]), _pages(chunks[PML]),
                             _pages(chunks[PML_PARTIAL]),
                             dict(self._counters), self._synced_at)

    def new_dirty_epoch(self):
        """Clear every dirty bit: each page is logged again by PML when it
        is next written."""
        self._send(b'C')

    def close(self):
        try:
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the reader
        except OSError:
            pass
        self._socket.close()
        self._reader.join(timeout=5)
