"""The agent's report sequence number, kept on disk across restarts.

The service stores each (host, sequence) once. An agent that restarts must
never reuse a number it already sent, even for a report still in flight
when it died, so the next number is written to disk before it is used.
"""

from memcanal.agent import durable


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

    def resume_after(self, stored):
        """Never fall below what the service says it stored."""
        self.last = max(self.last, stored)

    def next(self):
        value = self.last + 1
        durable.write(self.path, '%d\n' % value)
        self.last = value
        return value
