"""The memcanal-service process: the manager behind an RPC server."""

from memcanal import notifications
from memcanal import prometheus
from memcanal import rpc
from memcanal.rpc import service as rpc_service
from memcanal.service import manager


# The publisher id's source: memcanal-service:<host>.
SOURCE = 'memcanal-service'


class CentralService(prometheus.ServedMetrics, rpc_service.RPCService):
    """The RPC service, with its versioned notifier
    (memcanal.notifications) and, when ``[service] metrics_port`` is
    set, serving the manager's Prometheus metrics
    (memcanal.prometheus.ServedMetrics). Both start in ``start``, like
    the RPC server, in the process oslo.service forks to run the
    manager."""

    metrics_group = 'service'

    def start(self):
        # Before the timers start: their first run may notify.
        notifications.init(self.conf, SOURCE)
        super().start()

    def stop(self, graceful=True):
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
