"""Notification objects: event types, publisher ids, payload versions."""

from oslo_versionedobjects import fixture

from memcanal.notifications import notifier
from memcanal.notifications import objects

# Fingerprints of every notification object's fields and methods. A test
# failure here means an object changed: bump its VERSION (new field:
# minor; removed or changed: major), update its sample in
# doc/notification_samples/, then its fingerprint here.
EXPECTED = {
    'DecisionNotification': '1.0-4599a105ce4e246bc535b7447556a455',
    'DecisionPayload': '1.0-b18a6ca082d2bcefc0952ddbb56a4c47',
    'EventType': '1.0-dcf91edd07f9483df8770001f7b7e4c8',
    'HostNotification': '1.0-4599a105ce4e246bc535b7447556a455',
    'HostPayload': '1.0-dfc44dde40c40c52c50222b54afc6823',
    'LeaseNotification': '1.0-4599a105ce4e246bc535b7447556a455',
    'LeasePayload': '1.0-15f3199c9ad2ec2052cdb4274dbd8633',
    'NotificationPublisher': '1.0-578ee5fea2922ff32e8917621f140857',
}


def test_payload_versions_are_pinned():
    checker = fixture.ObjectVersionChecker(
        objects.NotificationRegistry.obj_classes())
    expected, actual = checker.test_hashes(EXPECTED)
    assert expected == actual, (
        'Notification objects changed; bump their versions: %s' % actual)


def test_event_types_and_publisher_id():
    assert objects.EventType(object='decision', action='create',
                             phase=None).to_event_type() == (
        'memcanal.decision.create')
    assert objects.EventType(object='decision', action='apply',
                             phase='end').to_event_type() == (
        'memcanal.decision.apply.end')
    assert objects.EventType(object='host',
                             action='update').to_event_type() == (
        'memcanal.host.update')
    assert objects.NotificationPublisher(
        host='ctl1', source='memcanal-service').publisher_id() == (
        'memcanal-service:ctl1')


def test_off_by_default_sends_nothing(conf):
    notifier.init(conf, 'memcanal-service')
    assert notifier.NOTIFIER is None


def test_format_none_sends_nothing(notified, conf):
    notifier.cleanup()
    conf.set_override('notification_format', 'none', 'notifications')
    notifier.init(conf, 'memcanal-service')
    assert notifier.NOTIFIER is None
