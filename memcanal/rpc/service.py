"""An oslo.service Service that serves RPC endpoints and runs timers.

The central service and the compute agent are both this: an RPC server
on their topic plus a few periodic jobs. Everything starts in ``start``,
after oslo.service has forked the worker, so no connection crosses a fork.
"""

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_service import service

from memcanal import rpc

LOG = logging.getLogger(__name__)


class RPCService(service.Service):
    """Serve ``endpoints`` on ``topic``/``server`` and run ``timers``.

    ``timers`` is a list of ``(interval_seconds, callable)``; a callable's
    exception is logged and the timer keeps running, so one failed report
    or periodic task does not stop the process's work. ``lifecycle``
    objects are started (``start()``) before the timers and stopped
    (``stop()``) after the RPC server: the service's job leases.
    """

    def __init__(self, topic, server, endpoints, timers=(),
                 transport_url=None, conf=None, lifecycle=()):
        super().__init__()
        self.topic = topic
        self.server_name = server
        self.endpoints = endpoints
        self.timers = list(timers)
        self.transport_url = transport_url
        self.conf = conf
        self.lifecycle = list(lifecycle)
        self.rpcserver = None

    def start(self):
        super().start()
        rpc.init(self.conf, url=self.transport_url)
        target = messaging.Target(topic=self.topic, server=self.server_name)
        self.rpcserver = rpc.get_server(target, self.endpoints)
        self.rpcserver.start()
        LOG.info('Serving %s on topic %s as %s', type(self).__name__,
                 self.topic, self.server_name)
        for part in self.lifecycle:
            part.start()
        for interval, callback in self.timers:
            self.tg.add_timer_args(interval, self._guarded, args=(callback,),
                                   stop_on_exception=False)

    @staticmethod
    def _guarded(callback):
        try:
            callback()
        except Exception:
            LOG.exception('Periodic job %s failed', callback.__qualname__)

    def stop(self, graceful=True):
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
            self.rpcserver = None
        super().stop(graceful=graceful)
        for part in self.lifecycle:
            part.stop()
