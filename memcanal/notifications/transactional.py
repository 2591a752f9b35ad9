"""Notifications of what a transaction changed, sent once it commits.

Collectors (memcanal.notifications.decisions, .leases) watch a session's
writes and ``queue`` the notifications they make; after the commit they
are sent in the order queued, after a rollback dropped: a change is
notified once, by the process that made it, and never one that did not
happen. Listening to every Session of the process, they need no change
to the code that writes.
"""

import contextlib

from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import orm

from memcanal.notifications import notifier

LOG = logging.getLogger(__name__)
_PENDING = 'memcanal_notifications'


def queue(session, notification_class, event_type, payload, priority):
    session.info.setdefault(_PENDING, []).append(
        (notification_class, event_type, payload, priority))


def enabled():
    return notifier.NOTIFIER is not None


@contextlib.contextmanager
def logged(what):
    """What a collector raises in the block is logged, never raised into
    the write it watches (which it would fail)."""
    try:
        yield
    except Exception:
        LOG.exception('No notification of %s', what)


def _send(session):
    for notification_class, event_type, payload, priority in (
            session.info.pop(_PENDING, [])):
        try:
            notifier.emit(notification_class, event_type, payload,
                          priority)
        except Exception:
            # The change is committed; a lost notification must not
            # look like a failed change to whoever made it.
            LOG.exception('Could not notify %s', event_type.to_event_type())


def _drop(session):
    session.info.pop(_PENDING, None)


LISTENERS = [('after_commit', _send), ('after_rollback', _drop)]


def install(listeners):
    """Listen to every session of the process with ``listeners``
    ((event name, function)) and LISTENERS (idempotent)."""
    for name, listener in LISTENERS + list(listeners):
        if not sa.event.contains(orm.Session, name, listener):
            sa.event.listen(orm.Session, name, listener)


def uninstall(listeners):
    for name, listener in LISTENERS + list(listeners):
        if sa.event.contains(orm.Session, name, listener):
            sa.event.remove(orm.Session, name, listener)
