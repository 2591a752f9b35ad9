"""The agent's outbox: every report kept on disk until the service has it.

oslo.messaging acknowledges a cast when the service takes it off the
queue, before the report is stored; a broker or a service that stops in
between loses it, and so does a cast that fails while the broker is down.
So the agent writes each report here before it casts it, and later asks
the service which of the reports it sent a while ago are stored (read
from the database, so only what is committed counts); it drops those and
sends the others again. The service stores each (host, sequence) once,
so a report sent twice is stored once: exactly once in the database.

One file per report, named by its sequence; ``max_reports`` bounds how
many are kept, the oldest dropped first, so an agent cut off from the
service for long does not fill its disk.
"""

import json
import os
import threading
import time

from oslo_log import log as logging

from memcanal.agent import durable

LOG = logging.getLogger(__name__)

SUFFIX = '.json'


class Outbox:
    """Reports not yet confirmed, by sequence, in ``directory``."""

    def __init__(self, directory, max_reports):
        self.directory = directory
        self.max_reports = max_reports
        self._lock = threading.Lock()
        # When this process last sent each report (time.monotonic()); None
        # for one it has not sent: left by an earlier run, or its cast
        # failed. Such reports are asked about at once.
        self._sent_at = dict.fromkeys(
            (int(name[:-len(SUFFIX)])
             for name in durable.names(directory, SUFFIX)), None)
        self._trim()

    def _path(self, sequence):
        return os.path.join(self.directory, '%d%s' % (sequence, SUFFIX))

    def __len__(self):
        return len(self._sent_at)

    def sequences(self):
        with self._lock:
            return sorted(self._sent_at)

    def add(self, report):
        """Keep ``report`` on disk; call before sending it."""
        durable.write(self._path(report['sequence']), json.dumps(report))
        with self._lock:
            self._sent_at[report['sequence']] = None
            self._trim()

    def _trim(self):
        excess = sorted(self._sent_at)[:max(0, len(self._sent_at)
                                             - self.max_reports)]
        if excess:
            LOG.warning('The outbox holds more than %d unconfirmed reports: '
                        'dropping reports %d to %d, which may never be '
                        'stored', self.max_reports, excess[0], excess[-1])
        for sequence in excess:
            durable.remove(self._path(sequence))
            del self._sent_at[sequence]

    def load(self, sequence):
        with open(self._path(sequence)) as f:
            return json.load(f)

    def sent(self, sequence):
        """Record that ``sequence`` was just sent."""
        with self._lock:
            if sequence in self._sent_at:
                self._sent_at[sequence] = time.monotonic()

    def due(self, delay):
        """Sequences not sent in the last ``delay`` seconds, oldest
        first: those the service should have stored by now."""
        before = time.monotonic() - delay
        with self._lock:
            return sorted(sequence for sequence, sent_at
                          in self._sent_at.items()
                          if sent_at is None or sent_at <= before)

    def drop(self, sequences):
        """Forget reports the service has (stored or rejected)."""
        with self._lock:
            for sequence in sequences:
                if sequence in self._sent_at:
                    del self._sent_at[sequence]
                    durable.remove(self._path(sequence))
