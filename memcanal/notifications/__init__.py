"""Versioned notifications (doc/monitoring.md, doc/notification_samples/).

``init(conf, source)`` is called by the processes that change what
memcanal notifies about: ``memcanal-service`` (source
``memcanal-service``), which creates decisions and records their
outcome, and the API (``memcanal-api``), where operators approve,
reject and roll back decisions.
"""

from memcanal.notifications import decisions
from memcanal.notifications import leases
from memcanal.notifications import notifier
from memcanal.notifications import transactional

# What watches the sessions' writes.
LISTENERS = decisions.LISTENERS + leases.LISTENERS


def init(conf, source):
    notifier.init(conf, source)
    if notifier.NOTIFIER is not None:
        transactional.install(LISTENERS)


def cleanup():
    transactional.uninstall(LISTENERS)
    notifier.cleanup()
