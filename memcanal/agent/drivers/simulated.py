"""A simulated hypervisor: VMs whose memory behaviour is a workload generator.

memcanal-aio, the tests and the benchmarks run the real agent on this
driver. VMs are named deterministically from the host name, so an agent
that restarts finds the same VMs, as it would on a real hypervisor.

Each VM's memory is a guest page cache (memcanal.estimation.guest, the
model #4 validated) over its current memory: the pages it references are
storage blocks (file or swap), so a new memory target changes its misses
for real. Resizes go through a balloon or memory hotplug
(memcanal.agent.drivers.actuators). Each Sample's guest statistics come
from that model:

- ``accesses``, ``misses``: references and page-cache misses this
  interval; ``major_faults``: the misses that read storage;
- ``memory_bytes``: the guest's memory now;
- ``used_bytes``: U-tube's memory in active use: the kernel
  (``[simulated] guest_kernel_mb``) plus the pages referenced this
  interval that are resident at its end;
- ``swap_bytes``: pages the workload wrote that are not resident (its
  anonymous memory paged out);
- ``committed_bytes``: the kernel plus every page ever written, an
  estimate of Committed_AS.

In tracing mode a VM's references also run through a second page cache
above a hypervisor exclusive cache (memcanal.estimation.hcache), and
each Sample carries what the hypervisor saw.
"""

import threading
import uuid
import zlib

import numpy as np

from memcanal.agent import driver
from memcanal.agent.drivers import actuators
from memcanal import estimation
from memcanal.estimation import guest as guest_model
from memcanal.estimation import hcache
from memcanal.estimation import workloads
from memcanal import exception

# Fixed namespace so the same host and index always give the same uuid.
_NAMESPACE = uuid.UUID('6d656d63-616e-616c-2073-696d756c6174')
PROJECTS = ('simulated-project-a', 'simulated-project-b')


def instance_uuid(host, index):
    return str(uuid.uuid5(_NAMESPACE, '%s/%d' % (host, index)))


def _workload(index, total_pages, rng, files_ratio=0.125):
    """The papers' workloads in turn, sized from the VM's memory.

    PRL's synthetic application in RWRW and in RRWW order (working set:
    its array), the Hcache Zipf file server over files of ``files_ratio``
    times the VM's memory (a skewed curve; above 1, a VM short of memory
    that the policies can help), and PRL section 2.4's
    write-all-then-work-on-a-part (where PML over-states).
    """
    kind = index % 4
    if kind == 0:
        return workloads.PrlSyntheticApp(max(1, total_pages // 64), 'RWRW',
                                         rng=rng)
    if kind == 1:
        return workloads.PrlSyntheticApp(max(1, total_pages // 32), 'RRWW',
                                         rng=rng)
    if kind == 2:
        # 1 MB files.
        files = max(1, int(files_ratio * total_pages * estimation.PAGE_SIZE
                           // 2 ** 20))
        return workloads.FileServer('zipf', files=files, file_mb=1,
                                    write_ratio=0.1, rng=rng)
    return workloads.WriteThenWork(max(1, total_pages // 16),
                                   max(1, total_pages // 64))


class SimulatedVM:
    def __init__(self, host, index, memory_bytes, seed, interval_ns,
                 references_per_interval, kernel_bytes=0, files_ratio=0.125):
        self.uuid = instance_uuid(host, index)
        self.project_id = PROJECTS[index % len(PROJECTS)]
        self.allocated_bytes = memory_bytes
        self.target_bytes = None
        self.kernel_bytes = kernel_bytes
        self.storage = hcache.Storage()
        self.guest = guest_model.GuestPageCache(
            memory_bytes // estimation.PAGE_SIZE,
            hcache.DirectIo(self.storage))
        self._written = np.zeros(0, bool)
        self._actuators = {}
        rng = np.random.default_rng(
            [seed, zlib.crc32(self.uuid.encode()), index])
        self.workload = _workload(index, memory_bytes // estimation.PAGE_SIZE,
                                  rng, files_ratio)
        # The VM's clock advances one report interval per collection.
        self.workload.reference_ns = max(
            1, interval_ns // references_per_interval)
        # When each page was last referenced (-1: never), in references
        # since boot: the VM's LRU order, to fill a page cache model.
        self._last_use = np.full(memory_bytes // estimation.PAGE_SIZE, -1,
                                 np.int64)
        self._references = 0
        self._tracing = None

    def record(self, trace):
        """Note the pages ``trace`` referenced, the last use of each."""
        if self._last_use.size <= trace.pages.max(initial=-1):
            self._last_use = np.concatenate([self._last_use, np.full(
                int(trace.pages.max()) + 1 - self._last_use.size, -1,
                np.int64)])
        reversed_pages = trace.pages[::-1]
        pages, from_end = np.unique(reversed_pages, return_index=True)
        self._last_use[pages] = self._references + len(trace) - 1 - from_end
        self._references += len(trace)

    @property
    def memory_bytes(self):
        return self.guest.capacity * estimation.PAGE_SIZE

    def run_guest(self, trace):
        """Run ``trace`` through the VM's memory; its guest statistics."""
        before = (self.guest.accesses, self.guest.misses, self.storage.reads)
        self.guest.run(trace.pages, trace.writes)
        written = trace.pages[trace.writes]
        if written.size and written.max() >= self._written.size:
            self._written = np.concatenate([self._written, np.zeros(
                int(written.max()) + 1 - self._written.size, bool)])
        self._written[written] = True
        blocks = self.guest.resident_blocks()
        resident = np.zeros(max(self._written.size, int(
            trace.pages.max(initial=-1)) + 1, int(
                blocks.max(initial=-1)) + 1), bool)
        resident[blocks] = True
        referenced = np.unique(trace.pages)
        page = estimation.PAGE_SIZE
        used = self.kernel_bytes + int(resident[referenced].sum()) * page
        written_pages = np.flatnonzero(self._written)
        return {
            'accesses': float(self.guest.accesses - before[0]),
            'misses': float(self.guest.misses - before[1]),
            'major_faults': float(self.storage.reads - before[2]),
            'memory_bytes': float(self.memory_bytes),
            'used_bytes': float(min(used, self.memory_bytes)),
            'swap_bytes': float(int((~resident[written_pages]).sum()) * page),
            'committed_bytes': float(self.kernel_bytes
                                     + written_pages.size * page),
        }

    def resize(self, target_bytes, mechanism, loaded):
        """Resize with ``mechanism``; returns a driver.Resize."""
        if mechanism not in actuators.MECHANISMS:
            raise exception.ResizeFailed(
                uuid=self.uuid, reason='unknown mechanism %r' % (mechanism,))
        if not isinstance(target_bytes, int) or (
                target_bytes < estimation.PAGE_SIZE):
            raise exception.ResizeFailed(
                uuid=self.uuid, reason='a target is a whole number of bytes '
                'of at least one page')
        actuator = self._actuators.get(mechanism)
        if actuator is None:
            actuator = self._actuators[mechanism] = actuators.MECHANISMS[
                mechanism](self.allocated_bytes)
        previous = self.memory_bytes
        seconds = actuator.resize(self.uuid, previous, target_bytes, loaded)
        self.guest.resize(target_bytes // estimation.PAGE_SIZE)
        self.target_bytes = target_bytes
        return driver.Resize(mechanism, previous, target_bytes, seconds)

    def pages_by_last_use(self):
        used = np.flatnonzero(self._last_use >= 0)
        return used[np.argsort(self._last_use[used], kind='stable')]

    def start_tracing(self, cache_bytes, write_policy):
        """Lu and Shen's Fig. 6: the VM's memory as it was (every page it
        used, least recent first, through a page cache of its size), then
        ``cache_bytes`` of it handed to a hypervisor cache, into which the
        VM evicts its least recently used pages."""
        memory_pages = self.guest.capacity
        cache_pages = min(cache_bytes // estimation.PAGE_SIZE,
                          memory_pages - 1)
        ghost = hcache.GhostEvents()
        hypervisor = hcache.HypervisorCache(
            hcache.Storage(), cache_pages, write_policy, ghost=ghost)
        guest = guest_model.GuestPageCache(memory_pages, hypervisor)
        pages = self.pages_by_last_use()
        guest.run(pages, np.zeros(pages.size, bool))
        guest.resize(memory_pages - cache_pages)
        self._tracing = (guest, ghost)

    def stop_tracing(self):
        self._tracing = None

    def cache_trace(self, trace):
        """What the hypervisor cache saw of ``trace``, or None when the VM
        is not being traced."""
        if self._tracing is None:
            return None
        guest, ghost = self._tracing
        guest.run(trace.pages, trace.writes)
        blocks, reads = ghost.arrays()
        ghost.clear()
        return driver.CacheTrace(blocks, reads, guest.capacity, len(trace))


class SimulatedDriver(driver.HypervisorDriver):
    """A host of ``[simulated] instances`` VMs, configured by [simulated]."""

    def __init__(self, conf, host):
        options = conf.simulated
        self.references_per_interval = options.references_per_interval
        self.write_policy = conf.hcache.write_policy
        self._failing = {instance_uuid(host, int(index))
                         for index in options.fail_resize_instances}
        self._host_info = driver.HostInfo(
            memory_total_bytes=options.host_memory_mb * 2 ** 20,
            memory_reserved_bytes=options.reserved_host_memory_mb * 2 ** 20)
        self._vms = {}
        interval_ns = int(conf.agent.report_interval * 1e9)
        for index in range(options.instances):
            vm = SimulatedVM(host, index, options.instance_memory_mb * 2 ** 20,
                             options.seed, interval_ns,
                             self.references_per_interval,
                             options.guest_kernel_mb * 2 ** 20,
                             options.file_server_memory_ratio)
            self._vms[vm.uuid] = vm
        self._lock = threading.Lock()
        self._last_used = {}

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
        vm.record(trace)
        with self._lock:
            stats = vm.run_guest(trace)
            self._last_used[vm.uuid] = stats['used_bytes']
        return driver.Sample(
            page_size=estimation.PAGE_SIZE, trace=trace,
            guest_stats=dict(stats, references=float(len(trace)),
                             writes=float(trace.writes.sum())),
            cache_trace=vm.cache_trace(trace))

    def start_tracing(self, instance_uuid, cache_bytes):
        self._vm(instance_uuid).start_tracing(cache_bytes, self.write_policy)

    def stop_tracing(self, instance_uuid):
        self._vm(instance_uuid).stop_tracing()

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon'):
        with self._lock:
            vm = self._vm(instance_uuid)
            if vm.uuid in self._failing:
                raise exception.ResizeFailed(
                    uuid=vm.uuid, reason='[simulated] fail_resize_instances')
            # U-tube: removal is slower from a VM using most of its memory.
            loaded = self._last_used.get(vm.uuid, 0) >= 0.9 * vm.memory_bytes
            return vm.resize(target_bytes, mechanism, loaded)
