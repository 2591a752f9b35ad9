"""Versioned notification objects, in nova's and Watcher's style.

A notification is a NotificationBase: its priority, its EventType
(``memcanal.<object>.<action>[.<phase>]``), its NotificationPublisher
(``memcanal-service:<host>``) and a payload, an oslo.versionedobjects
object sent as its primitive: ``{"memcanal_object.name": ...,
"memcanal_object.version": ..., "memcanal_object.data": {...}}``, so a
consumer knows which version of which payload it reads. A payload's
VERSION is bumped with every change of its fields (a new field: minor;
a field removed or changed: major); the fingerprint test
(memcanal/tests/unit/notifications/test_objects.py) fails until it is.
Every payload has a sample in doc/notification_samples/, checked
against what the code emits.
"""

from oslo_versionedobjects import base
from oslo_versionedobjects import fields

PRIORITIES = ('audit', 'critical', 'debug', 'info', 'error', 'sample',
              'warn')


class NotificationRegistry(base.VersionedObjectRegistry):
    """memcanal's notification objects (none of them is stored)."""


class NotificationObject(base.VersionedObject):
    """Serialised under memcanal's namespace; made afresh for each
    notification, so no field counts as changed (nova drops the
    meaningless ``changes`` list the same way)."""

    OBJ_SERIAL_NAMESPACE = 'memcanal_object'
    OBJ_PROJECT_NAMESPACE = 'memcanal'

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.obj_reset_changes(recursive=False)


@NotificationRegistry.register
class EventType(NotificationObject):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'object': fields.StringField(),
        'action': fields.StringField(),
        'phase': fields.EnumField(['start', 'end', 'error'],
                                  nullable=True),
    }

    def to_event_type(self):
        """``memcanal.<object>.<action>[.<phase>]``."""
        parts = ['memcanal', self.object, self.action]
        if self.obj_attr_is_set('phase') and self.phase is not None:
            parts.append(self.phase)
        return '.'.join(parts)


@NotificationRegistry.register
class NotificationPublisher(NotificationObject):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'host': fields.StringField(),
        'source': fields.StringField(),
    }

    def publisher_id(self):
        """``<source>:<host>``, e.g. ``memcanal-service:ctl1``."""
        return '%s:%s' % (self.source, self.host)


@NotificationRegistry.register
class DecisionPayload(NotificationObject):
    """A decision as it entered a state, with who moved it and why."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(),
        'kind': fields.StringField(),
        'policy': fields.StringField(),
        'mode': fields.StringField(),
        'state': fields.StringField(),
        'previous_state': fields.StringField(nullable=True),
        'host_uuid': fields.UUIDField(),
        'host_name': fields.StringField(),
        # A migration's destination, a pooling decision's lender.
        'peer_host_uuid': fields.UUIDField(nullable=True),
        'peer_host_name': fields.StringField(nullable=True),
        'instance_uuids': fields.ListOfStringsField(),
        'user_id': fields.StringField(nullable=True),
        'project_id': fields.StringField(nullable=True),
        'reason': fields.StringField(nullable=True),
    }


@NotificationRegistry.register
class HostPayload(NotificationObject):
    """A compute host as memcanal sees it."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'uuid': fields.UUIDField(),
        'name': fields.StringField(),
        'state': fields.EnumField(['up', 'down']),
        'memory_total_bytes': fields.IntegerField(),
        'memory_reserved_bytes': fields.IntegerField(),
        'report_interval': fields.FloatField(nullable=True),
        'hypervisor_type': fields.StringField(nullable=True),
        'last_heartbeat_at': fields.DateTimeField(nullable=True),
    }


@NotificationRegistry.register
class LeasePayload(NotificationObject):
    """Memory a host's memory server lends to another host's VM (memory
    pooling)."""

    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'instance_uuid': fields.UUIDField(),
        # The pooling decision that made it.
        'decision_uuid': fields.UUIDField(),
        'lent_bytes': fields.IntegerField(),
        'memory_server_uuid': fields.UUIDField(),
        'lender_host_uuid': fields.UUIDField(),
        'lender_host_name': fields.StringField(),
        'borrower_host_uuid': fields.UUIDField(),
        'borrower_host_name': fields.StringField(),
    }


class NotificationBase(NotificationObject):
    """What is sent: ``payload`` with its priority, event type and
    publisher. Subclasses name the payload's class."""

    fields = {
        'priority': fields.EnumField(PRIORITIES),
        'event_type': fields.ObjectField('EventType'),
        'publisher': fields.ObjectField('NotificationPublisher'),
    }

    def emit(self, notifier):
        """Send it with ``notifier`` (memcanal.notifications.notifier:
        an oslo.messaging Notifier, or None when notifications are
        off)."""
        if notifier is None:
            return
        self.payload.obj_reset_changes(recursive=True)
        send = getattr(notifier.prepare(
            publisher_id=self.publisher.publisher_id()), self.priority)
        send({}, self.event_type.to_event_type(),
             self.payload.obj_to_primitive())


@NotificationRegistry.register
class DecisionNotification(NotificationBase):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = dict(NotificationBase.fields,
                  payload=fields.ObjectField('DecisionPayload'))


@NotificationRegistry.register
class HostNotification(NotificationBase):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = dict(NotificationBase.fields,
                  payload=fields.ObjectField('HostPayload'))


@NotificationRegistry.register
class LeaseNotification(NotificationBase):
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = dict(NotificationBase.fields,
                  payload=fields.ObjectField('LeasePayload'))
