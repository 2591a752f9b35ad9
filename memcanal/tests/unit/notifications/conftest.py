import oslo_messaging as messaging
from oslo_messaging.notify import _impl_test
import pytest

from memcanal import notifications


@pytest.fixture
def notified(conf):
    """``sent()``: the notifications this process sent so far, as
    oslo.messaging's test driver keeps them: [message dict] (priority,
    event_type, publisher_id, payload, ...); publisher host ``ctl1``."""
    # Registers [oslo_messaging_notifications] on CONF.
    messaging.get_notification_transport(conf, url='fake:/').cleanup()
    conf.set_override('transport_url', 'fake:/')
    conf.set_override('driver', ['test'], 'oslo_messaging_notifications')
    conf.set_override('host', 'ctl1')
    _impl_test.reset()
    notifications.init(conf, 'memcanal-service')
    yield lambda: [message for _ctxt, message, _priority, _retry
                   in _impl_test.NOTIFICATIONS]
    notifications.cleanup()
    _impl_test.reset()
