"""The memcanal-service process: the manager behind an RPC server."""

from memcanal import notifications
from memcanal import prometheus
from memcanal import rpc
from memcanal.rpc import service as rpc_service
from memcanal.service import manager


# The publisher id's source: memcanal-service:<host>.
SOURCE = 'memcanal-service'


class CentralService(rpc_service.RPCService):
    """The RPC service, with its versioned notifier
    (memcanal.notifications) and, when ``[service] metrics_port`` is
    set, serving the manager's Prometheus metrics. Both start in
    ``start``, like the RPC server: oslo.service forks the process that
    runs the manager after ``create``, and a server started before the
    fork would serve the parent's counters, which never move."""

    metrics_server = None

    def start(self):
        # Before the timers start: their first run may notify.
        notifications.init(self.conf, SOURCE)
        super().start()
        options = self.conf.service
        if options.metrics_port:
            self.metrics_server = self.manager.metrics.serve(
                options.metrics_listen_address, options.metrics_port)

    def stop(self, graceful=True):
        if self.metrics_server is not None:
            prometheus.stop(self.metrics_server)
            self.metrics_server = None
        super().stop(graceful=graceful)
        notifications.cleanup()


def create(conf, transport_url=None):
    """The service, ready for oslo.service to launch or for start()."""
    service_manager = manager.ServiceManager(conf)
    service = CentralService(
        rpc.SERVICE_TOPIC, conf.host, [service_manager],
        timers=service_manager.timers(), transport_url=transport_url,
        conf=conf, lifecycle=[service_manager.leases])
    service.manager = service_manager
    return service
