"""The memcanal-service process: the manager behind an RPC server."""

from memcanal import rpc
from memcanal.rpc import service as rpc_service
from memcanal.service import manager


class CentralService(rpc_service.RPCService):
    """The RPC service, serving the manager's Prometheus metrics when
    ``[service] metrics_port`` is set. They start in ``start``, like the
    RPC server: oslo.service forks the process that runs the manager
    after ``create``, and a server started before the fork would serve
    the parent's counters, which never move."""

    metrics_server = None

    def start(self):
        super().start()
        options = self.conf.service
        if options.metrics_port:
            self.metrics_server = self.manager.metrics.serve(
                options.metrics_listen_address, options.metrics_port)

    def stop(self, graceful=True):
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
            self.metrics_server = None
        super().stop(graceful=graceful)


def create(conf, transport_url=None):
    """The service, ready for oslo.service to launch or for start()."""
    service_manager = manager.ServiceManager(conf)
    service = CentralService(
        rpc.SERVICE_TOPIC, conf.host, [service_manager],
        timers=service_manager.periodic_jobs(),
        transport_url=transport_url, conf=conf)
    service.manager = service_manager
    return service
