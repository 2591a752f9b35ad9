"""A simulated hypervisor: VMs whose memory behaviour is a workload generator.

memcanal-aio, the tests and the benchmarks run the real agent on this
driver. VMs are named deterministically from the host name, so an agent
that restarts finds the same VMs, as it would on a real hypervisor.

Each VM's memory is one guest page cache (memcanal.estimation.guest, the
model #4 validated) over its current memory, doing I/O to its own
storage: the pages it references are storage blocks (file or swap), so a
new memory target changes its misses for real. Resizes go through a
balloon or memory hotplug (memcanal.agent.drivers.actuators), with
U-tube's semantics and latencies. Each Sample's guest statistics come
from that model (floats; counts are per collection interval):

- ``references``, ``writes``: the references the workload made, and how
  many were writes;
- ``accesses``: the references the guest's page cache served;
- ``misses``: those that missed the VM's memory (while the VM is
  traced, a miss of its page cache served by the hypervisor cache its
  memory was lent to is not one: the VM still has that memory);
- ``major_faults``: the misses that read the storage device (while the
  VM is traced, a read the hypervisor cache serves is not one);
- ``tracing_refills``: the misses that read again a block the last
  tracing window's cache held when it ended: the window gives its memory
  back empty, and the VM refills it for several intervals, the next
  window included. Misses a VM that is not traced would not have (the
  hypervisor, which keeps the P2S tables, counts them): as many of
  those blocks as the VM's free memory has room for, the most recently
  used; a VM never traced would have evicted the others by now;
- ``memory_bytes``: the VM's memory now, including what a tracing
  window lent to the hypervisor cache;
- ``used_bytes``: U-tube's memory "actively used": the guest kernel
  (``[simulated] guest_kernel_mb``) plus the distinct pages referenced
  in the last ACTIVE_INTERVALS intervals that are still in memory at
  this one's end, at most ``memory_bytes``. Linux's active lists age
  pages over more than one look, and a single interval's sample of a
  large footprint misses pages the program still holds;
- ``swap_bytes``: the pages the workload has written that are not in
  memory: its anonymous memory paged out;
- ``committed_bytes``: the guest kernel plus every distinct page the
  workload wrote and still holds (``Workload.allocated_pages``: a
  program that exits frees its memory), an estimate of Committed_AS.

In tracing mode (Lu and Shen's Fig. 6) the same guest gives
``cache_bytes`` of its memory to a hypervisor exclusive cache
(memcanal.estimation.hcache) below it: its least recently used pages go
into the cache, and each Sample carries what the hypervisor saw. The
cache's list starts with what the hypervisor saw leave the VM's memory
before (the guest's evictions, the last window's cache) and the VM has
not read again, oldest first: the curve then places those reads where a
VM never traced has them, at or above its memory, rather than at misses
of every size.

Paging (actuators.Pager, TMemCanal) keeps a VM's memory as the guest
sees it and its statistics as they are, and sets how much of it stays
resident on the host: the workload's page references are the VM's
guest-physical pages (as the agent's emulated logs take them), a
reference to a page paged out is a fault, and each Sample of a paged VM
carries a ``paging_trace`` and two more statistics:
``paging_faults``, the pager's faults (fewer than the trace's reads,
which count the first use of a prefetched page too), and
``paging_fault_seconds``, the time its vCPUs waited for them. The
host's memory in use counts the resident memory of paged VMs.

Every VM's pager samples its accesses as memcanal-pager samples a real
guest's ([sampling] options; simulated_sampling): each Sample carries
the sampling intervals that ended in it (``accesses``), from which the
agent reports the "sampled" working set and curve, and the pager's
cold-page detector learns from them alone, paged or not.
"""

import json
import numbers
import os
import threading
import time
import uuid
import weakref
import zlib

import numpy as np

from memcanal.agent import driver
from memcanal.agent.drivers import actuators
from memcanal.agent.drivers import simulated_io
from memcanal.agent.drivers import simulated_sampling
from memcanal import estimation
from memcanal.estimation import guest as guest_model
from memcanal.estimation import hcache
from memcanal.estimation import workloads
from memcanal import exception

# Fixed namespace so the same host and index always give the same uuid.
_NAMESPACE = uuid.UUID('6d656d63-616e-616c-2073-696d756c6174')
PROJECTS = ('simulated-project-a', 'simulated-project-b')
ACTIVE_INTERVALS = 3
"""Intervals over which a page referenced counts as in active use."""
LOADED_USE = 0.9
"""U-tube's bound on a guest's memory utilization (section 3.3): a guest
using this fraction of its memory is heavily loaded."""


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
    """One VM: a workload generator over a guest page cache.

    ``resize`` and ``run_guest`` are what the driver and the benchmarks
    use; the driver serializes them.
    """

    def __init__(self, host, index, memory_bytes, seed, interval_ns,
                 references_per_interval, kernel_bytes=0, files_ratio=0.125,
                 paging_scans=4, paging_pool_bytes=0, sampling=None):
        self.uuid = instance_uuid(host, index)
        self.project_id = PROJECTS[index % len(PROJECTS)]
        self.allocated_bytes = memory_bytes
        # Named as a flavor of its memory would be.
        self.flavor = 'sim.%dmb' % (memory_bytes // 2 ** 20)
        self.target_bytes = None
        self.kernel_bytes = kernel_bytes
        self.storage = hcache.Storage()
        self._io = simulated_io.MappedIo(
            self.storage, self._free_pages,
            memory_bytes // estimation.PAGE_SIZE)
        self.guest = guest_model.GuestPageCache(
            memory_bytes // estimation.PAGE_SIZE, self._io)
        # The hypervisor cache of a tracing window, or None.
        self._tracing = None
        # Which blocks the workload has ever written, by block.
        self._written = np.zeros(0, bool)
        # The last interval each block was referenced in (-1: never).
        self._last_interval = np.full(0, -1, np.int64)
        self._intervals = 0
        self.used_bytes = 0
        self._actuators = {}
        # Its pager's sampling (simulated_sampling.Settings), or None.
        self.sampling = sampling
        self.pager = actuators.Pager(
            memory_bytes // estimation.PAGE_SIZE, interval_ns / 1e9,
            paging_scans, paging_pool_bytes // estimation.PAGE_SIZE,
            uuid=self.uuid, sampling_settings=sampling)
        self._paged_accesses = 0
        rng = np.random.default_rng(
            [seed, zlib.crc32(self.uuid.encode()), index])
        self.workload = _workload(index, memory_bytes // estimation.PAGE_SIZE,
                                  rng, files_ratio)
        # The VM's clock advances one report interval per collection.
        self.workload.reference_ns = max(
            1, interval_ns // references_per_interval)

    @property
    def memory_bytes(self):
        pages = self.guest.capacity
        if self._tracing is not None:
            pages += self._tracing.capacity
        return pages * estimation.PAGE_SIZE

    def _free_pages(self):
        """Pages of the VM's memory that hold no block: its guest's and,
        while traced, its hypervisor cache's."""
        free = self.guest.free_pages
        if self._tracing is not None:
            free += self._tracing.capacity - len(self._tracing.queue)
        return free

    @property
    def resident_bytes(self):
        """Memory resident on the host while paged; None when not."""
        if not self.pager.paged:
            return None
        return min(self.memory_bytes,
                   self.pager.resident_pages * estimation.PAGE_SIZE)

    @property
    def paged_bytes(self):
        return (self.pager.pages - self.pager.resident_pages) * (
            estimation.PAGE_SIZE)

    @property
    def loaded(self):
        """Whether the guest used LOADED_USE of its memory in the last
        interval: removing memory from it is slower (U-tube Fig. 5)."""
        return self.used_bytes >= LOADED_USE * self.memory_bytes

    def _in_memory(self, blocks, guest_blocks):
        """Which of ``blocks`` the VM's memory holds: its page cache and,
        while traced, the hypervisor cache its memory was lent to."""
        held = np.isin(blocks, guest_blocks)
        if self._tracing is not None:
            queue = self._tracing.queue
            held |= np.fromiter(
                (queue.lookup(block) is not None for block in blocks.tolist()),
                bool, blocks.size)
        return held

    def run_guest(self, trace):
        """Run ``trace`` through the VM's memory; its guest statistics."""
        before = (self.guest.accesses, self.guest.misses, self.storage.reads,
                  self._lent_hits(), self._io.refills)
        self.guest.run(trace.pages, trace.writes)
        written = trace.pages[trace.writes]
        if written.size and written.max() >= self._written.size:
            self._written = np.concatenate([self._written, np.zeros(
                int(written.max()) + 1 - self._written.size, bool)])
        self._written[written] = True
        allocated = self.workload.allocated_pages
        if allocated is not None:
            # A program that exits frees what it wrote: it is no longer
            # committed nor in swap.
            self._written[self.workload.base_page + allocated:] = False
        self._mark_referenced(trace.pages)
        self._paged_accesses = self.pager.run(trace.pages, trace.writes,
                                              trace.times_ns())
        guest_blocks = self.guest.resident_blocks()
        referenced = np.flatnonzero(
            self._last_interval > self._intervals - ACTIVE_INTERVALS)
        written_blocks = np.flatnonzero(self._written)
        page = estimation.PAGE_SIZE
        memory = self.memory_bytes
        self.used_bytes = min(memory, self.kernel_bytes + page * int(
            self._in_memory(referenced, guest_blocks).sum()))
        paged_out = written_blocks.size - int(
            self._in_memory(written_blocks, guest_blocks).sum())
        return {
            'accesses': float(self.guest.accesses - before[0]),
            'misses': float(self.guest.misses - before[1]
                            - (self._lent_hits() - before[3])),
            'major_faults': float(self.storage.reads - before[2]),
            'tracing_refills': float(self._io.refills - before[4]),
            'memory_bytes': float(memory),
            'used_bytes': float(self.used_bytes),
            'swap_bytes': float(paged_out * page),
            'committed_bytes': float(self.kernel_bytes
                                     + written_blocks.size * page),
        }

    def _lent_hits(self):
        """Reads the memory lent to a hypervisor cache served so far."""
        return 0 if self._tracing is None else self._tracing.read_hits

    def _mark_referenced(self, pages):
        self._intervals += 1
        if pages.size and pages.max() >= self._last_interval.size:
            self._last_interval = np.concatenate([
                self._last_interval, np.full(
                    int(pages.max()) + 1 - self._last_interval.size, -1,
                    np.int64)])
        self._last_interval[pages] = self._intervals

    def _actuator(self, mechanism):
        if mechanism not in self._actuators:
            self._actuators[mechanism] = (
                actuators.Balloon(self.allocated_bytes, uuid=self.uuid)
                if mechanism == 'balloon'
                else actuators.Hotplug(self.allocated_bytes))
        return self._actuators[mechanism]

    def resize(self, target_bytes, mechanism, loaded, stores=()):
        """Resize to ``target_bytes`` (whole pages of it) with
        ``mechanism``; a driver.Resize, or ResizeFailed and no change.
        Paging keeps the memory and sets what stays resident."""
        if mechanism not in driver.MECHANISMS:
            raise exception.ResizeFailed(
                uuid=self.uuid, reason='unknown mechanism %r' % (mechanism,))
        if (not isinstance(target_bytes, numbers.Integral)
                or isinstance(target_bytes, bool)
                or target_bytes < estimation.PAGE_SIZE):
            raise exception.ResizeFailed(
                uuid=self.uuid, reason='a target is a whole number of bytes '
                'of at least one page, not %r' % (target_bytes,))
        target_bytes = int(target_bytes)
        if mechanism == 'paging':
            previous = self.resident_bytes or self.memory_bytes
            seconds = self.pager.resize(target_bytes, stores)
            return driver.Resize(mechanism, previous, target_bytes, seconds)
        pages = target_bytes // estimation.PAGE_SIZE
        previous = self.memory_bytes
        seconds = self._actuator(mechanism).resize(
            previous, pages * estimation.PAGE_SIZE, loaded)
        if self._tracing is None:
            self.guest.resize(pages)
        else:
            # The cache keeps its size while the VM keeps a page.
            simulated_io.trim(self._tracing,
                              min(self._tracing.capacity, pages - 1))
            self.guest.resize(pages - self._tracing.capacity)
        self._io.fit()
        self.target_bytes = target_bytes
        return driver.Resize(mechanism, previous, target_bytes, seconds)

    def start_tracing(self, cache_bytes, write_policy):
        """Lu and Shen's Fig. 6: lend ``cache_bytes`` of the VM's memory
        (all but a page at most) to a hypervisor exclusive cache, into
        which the guest evicts its least recently used pages."""
        if self._tracing is not None:
            self.stop_tracing()
        cache_pages = min(cache_bytes // estimation.PAGE_SIZE,
                          self.guest.capacity - 1)
        cache = hcache.HypervisorCache(
            simulated_io.RefillCountingStorage(self.storage, self._io),
            cache_pages, write_policy, ghost=hcache.GhostEvents())
        cache.tables = self._io.tables
        # What left the VM's memory, the last window's cache included,
        # and was not read again is older than what the guest gives up
        # now: the hypervisor lists it first. Unlisted, each read of it
        # would count as a miss at every size, and the curve would
        # predict the misses of a VM still refilling the memory the last
        # window gave back empty, and none of those above its memory.
        for block in self._io.listed():
            cache.ghost.evicted(block)
        self.guest.io = cache
        self._tracing = cache
        self.guest.resize(self.guest.capacity - cache_pages)

    def stop_tracing(self):
        """Give the cache's memory back to the guest. A sync first writes
        what storage lacks: the guest's dirty pages, the cache's dirty
        units and the pages the VM got from them; the clean units are
        dropped with the cache, as a hypervisor reclaiming it would."""
        cache = self._tracing
        if cache is None:
            return
        self.guest.sync()
        # What the VM held in the cache's memory it now reads again: the
        # hypervisor sees those reads (it keeps the P2S tables).
        self._io.note_dropped(cache.queue.blocks())
        self.guest.io = self._io
        self._tracing = None
        self.guest.resize(self.guest.capacity + cache.capacity)
        self._io.fit()

    def cache_trace(self, accesses):
        """What the hypervisor cache saw since the last call, for an
        interval of ``accesses`` references, or None when not traced."""
        if self._tracing is None:
            return None
        ghost = self._tracing.ghost
        blocks, reads = ghost.arrays()
        ghost.clear()
        return driver.CacheTrace(blocks, reads, self.guest.capacity,
                                 accesses)

    def access_samples(self, until_ns):
        """What the pager's sampling saw in the intervals that ended by
        ``until_ns`` (the VM's time) since the last call, a
        driver.AccessSamples; None when it does not sample."""
        intervals = self.pager.take_samples(until_ns)
        if intervals is None:
            return None
        settings = self.pager.sampler.settings
        return driver.AccessSamples(intervals, settings.rate, settings.salt)

    def resample(self, rate, salt):
        """The pager zaps the sample of ``rate`` and ``salt`` from its
        next interval on."""
        self.pager.sampler.resample(rate, salt)

    def paging_trace(self):
        """What the pager did since the last call, its faults and the
        seconds they took, or None when the VM is not paged."""
        blocks, reads, faults, fault_seconds = self.pager.take_events()
        if not self.pager.paged:
            return None
        return driver.CacheTrace(blocks, reads, self.pager.resident_pages,
                                 self._paged_accesses), faults, fault_seconds


# Where a simulated memory server says it listens: memcanal-memserver's
# port in its README.
SIMULATED_MEMSERVER_PORT = 7400

# The simulated hosts of this process by name: a migration hands a VM
# from one to the other (memcanal-aio runs every host in one process).
_HOSTS = weakref.WeakValueDictionary()


class SimulatedDriver(driver.HypervisorDriver):
    """A host of ``[simulated] instances`` VMs, configured by [simulated].

    One lock serializes what changes a VM's memory model (collections,
    resizes, tracing); the guest models are pure Python, so the GIL
    would serialize them anyway.
    """

    hypervisor_type = 'simulated'

    def __init__(self, conf, host):
        options = conf.simulated
        self.host = host
        self.references_per_interval = options.references_per_interval
        self.write_policy = conf.hcache.write_policy
        self._failing = {instance_uuid(host, index)
                         for index in options.fail_resize_instances}
        self._host_info = driver.HostInfo(
            memory_total_bytes=int(options.host_memory_mb_by_host.get(
                host, options.host_memory_mb)) * 2 ** 20,
            memory_reserved_bytes=options.reserved_host_memory_mb * 2 ** 20)
        self._memserver_bytes = options.memserver_mb * 2 ** 20
        self._vms = {}
        interval_ns = int(conf.agent.report_interval * 1e9)
        sampling = simulated_sampling.Settings.of(conf)
        for index in range(options.instances):
            vm = SimulatedVM(host, index, options.instance_memory_mb * 2 ** 20,
                             options.seed, interval_ns,
                             self.references_per_interval,
                             options.guest_kernel_mb * 2 ** 20,
                             options.file_server_memory_ratio,
                             options.paging_scans_per_interval,
                             options.paging_pool_mb * 2 ** 20, sampling)
            self._vms[vm.uuid] = vm
        self._lock = threading.Lock()
        self._resize_log = options.resize_log
        self._resize_delay = options.resize_delay
        if self._resize_log and os.path.exists(self._resize_log):
            with open(self._resize_log) as log:
                for line in log:
                    done = json.loads(line)
                    if done['instance'] in self._vms:
                        self._vms[done['instance']].resize(
                            done['target_bytes'], done['mechanism'], False,
                            done.get('stores', ()))
        _HOSTS[host] = self

    def host_info(self):
        return self._host_info

    def memory_server(self, address):
        """A simulated memory server of [simulated] memserver_mb on this
        host, lending to the pagers of other simulated hosts, which model
        their stores (actuators.Pager); None with memserver_mb 0."""
        if not self._memserver_bytes:
            return None
        return {'address': address or '%s:%d' % (
            self.host, SIMULATED_MEMSERVER_PORT),
            'capacity_bytes': self._memserver_bytes, 'used_bytes': 0}

    def list_instances(self):
        with self._lock:
            return [driver.InstanceInfo(vm.uuid, vm.project_id,
                                        vm.allocated_bytes, vm.target_bytes,
                                        vm.flavor, vm.resident_bytes,
                                        vm.paged_bytes)
                    for vm in self._vms.values()]

    def memory_used_bytes(self):
        """The host's memory its VMs hold: a paged VM's resident memory,
        another's whole memory."""
        with self._lock:
            return sum(vm.resident_bytes or vm.memory_bytes
                       for vm in self._vms.values())

    def _vm(self, instance_uuid):
        try:
            return self._vms[instance_uuid]
        except KeyError:
            raise exception.InstanceNotFound(uuid=instance_uuid)

    def collect(self, instance_uuid):
        vm = self._vm(instance_uuid)
        trace = vm.workload.take(self.references_per_interval)
        with self._lock:
            stats = vm.run_guest(trace)
            cache_trace = vm.cache_trace(len(trace))
            paging = vm.paging_trace()
            # The VM's time when its next reference is due.
            accesses = vm.access_samples(
                int(trace.times_ns()[-1]) + vm.workload.reference_ns
                if len(trace) else 0)
        stats.update(references=float(len(trace)),
                     writes=float(trace.writes.sum()))
        paging_trace = None
        if paging is not None:
            paging_trace, faults, fault_seconds = paging
            stats.update(paging_faults=float(faults),
                         paging_fault_seconds=fault_seconds)
        return driver.Sample(
            page_size=estimation.PAGE_SIZE, trace=trace, guest_stats=stats,
            cache_trace=cache_trace, paging_trace=paging_trace,
            accesses=accesses)

    def migrate_instance(self, instance_uuid, destination_host):
        """Hand the VM, with its memory and workload, to the simulated
        host named ``destination_host`` in this process."""
        destination = _HOSTS.get(destination_host)
        if destination is None:
            raise exception.MigrationFailed(
                uuid=instance_uuid, host=destination_host,
                reason='no such simulated host in this process')
        with self._lock:
            vm = self._vms.pop(instance_uuid, None)
        if vm is None:
            with destination._lock:
                if instance_uuid in destination._vms:
                    return
            raise exception.InstanceNotFound(uuid=instance_uuid)
        with destination._lock:
            destination._vms[instance_uuid] = vm

    def set_sampling(self, instance_uuid, rate, salt):
        vm = self._vm(instance_uuid)
        with self._lock:
            if vm.sampling is None:
                return False
            vm.resample(rate, salt)
        return True

    def start_tracing(self, instance_uuid, cache_bytes):
        vm = self._vm(instance_uuid)
        with self._lock:
            vm.start_tracing(cache_bytes, self.write_policy)

    def stop_tracing(self, instance_uuid):
        vm = self._vm(instance_uuid)
        with self._lock:
            vm.stop_tracing()

    def renew_lease_tokens(self, instance_uuid, lease_tokens):
        """The simulated memory servers need no tokens: only whether
        the VM is here."""
        self._vm(instance_uuid)

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=(),
                            lease_tokens=None):
        """As a real host's driver; the simulated memory servers need no
        lease tokens (and the resize log keeps none)."""
        vm = self._vm(instance_uuid)
        if vm.uuid in self._failing:
            raise exception.ResizeFailed(
                uuid=vm.uuid, reason='[simulated] fail_resize_instances')
        with self._lock:
            resize = vm.resize(target_bytes, mechanism, vm.loaded, stores)
            if self._resize_log:
                done = {'instance': vm.uuid, 'target_bytes': target_bytes,
                        'mechanism': mechanism}
                if mechanism == 'paging':
                    done['stores'] = list(stores)
                with open(self._resize_log, 'a') as log:
                    log.write(json.dumps(done) + '\n')
                    log.flush()
                    os.fsync(log.fileno())
        time.sleep(self._resize_delay)
        return resize
