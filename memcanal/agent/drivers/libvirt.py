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

Paging (issue #17; doc/paging.md, "Paging libvirt guests from the
agent"): a domain whose XML preloads libmemcanal-uffd.so with
``MEMCANAL_PAGER_SOCKET`` hands its RAM to that socket as its QEMU
starts. The driver listens on every such socket of the domains it finds
(memcanal.agent.drivers.handoff), inactive ones included, and holds the
handoff; the first paging action starts the domain's memcanal-pager with
its stores and relays the handoff to it. With no page references, the
cold-page detector sees only the pager's faults, so the resident target
is kept at every collection: what stayed unfaulted for ``[pager]
cold_after`` is paged out.
"""

import math
import os
import threading
import time
from xml.etree import ElementTree

import numpy as np
from oslo_log import log as logging
from oslo_utils import importutils

from memcanal.agent import driver
from memcanal.agent.drivers import handoff
from memcanal.agent.drivers import paged
from memcanal.agent import paging
from memcanal import estimation
from memcanal import exception

libvirt = importutils.try_import('libvirt')

LOG = logging.getLogger(__name__)

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
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


def pager_socket(root):
    """The ``MEMCANAL_PAGER_SOCKET`` the domain gives its QEMU
    (``<qemu:commandline><qemu:env>``), or None."""
    for env in root.findall('{%s}commandline/{%s}env' % (QEMU_NS, QEMU_NS)):
        if env.get('name') == 'MEMCANAL_PAGER_SOCKET' and env.get('value'):
            return env.get('value')
    return None


class _Domain:
    """What the driver remembers of one domain between calls."""

    def __init__(self):
        self.target_bytes = None
        self.stats_period_set = False
        self.dirty_rate = True
        self.dirty_rate_mib = None
        self.major_fault = None
        # While paged: its GuestPager and the resident bytes to keep.
        self.pager = None
        self.resident_target = None


class LibvirtDriver(driver.HypervisorDriver):
    """Domains of ``[libvirt] connection_uri``, or of ``connection``.

    ``connection`` (an open virConnect) lets tests share one private
    ``test:///default`` connection with the driver; ``self.connection``
    is the one used.
    """

    def __init__(self, conf, host, connection=None):
        if libvirt is None:
            raise exception.DriverNotFound(
                name='libvirt (libvirt-python is not installed)')
        self.conf = conf
        self.options = conf.libvirt
        # libvirt prints every error to stderr unless told otherwise;
        # errors reach us as exceptions.
        libvirt.registerErrorHandler(lambda _ctx, _error: None, None)
        self.connection = connection or libvirt.open(
            self.options.connection_uri)
        self._domains = {}
        self._lock = threading.Lock()
        self.listeners = {}
        self._listen()

    # -- host and instances ----------------------------------------------

    def host_info(self):
        try:
            total = self.connection.getMemoryStats(
                libvirt.VIR_NODE_MEMORY_STATS_ALL_CELLS)['total'] * KIB
        except (libvirt.libvirtError, KeyError):
            # Drivers without virNodeGetMemoryStats (test, some libxl
            # versions) give getInfo()'s MiB.
            total = self.connection.getInfo()[1] * 2 ** 20
        return driver.HostInfo(
            memory_total_bytes=total,
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

    def _listen(self):
        """Listen on the pager socket of every domain that names one and
        has no listener yet: a QEMU hands its RAM over only as it starts."""
        if not self.options.paging:
            return
        for listener in self.listeners.values():
            listener.drop_abandoned()
        for domain in self.connection.listAllDomains(0):
            try:
                path = pager_socket(ElementTree.fromstring(
                    domain.XMLDesc(0)))
            except libvirt.libvirtError:
                continue
            if path is None or path in self.listeners:
                continue
            try:
                self.listeners[path] = handoff.Listener(path)
            except OSError as error:
                LOG.warning('Cannot listen on %s for the RAM of %s: %s',
                            path, domain.UUIDString(), error)

    def _forget_pagers(self, active):
        """Stop the pagers of domains that stopped (their QEMU exited, and
        a pager exits with its guest)."""
        with self._lock:
            states = list(self._domains.items())
        for uuid, state in states:
            if state.pager is not None and (
                    uuid not in active
                    or state.pager.client.process.poll() is not None):
                LOG.info('Domain %s stopped: its pager is done', uuid)
                state.pager.stop()
                state.pager = state.resident_target = None

    def stop(self):
        """Stop listening for handoffs (held ones are dropped: their
        guests run unpaged). Pagers serve their guests until they exit."""
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()

    def list_instances(self):
        self._listen()
        instances = []
        domains = self.connection.listAllDomains(
            libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        self._forget_pagers({domain.UUIDString() for domain in domains})
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
                self._flavor(root)), state.pager))
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
        sample = driver.Sample(page_size=estimation.PAGE_SIZE, trace=None,
                               guest_stats=stats)
        if state.pager is None:
            return sample
        # libvirt logs no page references: the detector sees faults only.
        sample = paged.paging_sample(instance_uuid, state.pager, sample,
                                     None, 0)
        self._keep_resident(instance_uuid, state)
        return sample

    @staticmethod
    def _keep_resident(uuid, state):
        """Page out what turned cold while more than the target is
        resident: without page references a page turns cold only after
        the action that set the target, by going unfaulted."""
        pager = state.pager
        try:
            resident = pager.resident()
            if (np.count_nonzero(resident) * paging.PAGE
                    > state.resident_target
                    and resident[pager.detector.cold()].any()):
                pager.set_resident(state.resident_target)
        except paging.PagerError as error:
            LOG.error('Paging of %s: %s', uuid, error)

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

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=()):
        if mechanism not in driver.MECHANISMS:
            raise exception.ResizeFailed(
                uuid=instance_uuid,
                reason='unknown mechanism %r' % (mechanism,))
        if mechanism == 'paging':
            return self._page(instance_uuid, target_bytes, stores)
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
        # The guest completes the change after libvirt returns; this is
        # how long libvirt took to accept it.
        return driver.Resize(mechanism, previous, target_bytes,
                             time.monotonic() - started)

    def _page(self, uuid, target_bytes, stores):
        """Set the resident target, starting the domain's pager with
        ``stores`` on its first paging action."""
        if (not isinstance(target_bytes, int) or isinstance(
                target_bytes, bool) or target_bytes < 0):
            raise exception.ResizeFailed(
                uuid=uuid, reason='a resident target is a whole number of '
                'bytes, not %r' % (target_bytes,))
        domain = self._domain(uuid)
        state = self._state(uuid)
        if state.pager is None:
            state.pager = self._start_pager(uuid, domain, stores)
        resize = paged.set_resident(uuid, state.pager, target_bytes, stores)
        state.resident_target = target_bytes
        return resize

    def _take_handoff(self, uuid, domain):
        """The domain's pager socket and the handoff held for it."""
        try:
            path = pager_socket(ElementTree.fromstring(domain.XMLDesc(0)))
        except libvirt.libvirtError as error:
            raise exception.ResizeFailed(uuid=uuid, reason=str(error))
        listener = self.listeners.get(path)
        held = listener.take(uuid) if listener is not None else None
        if held is None:
            raise exception.ResizeFailed(uuid=uuid, reason=(
                'its QEMU has not handed its RAM to the agent on %s: the '
                'domain needs the pager socket in its XML and [libvirt] '
                'paging, and must start after the agent listens there'
                % path if path else 'no MEMCANAL_PAGER_SOCKET in its XML '
                '(doc/paging.md)'))
        if held.length > paging.IDENTITY_LIMIT:
            # Refused before a pager registers RAM it could not page.
            held.close()
            raise exception.ResizeFailed(uuid=uuid, reason=(
                'only guests of up to 2 GiB are paged'))
        return path, held

    def _start_pager(self, uuid, domain, stores):
        """The domain's GuestPager: a memcanal-pager beside the domain's
        socket, with ``stores`` and the local store, given the RAM its
        QEMU handed to the agent."""
        path, held = self._take_handoff(uuid, domain)
        relay = os.path.join(os.path.dirname(path), uuid + '.pager')
        try:
            client = paged.start_pager(
                self.conf, relay, uuid, stores, os.path.join(
                    self.conf.pager.local_store_dir, uuid + '.pager.log'))
        except paging.PagerError as error:
            held.close()
            raise exception.ResizeFailed(uuid=uuid, reason=str(error))
        try:
            memfd = held.relay(relay, self.conf.pager.timeout)
            try:
                attached = client.wait_event('attached')
            except paging.PagerError:
                os.close(memfd)
                raise
        except (handoff.HandoffError, paging.PagerError) as error:
            client.stop()
            raise exception.ResizeFailed(uuid=uuid, reason=str(error))
        LOG.info('Paging %s through %s (stores %s)', uuid, client.name,
                 ', '.join(client.stores))
        return paging.GuestPager(
            client, memfd, attached['len'] // paging.PAGE,
            self.conf.agent.report_interval, self.conf.pager.cold_after)

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
