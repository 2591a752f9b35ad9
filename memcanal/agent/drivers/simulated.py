"""A simulated hypervisor: VMs whose memory behaviour is a workload generator.

memcanal-aio, the tests and the benchmarks run the real agent on this
driver. VMs are named deterministically from the host name, so an agent
that restarts finds the same VMs, as it would on a real hypervisor.
"""

import threading
import uuid
import zlib

import numpy as np

from memcanal.agent import driver
from memcanal import estimation
from memcanal.estimation import workloads
from memcanal import exception

# Fixed namespace so the same host and index always give the same uuid.
_NAMESPACE = uuid.UUID('6d656d63-616e-616c-2073-696d756c6174')
PROJECTS = ('simulated-project-a', 'simulated-project-b')


def instance_uuid(host, index):
    return str(uuid.uuid5(_NAMESPACE, '%s/%d' % (host, index)))


def _workload(index, total_pages, rng):
    """Alternate hot/cold VMs of different hot-set sizes with scanning VMs."""
    if index % 3 == 2:
        return workloads.LoopWorkload(loop_pages=max(1, total_pages // 16))
    hot_fraction = (0.02, 0.05)[index % 2]
    return workloads.HotColdWorkload(
        total_pages, max(1, int(total_pages * hot_fraction)),
        hot_probability=0.9, rng=rng)


class SimulatedVM:
    def __init__(self, host, index, memory_bytes, seed):
        self.uuid = instance_uuid(host, index)
        self.project_id = PROJECTS[index % len(PROJECTS)]
        self.allocated_bytes = memory_bytes
        self.target_bytes = None
        rng = np.random.default_rng(
            [seed, zlib.crc32(self.uuid.encode()), index])
        self.workload = _workload(index, memory_bytes // estimation.PAGE_SIZE,
                                  rng)


class SimulatedDriver(driver.HypervisorDriver):
    """A host of ``[simulated] instances`` VMs, configured by [simulated]."""

    def __init__(self, conf, host):
        options = conf.simulated
        self.references_per_interval = options.references_per_interval
        self._host_info = driver.HostInfo(
            memory_total_bytes=options.host_memory_mb * 2 ** 20,
            memory_reserved_bytes=options.reserved_host_memory_mb * 2 ** 20)
        self._vms = {}
        for index in range(options.instances):
            vm = SimulatedVM(host, index, options.instance_memory_mb * 2 ** 20,
                             options.seed)
            self._vms[vm.uuid] = vm
        self._lock = threading.Lock()

    def host_info(self):
        return self._host_info

    def list_instances(self):
        with self._lock:
            return [driver.InstanceInfo(vm.uuid, vm.project_id,
                                        vm.allocated_bytes, vm.target_bytes)
                    for vm in self._vms.values()]

    def _vm(self, instance_uuid):
        try:
            return self._vms[instance_uuid]
        except KeyError:
            raise exception.InstanceNotFound(uuid=instance_uuid)

    def collect(self, instance_uuid):
        vm = self._vm(instance_uuid)
        references = vm.workload.references(self.references_per_interval)
        return driver.Sample(
            page_size=estimation.PAGE_SIZE, references=references,
            guest_stats={'references': float(references.size)})

    def apply_memory_target(self, instance_uuid, target_bytes):
        with self._lock:
            self._vm(instance_uuid).target_bytes = target_bytes
