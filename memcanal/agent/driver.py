"""The hypervisor-driver interface of the compute agent.

A driver knows one hypervisor: which VMs run, how much memory each has,
what their memory did since the last collection, and how to resize them.
The agent turns what a driver collects into estimates with
memcanal.estimation, the same code whatever the driver.
"""

import abc
import dataclasses

import numpy as np
from oslo_log import log as logging
from stevedore import driver as stevedore_driver

from memcanal.agent import memserver
from memcanal.estimation import traces
from memcanal import exception

LOG = logging.getLogger(__name__)

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
    # The flavor's name, where the hypervisor knows it (nova's metadata).
    flavor: str | None = None
    # While the VM is paged: its memory still resident on the host (None:
    # not paged, all of it is) and what the pager holds elsewhere.
    resident_bytes: int | None = None
    paged_bytes: int = 0


MECHANISMS = ('balloon', 'hotplug', 'paging')
"""How a VM's memory is resized: a balloon driver (cannot grow a VM past
the memory it booted with) or memory hotplug (grows past it, in
sections), Liu et al., U-tube, section 2; or paging, TMemCanal's (Li,
Huang et al., section III.A): the VM keeps its visible memory and the
hypervisor pages its coldest pages out to other stores until only the
target stays resident on the host. Paging needs nothing in the guest, so
it also works on guests without a balloon driver."""


@dataclasses.dataclass(frozen=True)
class Resize:
    """What one resize did: the mechanism used, the VM's memory before and
    the target, and how long the hypervisor took to accept it (U-tube
    Figs. 3-6).

    A guest completes a balloon's or virtio-mem's change after the
    hypervisor accepted it, and may never complete it (a balloon driver
    that cannot free the pages, or is not there): the agent then reads
    the VM's memory back (memcanal.agent.settle) and sets
    ``reached_bytes``, what the guest had when it reached the target or
    the agent stopped waiting, ``lagged``, whether it was still short of
    the target then (None: the VM could not be read back), and
    ``settle_seconds``, how long the agent waited.
    """

    mechanism: str
    previous_bytes: int
    target_bytes: int
    seconds: float
    reached_bytes: int | None = None
    lagged: bool | None = None
    settle_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class CacheTrace:
    """What a hypervisor exclusive cache saw of one VM in one interval.

    ``blocks`` and ``reads`` are memcanal.estimation.hcache.GhostEvents
    (admitted evictions and I/O reads, in order); ``direct_pages`` is the
    memory the VM kept, and ``accesses`` its page accesses in the
    interval, which the hypervisor cannot count itself (hits in the VM's
    memory do not reach it) and learns from the guest's statistics.
    """

    blocks: np.ndarray
    reads: np.ndarray
    direct_pages: int
    accesses: int


@dataclasses.dataclass(frozen=True)
class LogDelivery:
    """The PRL and PML logs a hypervisor delivered for one VM in one
    interval, as hardware (or memcanal's memtrace plugin) produces them.

    ``prl_gpas`` and ``pml_gpas`` are the pages of the logs that filled,
    in order; ``dirty_log`` is the VM's PML dirty log (``flush()`` returns
    the partial logs, ``clear_dirty()`` starts a new dirty epoch, as
    memcanal.estimation.logsim.PmlLog does for emulated logs); ``stats``
    are this interval's memcanal.estimation.logsim.LogStats by log
    (``prl``, ``pml``); ``now_ns`` is when the interval ended.
    """

    prl_gpas: np.ndarray
    pml_gpas: np.ndarray
    dirty_log: object
    stats: dict
    now_ns: int


@dataclasses.dataclass(frozen=True)
class WriteLog:
    """A hypervisor's own log of the pages one VM wrote, interval by
    interval, since the previous collection: Xen's log-dirty (what PML
    fills on Intel hosts), read and cleared every interval.

    ``intervals`` are arrays of the distinct page indexes (guest frame
    numbers) written in each of the log's intervals, oldest first;
    ``source`` names the hypervisor ('xen'), and so the working set and
    curve the agent reports from it (memcanal.agent.write_log).
    """

    source: str
    intervals: tuple


@dataclasses.dataclass(frozen=True)
class AccessInterval:
    """One sampling interval a pager closed (doc/estimation.md, "Sampled
    accesses"): the page indexes whose access it saw (``touched``: a
    sampled page on its first access after each zap, any page on its
    first access after a full pass, a paged-out page that faulted) and
    those it saw written, whether the interval began with a full pass
    (every page zapped), how long it lasted, and the sample it zapped
    (``rate`` and ``salt``; None: its AccessSamples', a pager before the
    adaptive rate)."""

    touched: np.ndarray
    written: np.ndarray
    full: bool
    seconds: float
    rate: float | None = None
    salt: int | None = None


@dataclasses.dataclass(frozen=True)
class AccessSamples:
    """What a pager's access sampling saw of one VM since the previous
    collection: the AccessIntervals it closed, oldest first (none when
    its interval is longer than the agent's), and its ``rate`` and
    ``salt`` (memcanal.estimation.mrc.sample_mask(pages, rate, salt) is
    the sample) of the interval under way: an interval that names its
    own was drawn with that."""

    intervals: tuple
    rate: float
    salt: int


@dataclasses.dataclass(frozen=True)
class Sample:
    """What one VM's memory did during one collection interval.

    ``trace`` is the guest-page references the hypervisor saw, a
    memcanal.estimation.traces.Trace, for the agent to run through
    emulated logs; ``logs`` is what real logs delivered instead; both are
    None where the driver can observe neither. ``guest_stats`` are the
    guest's own counters, by name; ``cache_trace`` is set while the VM
    runs in tracing mode; ``paging_trace`` while the VM is paged: its
    swap-outs are the admitted evictions and its faults the reads (page
    numbers), ``direct_pages`` its resident pages and ``accesses`` its
    page accesses in the interval. ``accesses`` is what the pager's
    access sampling saw, an AccessSamples, where it samples the VM; the
    agent turns it into the "sampled" working set and curve.
    ``write_log`` is a WriteLog where the hypervisor logs the VM's
    writes itself (Xen's log-dirty).
    """

    page_size: int
    trace: traces.Trace | None
    guest_stats: dict
    cache_trace: CacheTrace | None = None
    logs: LogDelivery | None = None
    paging_trace: CacheTrace | None = None
    accesses: AccessSamples | None = None
    write_log: WriteLog | None = None


class HypervisorDriver(abc.ABC):

    # What the agent registers its host as (GET /hosts'
    # hypervisor_type); memcanal.hypervisors says what applies to each.
    hypervisor_type = 'unknown'

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
    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=(),
                            lease_tokens=None):
        """Resize a VM's memory to ``target_bytes`` with ``mechanism`` (one
        of MECHANISMS); return a Resize, or raise ResizeFailed and leave
        the VM as it was.

        With 'paging' the VM's visible memory stays as it is and
        ``target_bytes`` is how much of it stays resident on the host; the
        Resize's ``previous_bytes`` is the memory resident before.
        ``stores`` are where paged-out pages go besides the agent's own
        local store, in order (``tls:HOST:PORT`` specs of memory servers
        lent to this host), and ``lease_tokens`` the service's lease
        token of each (base64, by store), which the VM's pager presents
        to that server; both as a pooling ``page`` action carries them.
        Other mechanisms ignore them."""

    def renew_lease_tokens(self, instance_uuid, lease_tokens):
        """Hand the VM's pager the renewed ``lease_tokens`` (base64, by
        store) of the memory servers it pages to, before the old ones
        expire (issue #36). InstanceNotFound if the VM is not paged
        here. Drivers without pagers page nothing to memory servers:
        nothing to renew."""
        raise exception.InstanceNotFound(uuid=instance_uuid)

    def memory_now(self, instance_uuid, mechanism):
        """What a resize by ``mechanism`` changes of a VM, as the
        hypervisor has it now: with 'paging' the VM's memory resident on
        the host, else its memory. InstanceNotFound if it is gone.

        This default reads the listing, for drivers whose resizes are
        done when apply_memory_target returns; drivers whose guests
        complete a resize later read the guest's own size."""
        for instance in self.list_instances():
            if instance.uuid == instance_uuid:
                memory = instance.target_bytes or instance.allocated_bytes
                if mechanism == 'paging':
                    return instance.resident_bytes or memory
                return memory
        raise exception.InstanceNotFound(uuid=instance_uuid)

    def migrate_instance(self, instance_uuid, destination_host):
        """Move a VM to the host named ``destination_host``; a VM already
        there counts as moved. Only simulated hosts move VMs themselves:
        on a real cloud nova live-migrates them ([migration] executor)."""
        raise exception.MigrationFailed(
            uuid=instance_uuid, host=destination_host,
            reason='this driver does not move VMs; nova does')

    def set_sampling(self, instance_uuid, rate, salt):
        """Have the pager of a VM zap the hashed sample of ``rate`` and
        ``salt`` from its next interval on, without a restart (the
        agent's adaptive rate, memcanal.agent.adaptive); its
        AccessIntervals say which sample each had. False where the
        driver does not sample the VM (as here)."""
        return False

    def memory_server(self, address):
        """What this host lends to other hosts' pagers, as its reports
        register it: the memory server at ``address`` ([pooling]
        memserver_address), as its own STAT says; None when the host
        runs none or it does not answer (the service keeps the last
        registration)."""
        if not address:
            return None
        try:
            return memserver.registration(address)
        except (OSError, ValueError, memserver.MemserverError) as error:
            LOG.warning('Memory server %s did not answer (%s); not '
                        'registering it', address, error)
            return None

    def start_tracing(self, instance_uuid, cache_bytes):
        """Lend ``cache_bytes`` of a VM's memory to a hypervisor exclusive
        cache; its Samples carry a CacheTrace until stop_tracing."""
        raise exception.TracingNotSupported(driver=type(self).__name__)

    def stop_tracing(self, instance_uuid):
        """Give the cache's memory back to the VM."""
        raise exception.TracingNotSupported(driver=type(self).__name__)


def load(name, conf, host):
    """The driver installed under ``name`` in DRIVER_NAMESPACE."""
    try:
        manager = stevedore_driver.DriverManager(
            DRIVER_NAMESPACE, name, invoke_on_load=True,
            invoke_args=(conf, host))
    except stevedore_driver.NoMatches:
        raise exception.DriverNotFound(name=name)
    return manager.driver
