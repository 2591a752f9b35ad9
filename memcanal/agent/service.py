"""The memcanal-agent process: the manager behind an RPC server."""

from memcanal.agent import driver
from memcanal.agent import manager
from memcanal import prometheus
from memcanal import rpc
from memcanal.rpc import service as rpc_service


class AgentService(rpc_service.RPCService):
    """The RPC service, serving the manager's Prometheus metrics when
    ``[agent] metrics_port`` is set. The server starts in ``start``,
    like the RPC server: oslo.service forks the process that runs the
    manager after ``create``, and a server started before the fork
    would serve the parent's series, which never move."""

    metrics_server = None

    def start(self):
        super().start()
        options = self.conf.agent
        if options.metrics_port:
            self.metrics_server = prometheus.serve(
                self.manager.metrics.registry,
                options.metrics_listen_address, options.metrics_port)

    def stop(self, graceful=True):
        if self.metrics_server is not None:
            prometheus.stop(self.metrics_server)
            self.metrics_server = None
        super().stop(graceful=graceful)


def create(conf, host=None, transport_url=None):
    """The agent of ``host`` (default: [DEFAULT] host), ready to start."""
    host = host or conf.host
    hypervisor = driver.load(conf.agent.driver, conf, host)
    agent_manager = manager.AgentManager(conf, host, hypervisor)
    service = AgentService(
        rpc.AGENT_TOPIC, host, [agent_manager],
        timers=[(conf.agent.report_interval, agent_manager.report)],
        transport_url=transport_url, conf=conf)
    service.manager = agent_manager
    return service
