"""The memcanal-agent process: the manager behind an RPC server."""

from memcanal.agent import driver
from memcanal.agent import manager
from memcanal import prometheus
from memcanal import rpc
from memcanal.rpc import service as rpc_service


class AgentService(prometheus.ServedMetrics, rpc_service.RPCService):
    """The RPC service, serving the manager's Prometheus metrics when
    ``[agent] metrics_port`` is set."""

    metrics_group = 'agent'


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
