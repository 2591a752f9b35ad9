"""This process's oslo.messaging Notifier, or None.

None until ``init``, and when ``[notifications] notification_format``
is ``none`` or ``[oslo_messaging_notifications] driver`` is unset: then
nothing is made or sent.
"""

import oslo_messaging as messaging

from memcanal.notifications import objects

NOTIFIER = None
# objects.NotificationPublisher of this process.
PUBLISHER = None


def init(conf, source):
    """Make this process's notifier from ``conf``; a no-op when
    notifications are off. ``source``: the publisher id's first part."""
    global NOTIFIER, PUBLISHER
    cleanup()
    if conf.notifications.notification_format == 'none':
        return
    # Registers [oslo_messaging_notifications]; a transport connects
    # only when it first sends.
    transport = messaging.get_notification_transport(conf)
    if not set(conf.oslo_messaging_notifications.driver) - {'noop'}:
        transport.cleanup()
        return
    notifier = messaging.Notifier(
        transport, topics=conf.notifications.versioned_notifications_topics)
    NOTIFIER = notifier
    PUBLISHER = objects.NotificationPublisher(host=conf.host, source=source)


def cleanup():
    global NOTIFIER, PUBLISHER
    if NOTIFIER is not None:
        NOTIFIER.transport.cleanup()
    NOTIFIER = PUBLISHER = None


def emit(notification_class, event_type, payload, priority='info'):
    """Send ``payload`` as a ``notification_class`` of ``event_type`` (an
    objects.EventType); nothing when notifications are off."""
    if NOTIFIER is None:
        return
    notification_class(priority=priority, event_type=event_type,
                       publisher=PUBLISHER, payload=payload).emit(NOTIFIER)
