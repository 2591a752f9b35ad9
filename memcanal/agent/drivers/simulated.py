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
    """The papers' workloads in turn, sized from the VM's memory.

    PRL's synthetic application in RWRW and in RRWW order (working set:
    its array), the Hcache Zipf file server (a skewed curve), and PRL
    section 2.4's write-all-then-work-on-a-part (where PML over-states).
    """
    kind = index % 4
    if kind == 0:
        return workloads.PrlSyntheticApp(max(1, total_pages // 64), 'RWRW',
                                         rng=rng)
    if kind == 1:
        return workloads.PrlSyntheticApp(max(1, total_pages // 32), 'RRWW',
                                         rng=rng)
    if kind == 2:
        # 1 MB files filling an eighth of the VM.
        files = max(1, total_pages * estimation.PAGE_SIZE // 8 // 2 ** 20)
        return workloads.FileServer('zipf', files=files, file_mb=1,
                                    write_ratio=0.1, rng=rng)
    return workloads.WriteThenWork(max(1, total_pages // 16),
                                   max(1, total_pages // 64))


class SimulatedVM:
    def __init__(self, host, index, memory_bytes, seed, interval_ns,
                 references_per_interval):
        self.uuid = instance_uuid(host, index)
        self.project_id = PROJECTS[index % len(PROJECTS)]
        self.allocated_bytes = memory_bytes
        self.target_bytes = None
        rng = np.random.default_rng(
            [seed, zlib.crc32(self.uuid.encode()), index])
        self.workload = _workload(index, memory_bytes // estimation.PAGE_SIZE,
                                  rng)
        # The VM's clock advances one report interval per collection.
        self.workload.reference_ns = max(
            1, interval_ns // references_per_interval)


class SimulatedDriver(driver.HypervisorDriver):
    """A host of ``[simulated] instances`` VMs, configured by [simulated]."""

    def __init__(self, conf, host):
        options = conf.simulated
        self.references_per_interval = options.references_per_interval
        self._host_info = driver.HostInfo(
            memory_total_bytes=options.host_memory_mb * 2 ** 20,
            memory_reserved_bytes=options.reserved_host_memory_mb * 2 ** 20)
        self._vms = {}
        interval_ns = int(conf.agent.report_interval * 1e9)
        for index in range(options.instances):
            vm = SimulatedVM(host, index, options.instance_memory_mb * 2 ** 20,
                             options.seed, interval_ns,
                             self.references_per_interval)
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
        trace = vm.workload.take(self.references_per_interval)
        return driver.Sample(
            page_size=estimation.PAGE_SIZE, trace=trace,
            guest_stats={'references': float(len(trace)),
                         'writes': float(trace.writes.sum())})

    def apply_memory_target(self, instance_uuid, target_bytes):
        with self._lock:
            self._vm(instance_uuid).target_bytes = target_bytes
