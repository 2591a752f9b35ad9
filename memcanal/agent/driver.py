"""The hypervisor-driver interface of the compute agent.

A driver knows one hypervisor: which VMs run, how much memory each has,
what their memory did since the last collection, and how to resize them.
The agent turns what a driver collects into estimates with
memcanal.estimation, the same code whatever the driver.
"""

import abc
import dataclasses

from stevedore import driver as stevedore_driver

from memcanal.estimation import traces
from memcanal import exception

DRIVER_NAMESPACE = 'memcanal.agent.drivers'


@dataclasses.dataclass(frozen=True)
class HostInfo:
    memory_total_bytes: int
    memory_reserved_bytes: int


@dataclasses.dataclass(frozen=True)
class InstanceInfo:
    uuid: str
    project_id: str
    allocated_bytes: int
    target_bytes: int | None


@dataclasses.dataclass(frozen=True)
class Sample:
    """What one VM's memory did during one collection interval.

    ``trace`` is the guest-page references the hypervisor saw, a
    memcanal.estimation.traces.Trace (None where the driver cannot observe
    references); ``guest_stats`` are the guest's own counters, by name.
    """

    page_size: int
    trace: traces.Trace | None
    guest_stats: dict


class HypervisorDriver(abc.ABC):

    @abc.abstractmethod
    def host_info(self):
        """Return this host's HostInfo."""

    @abc.abstractmethod
    def list_instances(self):
        """Return an InstanceInfo for every VM on this host."""

    @abc.abstractmethod
    def collect(self, instance_uuid):
        """Return the Sample of one VM since the previous call."""

    @abc.abstractmethod
    def apply_memory_target(self, instance_uuid, target_bytes):
        """Resize a VM's memory to ``target_bytes``."""


def load(name, conf, host):
    """The driver installed under ``name`` in DRIVER_NAMESPACE."""
    try:
        manager = stevedore_driver.DriverManager(
            DRIVER_NAMESPACE, name, invoke_on_load=True,
            invoke_args=(conf, host))
    except stevedore_driver.NoMatches:
        raise exception.DriverNotFound(name=name)
    return manager.driver
