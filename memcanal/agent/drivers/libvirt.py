"""The libvirt hypervisor driver: a real compute node's VMs under nova.

It reads what libvirt offers without tracing the guest (no page
references, so ``Sample.trace`` is None and the agent reports guest
statistics only): each domain's memory, its balloon statistics, and on
QEMU its dirty rate. It resizes domains by balloon (``setMemoryFlags``)
or by virtio-mem (``updateDeviceFlags`` of the device's ``<requested>``).

Sizes, as libvirt and QEMU count them (measured on QEMU 7.2, libvirt 9.0):

- boot memory: the domain's ``<memory>`` less its memory devices'
  ``<size>``; the most a balloon can give (libvirt refuses more). This is
  ``InstanceInfo.allocated_bytes``: the flavor's memory, which the
  service's policies use as a VM's baseline and balloon ceiling;
- the VM's memory now: ``virDomainGetInfo``'s memory, which on QEMU is
  the balloon's size plus what virtio-mem devices have plugged (the
  balloon's own ``actual`` statistic leaves virtio-mem out);
- a balloon target T gives the VM T plus what virtio-mem has plugged.

Guest statistics of each Sample (floats), where the balloon driver
reports them (``memoryStats``; a virtio memballoon and a guest driver):

- ``memory_bytes``: the VM's memory now, as above;
- ``used_bytes``: ``available`` - ``usable`` (MemTotal - MemAvailable):
  what the guest could not free without paging, U-tube's memory in use;
- ``major_faults``: major faults since the previous collection;
- the raw statistics, ``balloon_<name>`` (``_bytes`` for those libvirt
  gives in KiB; ``rss`` is the QEMU process's host RSS, so
  ``host_rss_bytes``); counters are cumulative since the guest booted;
- ``dirty_rate_mib_per_s``: the last completed dirty-rate calculation
  ([libvirt] dirty_rate_mode), with ``dirty_rate_period_s``.

The simulated driver's ``swap_bytes`` and ``committed_bytes`` have no
balloon statistic of the same meaning, so they are not reported.

Sampling and paging (issues #17, #24; doc/paging.md, "libvirt guests
from the agent"): a domain whose XML preloads libmemcanal-uffd.so with
``MEMCANAL_PAGER_SOCKET`` hands its RAM to that socket as its QEMU
starts, whatever its accelerator. The driver listens there and gives the
RAM to a memcanal-pager of the domain's own
(memcanal.agent.drivers.domain_pagers): at once with [sampling] enabled,
so every such domain's accesses are sampled, and its Samples carry them
(the agent's ``sampled`` working set and curve); else at its first
paging action. Only the domain's own QEMU may hand it over (issue #25):
the socket is ``[libvirt] qemu_group``'s, and an offer is taken only
from the process libvirt's pid file of the domain names, with that
process's own descriptors (memcanal.agent.drivers.handoff_checks).
The cold-page detector learns from those samples (full
passes show every page) and the pager's faults; the resident target of
a paging action is kept at every collection.
"""

import math
import threading
import time
from xml.etree import ElementTree

from oslo_log import log as logging
from oslo_utils import importutils

from memcanal.agent import driver
from memcanal.agent.drivers import domain_pagers
from memcanal.agent.drivers import paged
from memcanal import estimation
from memcanal import exception

libvirt = importutils.try_import('libvirt')

LOG = logging.getLogger(__name__)

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
KIB = 1024
# Balloon statistics libvirt gives in KiB, and those it gives as counts.
_KIB_STATS = ('actual', 'available', 'unused', 'usable', 'disk_caches',
              'swap_in', 'swap_out')
_COUNT_STATS = ('major_fault', 'minor_fault', 'hugetlb_pgalloc',
                'hugetlb_pgfail', 'last_update')


def _unsupported_codes():
    return {libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_OPERATION_UNSUPPORTED,
            libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED}


def _kib(element):
    """An XML size element in KiB (libvirt's live XML uses KiB)."""
    if element is None or element.text is None:
        return 0
    scale = {'b': 1.0 / KIB, 'bytes': 1.0 / KIB, 'k': 1, 'kib': 1,
             'm': KIB, 'mib': KIB, 'g': KIB ** 2, 'gib': KIB ** 2}
    return int(int(element.text) * scale[
        element.get('unit', 'KiB').lower()])


class _Domain:
    """What the driver remembers of one domain between calls."""

    def __init__(self):
        self.target_bytes = None
        self.stats_period_set = False
        self.dirty_rate = True
        self.dirty_rate_mib = None
        self.major_fault = None


class LibvirtDriver(driver.HypervisorDriver):
    """Domains of ``[libvirt] connection_uri``, or of ``connection``.

    ``connection`` (an open virConnect) lets tests share one private
    ``test:///default`` connection with the driver; ``self.connection``
    is the one used.
    """

    # The option group this driver reads (connection_uri,
    # reserved_host_memory_mb, unowned_project_id, memory_stats_period);
    # memcanal.agent.drivers.xen reads [xen].
    OPTIONS = 'libvirt'

    def __init__(self, conf, host, connection=None):
        if libvirt is None:
            raise exception.DriverNotFound(
                name='libvirt (libvirt-python is not installed)')
        self.conf = conf
        self.options = getattr(conf, self.OPTIONS)
        # libvirt prints every error to stderr unless told otherwise;
        # errors reach us as exceptions.
        libvirt.registerErrorHandler(lambda _ctx, _error: None, None)
        self.connection = connection or libvirt.open(
            self.options.connection_uri)
        self._domains = {}
        self._lock = threading.Lock()
        self.pagers = self._domain_pagers()

    @property
    def hypervisor_type(self):
        """libvirt's name of the hypervisor, lower case: 'qemu' for
        QEMU/KVM (the domains' own type says kvm or qemu), 'xen' for
        libxl."""
        return self.connection.getType().lower()

    def _domain_pagers(self):
        """Pagers are QEMU's (the guest's RAM handed over by its QEMU)."""
        if not self.options.paging:
            return None
        return domain_pagers.DomainPagers(self.conf, self.connection,
                                          libvirt.libvirtError)

    # -- host and instances ----------------------------------------------

    def host_info(self):
        # getInfo()'s MiB, as nova's libvirt driver counts the MEMORY_MB
        # it offers placement: memcanal's capacity and placement's must
        # agree. (virNodeGetMemoryStats' total can be larger: on a host
        # with hotplugged memory it was 24 GiB where getInfo said 7.)
        return driver.HostInfo(
            memory_total_bytes=self.connection.getInfo()[1] * 2 ** 20,
            memory_reserved_bytes=self.options.reserved_host_memory_mb
            * 2 ** 20)

    def _state(self, uuid):
        with self._lock:
            return self._domains.setdefault(uuid, _Domain())

    def _project(self, root):
        project = root.find('metadata/{%s}instance/{%s}owner/{%s}project' % (
            NOVA_NS, NOVA_NS, NOVA_NS))
        if project is not None and project.get('uuid'):
            return project.get('uuid')
        return self.options.unowned_project_id

    @staticmethod
    def _flavor(root):
        flavor = root.find('metadata/{%s}instance/{%s}flavor' % (
            NOVA_NS, NOVA_NS))
        return flavor.get('name') if flavor is not None else None

    @staticmethod
    def _boot_kib(root):
        """``<memory>`` less the memory devices: what the domain booted
        with, the balloon's ceiling."""
        devices = sum(_kib(device.find('target/size'))
                      for device in root.findall('devices/memory'))
        return _kib(root.find('memory')) - devices

    def stop(self):
        """Stop listening for handoffs (held ones are dropped: their
        guests run unpaged). Pagers serve their guests on."""
        if self.pagers is not None:
            self.pagers.stop()

    def _pager(self, uuid):
        return None if self.pagers is None else self.pagers.pager(uuid)

    def _active_domains(self):
        """The running domains this driver reports."""
        return self.connection.listAllDomains(
            libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)

    def _refresh(self, domains):
        """Keep what runs beside each domain in step with ``domains``."""
        if self.pagers is not None:
            self.pagers.refresh({domain.UUIDString() for domain in domains})

    def list_instances(self):
        instances = []
        domains = self._active_domains()
        self._refresh(domains)
        for domain in domains:
            try:
                root = ElementTree.fromstring(domain.XMLDesc(0))
                current = domain.info()[2] * KIB
            except libvirt.libvirtError as error:
                # A domain that stopped since it was listed is gone.
                LOG.debug('Skipping domain %s: %s', domain.UUIDString(),
                          error)
                continue
            uuid = domain.UUIDString()
            boot = self._boot_kib(root) * KIB
            state = self._state(uuid)
            target = state.target_bytes
            if target is None and current != boot:
                # Resized before this agent started (or by an operator):
                # the memory the VM is set to is what it has.
                target = current
            instances.append(paged.instance_info(driver.InstanceInfo(
                uuid, self._project(root), boot, target,
                self._flavor(root)), self._pager(uuid)))
        return instances

    def _domain(self, uuid):
        try:
            return self.connection.lookupByUUIDString(uuid)
        except libvirt.libvirtError as error:
            if error.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                raise exception.InstanceNotFound(uuid=uuid)
            raise

    # -- collection ----------------------------------------------------------

    def collect(self, instance_uuid):
        sample = driver.Sample(page_size=estimation.PAGE_SIZE, trace=None,
                               guest_stats=self.guest_stats(instance_uuid))
        if self.pagers is None:
            return sample
        return self.pagers.collect(
            instance_uuid, sample,
            migrating=lambda: self._migrating_out(instance_uuid))

    def _migrating_out(self, uuid):
        """Whether libvirt runs an outgoing migration of the domain (a
        live migration nova started): its paged-out pages then come back
        before QEMU reads them one fault at a time (migrations.running)."""
        try:
            job = self._domain(uuid).jobStats()
        except (libvirt.libvirtError, exception.InstanceNotFound):
            return False
        return (job.get('type', libvirt.VIR_DOMAIN_JOB_NONE)
                != libvirt.VIR_DOMAIN_JOB_NONE
                and job.get('operation')
                == libvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT)

    def set_sampling(self, instance_uuid, rate, salt):
        pager = self._pager(instance_uuid)
        if pager is None:
            return False
        return paged.set_sampling(pager, rate, salt)

    def guest_stats(self, instance_uuid):
        """A domain's memory and balloon statistics (and dirty rate)."""
        domain = self._domain(instance_uuid)
        state = self._state(instance_uuid)
        root = ElementTree.fromstring(domain.XMLDesc(0))
        if not state.stats_period_set:
            self._enable_stats(domain, root)
            state.stats_period_set = True
        stats = {'memory_bytes': float(domain.info()[2] * KIB)}
        try:
            balloon = domain.memoryStats()
        except libvirt.libvirtError as error:
            LOG.debug('No balloon statistics of %s: %s', instance_uuid,
                      error)
            balloon = {}
        stats.update(self._balloon_stats(balloon, state))
        if state.dirty_rate:
            self._dirty_rate(domain, root, state)
        if state.dirty_rate_mib is not None:
            stats['dirty_rate_mib_per_s'] = float(state.dirty_rate_mib)
            stats['dirty_rate_period_s'] = float(
                self.options.dirty_rate_period)
        return stats

    @staticmethod
    def _balloon_stats(balloon, state):
        stats = {}
        for name in _KIB_STATS:
            if name in balloon:
                stats['balloon_%s_bytes' % name] = float(balloon[name] * KIB)
        for name in _COUNT_STATS:
            if name in balloon:
                stats['balloon_%s' % name] = float(balloon[name])
        if 'rss' in balloon:
            stats['host_rss_bytes'] = float(balloon['rss'] * KIB)
        if 'available' in balloon and 'usable' in balloon:
            stats['used_bytes'] = float(
                max(0, balloon['available'] - balloon['usable']) * KIB)
        if 'major_fault' in balloon:
            if state.major_fault is not None:
                stats['major_faults'] = float(
                    max(0, balloon['major_fault'] - state.major_fault))
            state.major_fault = balloon['major_fault']
        return stats

    def _stats_period(self):
        period = self.options.memory_stats_period
        if period is None:
            period = math.ceil(self.conf.agent.report_interval)
        return period

    def _enable_stats(self, domain, root):
        """Ask the guest for balloon statistics every period, once per
        domain, unless it already sends them as often."""
        period = self._stats_period()
        balloon = root.find('devices/memballoon')
        if period == 0 or balloon is None or balloon.get('model') == 'none':
            return
        stats = balloon.find('stats')
        current = int(stats.get('period', 0)) if stats is not None else 0
        if 0 < current <= period:
            return
        try:
            domain.setMemoryStatsPeriod(period, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as error:
            LOG.warning('Cannot enable balloon statistics of %s: %s',
                        domain.UUIDString(), error)

    def _dirty_rate_flags(self, root):
        mode = self.options.dirty_rate_mode
        kvm = root.get('type') == 'kvm'
        if mode == 'auto':
            mode = 'dirty-bitmap' if kvm else 'page-sampling'
        elif mode in ('dirty-bitmap', 'dirty-ring') and not kvm:
            # Both need KVM's dirty logging; QEMU 7.2 under TCG crashes on
            # a dirty-bitmap calculation.
            mode = 'page-sampling'
        return {
            'page-sampling': libvirt.VIR_DOMAIN_DIRTYRATE_MODE_PAGE_SAMPLING,
            'dirty-bitmap': libvirt.VIR_DOMAIN_DIRTYRATE_MODE_DIRTY_BITMAP,
            'dirty-ring': libvirt.VIR_DOMAIN_DIRTYRATE_MODE_DIRTY_RING,
        }[mode]

    def _dirty_rate(self, domain, root, state):
        """Keep the last completed calculation; start the next one unless
        one is running."""
        if self.options.dirty_rate_mode == 'off':
            state.dirty_rate = False
            return
        uuid = domain.UUIDString()
        try:
            [(_, result)] = self.connection.domainListGetStats(
                [domain], libvirt.VIR_DOMAIN_STATS_DIRTYRATE)
            status = result.get('dirtyrate.calc_status')
            if (status == libvirt.VIR_DOMAIN_DIRTYRATE_MEASURED
                    and 'dirtyrate.megabytes_per_second' in result):
                state.dirty_rate_mib = result[
                    'dirtyrate.megabytes_per_second']
            if status != libvirt.VIR_DOMAIN_DIRTYRATE_MEASURING:
                domain.startDirtyRateCalc(self.options.dirty_rate_period,
                                          self._dirty_rate_flags(root))
        except libvirt.libvirtError as error:
            if error.get_error_code() in _unsupported_codes():
                LOG.info('No dirty-rate measurement of %s: %s', uuid, error)
                state.dirty_rate = False
            else:
                LOG.warning('Dirty-rate measurement of %s failed: %s', uuid,
                            error)

    # -- resizing ------------------------------------------------------------

    def memory_now(self, instance_uuid, mechanism):
        """The domain's memory as virDomainGetInfo gives it: what the
        guest's balloon and virtio-mem devices reached (QEMU reports the
        balloon's size as the guest changes it; libxl a Xen domain's
        pages), not the target set. Paging: the listing's resident size
        (the pager's)."""
        if mechanism == 'paging':
            return super().memory_now(instance_uuid, mechanism)
        domain = self._domain(instance_uuid)
        try:
            return domain.info()[2] * KIB
        except libvirt.libvirtError as error:
            raise exception.InstanceNotFound(uuid=instance_uuid) from error

    def renew_lease_tokens(self, instance_uuid, lease_tokens):
        pager = self.pagers.pager(instance_uuid)
        if pager is None:
            raise exception.InstanceNotFound(uuid=instance_uuid)
        with pager.busy:
            pager.renew(lease_tokens)

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=(),
                            lease_tokens=None):
        if mechanism not in driver.MECHANISMS:
            raise exception.ResizeFailed(
                uuid=instance_uuid,
                reason='unknown mechanism %r' % (mechanism,))
        if mechanism == 'paging':
            return self._page(instance_uuid, target_bytes, stores,
                              lease_tokens)
        if (not isinstance(target_bytes, int) or isinstance(
                target_bytes, bool) or target_bytes < estimation.PAGE_SIZE):
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='a target is a whole number of '
                'bytes of at least one page, not %r' % (target_bytes,))
        domain = self._domain(instance_uuid)
        started = time.monotonic()
        try:
            root = ElementTree.fromstring(domain.XMLDesc(0))
            previous = domain.info()[2] * KIB
            if mechanism == 'balloon':
                self._balloon(domain, root, instance_uuid, target_bytes)
            else:
                self._hotplug(domain, root, instance_uuid, target_bytes,
                              previous)
        except libvirt.libvirtError as error:
            raise exception.ResizeFailed(uuid=instance_uuid,
                                         reason=str(error))
        self._state(instance_uuid).target_bytes = target_bytes
        # The guest completes the change after libvirt returns (the agent
        # reads back what it reached: memcanal.agent.settle); this is
        # how long libvirt took to accept it.
        return driver.Resize(mechanism, previous, target_bytes,
                             time.monotonic() - started)

    def _page(self, uuid, target_bytes, stores, lease_tokens):
        """Set the resident target, starting the domain's pager with
        ``stores`` (and their ``lease_tokens``) if it has none yet."""
        if (not isinstance(target_bytes, int) or isinstance(
                target_bytes, bool) or target_bytes < 0):
            raise exception.ResizeFailed(
                uuid=uuid, reason='a resident target is a whole number of '
                'bytes, not %r' % (target_bytes,))
        domain = self._domain(uuid)
        try:
            socket = domain_pagers.pager_socket(ElementTree.fromstring(
                domain.XMLDesc(0)), self.conf.libvirt.pager_socket_dir)
        except libvirt.libvirtError as error:
            raise exception.ResizeFailed(uuid=uuid, reason=str(error))
        if self.pagers is None:
            raise exception.ResizeFailed(uuid=uuid, reason=(
                '[libvirt] paging is off'))
        return self.pagers.page(uuid, socket, target_bytes, stores,
                                lease_tokens)

    @staticmethod
    def _virtio_mem(root):
        for device in root.findall('devices/memory'):
            if device.get('model') == 'virtio-mem':
                return device
        return None

    @staticmethod
    def _plugged_kib(root):
        plugged = 0
        for device in root.findall('devices/memory'):
            if device.get('model') == 'virtio-mem':
                target = device.find('target')
                current = target.find('current')
                plugged += _kib(current if current is not None
                                else target.find('requested'))
        return plugged

    def _balloon(self, domain, root, uuid, target_bytes):
        """The balloon's size is the target less what virtio-mem plugged;
        it cannot pass the boot memory."""
        boot = self._boot_kib(root)
        balloon = target_bytes // KIB - self._plugged_kib(root)
        if balloon > boot:
            raise exception.ResizeFailed(
                uuid=uuid, reason='a balloon cannot give the domain more '
                'than its boot memory of %d KiB (use hotplug)' % boot)
        if balloon < estimation.PAGE_SIZE // KIB:
            raise exception.ResizeFailed(
                uuid=uuid, reason='virtio-mem holds more than the target; '
                'shrink it by hotplug first')
        domain.setMemoryFlags(balloon, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def _hotplug(self, domain, root, uuid, target_bytes, previous):
        """The boot memory whole (an inflated balloon is emptied first),
        and the rest from the virtio-mem device, in whole blocks."""
        device = self._virtio_mem(root)
        if device is None:
            raise exception.ResizeFailed(
                uuid=uuid, reason='the domain has no virtio-mem device')
        boot = self._boot_kib(root)
        target = device.find('target')
        block = _kib(target.find('block')) or 2048
        size = _kib(target.find('size'))
        needed = target_bytes // KIB - boot
        if needed < 0:
            raise exception.ResizeFailed(
                uuid=uuid, reason='virtio-mem cannot take a domain below '
                'its boot memory of %d KiB (use balloon)' % boot)
        requested = -(-needed // block) * block
        if requested > size:
            raise exception.ResizeFailed(
                uuid=uuid, reason='%d KiB above the boot memory is more '
                'than the virtio-mem device\'s %d KiB' % (requested, size))
        balloon = previous // KIB - self._plugged_kib(root)
        if balloon < boot:
            domain.setMemoryFlags(boot, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        element = target.find('requested')
        if element is None:
            element = ElementTree.SubElement(target, 'requested')
        element.text = str(requested)
        element.set('unit', 'KiB')
        try:
            # The device as the live XML has it (with its address), only
            # <requested> changed: libvirt matches the device by it.
            domain.updateDeviceFlags(
                ElementTree.tostring(device, encoding='unicode'),
                libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError:
            if balloon < boot:
                domain.setMemoryFlags(balloon, libvirt.VIR_DOMAIN_AFFECT_LIVE)
            raise
