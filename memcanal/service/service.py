"""The memcanal-service process: the manager behind an RPC server."""

from memcanal import rpc
from memcanal.rpc import service as rpc_service
from memcanal.service import manager


def create(conf, transport_url=None):
    """The service, ready for oslo.service to launch or for start()."""
    service_manager = manager.ServiceManager(conf)
    service = rpc_service.RPCService(
        rpc.SERVICE_TOPIC, conf.host, [service_manager],
        timers=service_manager.periodic_jobs(),
        transport_url=transport_url, conf=conf)
    service.manager = service_manager
    return service
