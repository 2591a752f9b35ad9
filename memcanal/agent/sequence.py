"""The agent's report sequence number, kept on disk across restarts.

The service stores each (host, sequence) once. An agent that restarts must
never reuse a number it already sent, even for a report still in flight
when it died, so the next number is written to disk before it is used.
"""

import os


class SequenceCounter:

    def __init__(self, path):
        self.path = path
        self.last = self._read()

    def _read(self):
        try:
            with open(self.path) as f:
                return int(f.read().strip() or 0)
        except FileNotFoundError:
            return 0

    def _write(self, value):
        os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
        tmp = self.path + '.tmp'
        with open(tmp, 'w') as f:
            f.write('%d\n' % value)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def resume_after(self, stored):
        """Never fall below what the service says it stored."""
        self.last = max(self.last, stored)

    def next(self):
        value = self.last + 1
        self._write(value)
        self.last = value
        return value
