"""The agent's action journal: what it set out to do and what it did.

The service sends an action until the agent answers for it, so an action
may arrive twice, or again after the agent was killed in the middle of
it. Before it resizes a VM the agent records its intent here, and after
it the outcome, both on disk. A redelivered action with an outcome gets
that outcome again, without a resize; one with only an intent (the agent
died while applying it) is settled by the VM's current size (see
memcanal.agent.manager). The newest ``kept`` actions are remembered, far
more than a host receives while one is being redelivered.

A page action carries the lease tokens that let its VM's pager store on
memory servers (memcanal.service.lease_tokens): the journal's directory
is the agent's alone (0700).
"""

import collections
import json
import os
import threading
from urllib import parse

from memcanal.agent import durable

SUFFIX = '.json'


class ActionJournal:
    """Entries by action uuid: dicts of action, previous_bytes (the VM's
    memory when the intent was recorded) and result (None until the
    action is done)."""

    def __init__(self, directory, kept):
        self.directory = directory
        self.kept = kept
        self._lock = threading.Lock()
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
        found = []
        for name in durable.names(directory, SUFFIX):
            path = os.path.join(directory, name)
            with open(path) as f:
                found.append((os.stat(path).st_mtime, json.load(f)))
        found.sort(key=lambda item: item[0])
        self._entries = collections.OrderedDict(
            (entry['action']['uuid'], entry) for _mtime, entry in found)

    def _path(self, uuid):
        return os.path.join(self.directory,
                            parse.quote(uuid, safe='') + SUFFIX)

    def get(self, uuid):
        with self._lock:
            return self._entries.get(uuid)

    def intend(self, action, previous_bytes):
        """Record that ``action`` is about to be applied."""
        self.record(action, previous_bytes, None)

    def record(self, action, previous_bytes, result):
        """Record what applying ``action`` gave."""
        entry = {'action': action, 'previous_bytes': previous_bytes,
                 'result': result}
        uuid = action['uuid']
        with self._lock:
            durable.write(self._path(uuid), json.dumps(entry))
            self._entries[uuid] = entry
            self._entries.move_to_end(uuid)
            while len(self._entries) > self.kept:
                oldest, _entry = self._entries.popitem(last=False)
                durable.remove(self._path(oldest))
