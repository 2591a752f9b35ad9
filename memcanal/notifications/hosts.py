"""``memcanal.host.*``: a compute host registered, or went down or up.

A host's state is derived from its heartbeats whenever it is read
(memcanal.db.api.host_state), never stored, so no row changes when a
host goes down: HostWatch reads the hosts every periodic interval and
notifies the changes since its previous read. Each service process
watches the hosts it serves (memcanal.service.coordination: a hash
ring over the live processes), so each change is notified once, but
for the tick in which a host changes hands.
"""

from memcanal.db import api as db_api
from memcanal.notifications import notifier
from memcanal.notifications import objects


def payload(host):
    """The HostPayload of a host as db_api returns it."""
    return objects.HostPayload(**{
        key: host[key] for key in objects.HostPayload.fields})


def _emit(host, action):
    notifier.emit(objects.HostNotification,
                  objects.EventType(object='host', action=action),
                  payload(host),
                  priority='warn' if host['state'] == 'down' else 'info')


def notify_registered(context, host_uuid):
    """``memcanal.host.register`` of a host that just registered."""
    if notifier.NOTIFIER is not None:
        _emit(db_api.get_host(context, host_uuid), 'register')


class HostWatch:
    """Notifies ``memcanal.host.update`` when a host goes down or comes
    back up, as this process sees it."""

    def __init__(self):
        self._states = None

    def check(self, hosts):
        """Notify the ``hosts`` (as db_api.list_hosts returns them: those
        this process serves) whose state changed since the previous
        check (none of a host it did not watch then); returns them."""
        if notifier.NOTIFIER is None:
            return []
        known = self._states or {}
        changed = [host for host in hosts
                   if known.get(host['uuid'], host['state'])
                   != host['state']]
        self._states = {host['uuid']: host['state'] for host in hosts}
        for host in changed:
            _emit(host, 'update')
        return changed
