"""A stand-in for the memtrace plugin's socket, for unit tests.

It speaks the plugin's wire format (memcanal.agent.drivers.memtrace):
says hello when a consumer connects, sends the records a test queues,
and answers 'S' with the queued partial PML logs and its counters and
'C' by counting a new epoch. The real plugin is exercised by
memcanal/tests/functional/test_memtrace.py.
"""

import socket
import threading

import numpy as np

from memcanal.agent.drivers import memtrace


def record(kind, words, vcpu=0, time_ns=0):
    words = np.asarray(words, '<i8')
    return memtrace.HEADER.pack(memtrace.MAGIC, kind, vcpu, len(words), 0,
                                time_ns) + words.tobytes()


def hello(uuid, memory_mb=256, log_entries=4):
    words = [3, log_entries, 64, 1, 4096, 0, memory_mb, 1000]
    padded = uuid.encode().ljust(memtrace.UUID_BYTES, b'\0')
    return record(memtrace.HELLO, words + list(
        np.frombuffer(padded, '<i8')))


class FakePlugin:
    """Listens on ``path``; ``send`` queues records for the consumer."""

    def __init__(self, path, uuid, memory_mb=256):
        self.uuid = uuid
        self.memory_mb = memory_mb
        self.counters = dict.fromkeys(memtrace.COUNTERS, 0)
        self.partial = []
        self.commands = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._consumer = None
        self._accepted = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self._consumer, _ = self._listener.accept()
        self._consumer.sendall(hello(self.uuid, self.memory_mb))
        self._accepted.set()
        while (commands := self._consumer.recv(64)):
            for command in commands.decode():
                self.commands.append(command)
                if command == 'S':
                    if self.partial:
                        self._consumer.sendall(record(
                            memtrace.PML_PARTIAL, self.partial))
                        self.partial = []
                    self._consumer.sendall(record(memtrace.SYNC, [
                        self.counters[name]
                        for name in memtrace.COUNTERS]))
                elif command == 'C':
                    self.counters['epochs'] += 1

    def send(self, data):
        """Send raw bytes (records) once a consumer is connected."""
        self._accepted.wait(5)
        self._consumer.sendall(data)

    def exit(self):
        """The guest powers off: the plugin closes the connection."""
        self._accepted.wait(5)
        self._consumer.shutdown(socket.SHUT_RDWR)
        self._consumer.close()
        self._listener.close()
