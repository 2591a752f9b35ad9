"""The qemu driver: real guests, traced by memtrace, sampled by their pager.

Each guest runs under QEMU TCG. With the memtrace plugin
(hypervisor-patches/memtrace), its real loads and stores become PRL and
PML logs: the driver is the plugin's consumer, the "dom0 CPU" of the PRL
paper. It attaches to every plugin socket in ``[qemu] socket_dir``, and
at each report hands the logs delivered since the last one to the agent
as a LogDelivery, which the agent's estimators handle exactly as they
handle emulated logs. It can also start guests itself (``[qemu]
instances``) from a kernel and initrd, as the functional tests and
benchmarks do.

A guest it starts with ``[qemu] paging`` has its RAM in a shared memfd
and a memcanal-pager of its own (memcanal.agent.drivers.paged), which
samples its accesses under any accelerator ([sampling]) and pages it:
``apply_memory_target(..., mechanism='paging')`` sets how much of it
stays resident on the host. ``[qemu] plugin`` unset, such a guest is
sampled only; with both, its Samples carry both, so the two can be
compared (memtrace being the ground truth). Resizing is the libvirt
driver's job.
"""

import glob
import os
import subprocess
import uuid

import numpy as np
from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.agent.drivers import memtrace
from memcanal.agent.drivers import paged
from memcanal.agent import pager_client
from memcanal.agent import paging
from memcanal import estimation
from memcanal.estimation import logsim
from memcanal import exception

LOG = logging.getLogger(__name__)
MiB = 2 ** 20
# sockaddr_un's sun_path, with its terminating NUL.
SOCKET_PATH_MAX = 108


def plugin_argument(plugin, **options):
    """QEMU's ``-plugin`` argument: memtrace at ``plugin`` with
    ``options`` (hypervisor-patches/memtrace/memtrace.c), in order."""
    return ','.join([plugin] + ['%s=%s' % item for item in options.items()])


def guest_command(binary, kernel, initrd, append, memory_mb, vcpus,
                  instance_uuid, console, plugin=None, memfd=False):
    """The command line of a TCG guest booted from ``kernel`` and
    ``initrd``, its serial console in the file ``console``, with
    ``plugin`` (a -plugin argument) if given, and its RAM in a shared
    memfd if ``memfd`` (what memcanal-pager pages)."""
    command = [binary, '-machine', 'q35', '-accel', 'tcg',
               '-m', str(memory_mb), '-smp', str(vcpus),
               '-uuid', instance_uuid, '-kernel', kernel, '-initrd', initrd,
               '-append', append, '-display', 'none', '-monitor', 'none',
               '-serial', 'file:%s' % console, '-no-reboot']
    if memfd:
        command += ['-object', 'memory-backend-memfd,id=mem,size=%dM,'
                    'share=on' % memory_mb, '-machine', 'memory-backend=mem']
    return command + (['-plugin', plugin] if plugin else [])


class DirtyLog:
    """A guest's PML dirty log as the PML estimator reads it: the partial
    logs of the last sync, and a new dirty epoch on demand."""

    def __init__(self, connection, partial):
        self._connection = connection
        self._partial = partial

    def flush(self):
        partial, self._partial = self._partial, np.zeros(0, np.int64)
        return partial

    def clear_dirty(self):
        self._connection.new_dirty_epoch()


def interval_stats(delta):
    """LogStats by log from the growth of the plugin's counters."""
    return {
        'prl': logsim.LogStats(
            events=delta['prl_events'], logged=delta['prl_logged'],
            missed=delta['prl_missed'], handler_ns=delta['prl_handler_ns']),
        'pml': logsim.LogStats(
            events=delta['pml_events'], logged=delta['pml_logged'],
            handler_ns=delta['pml_vm_ns'], vm_cpu_ns=delta['pml_vm_ns']),
    }


class Guest:
    """One guest: its plugin connection if memtrace traces it, its QEMU
    process if the driver started it, its VmPager if it is pageable."""

    def __init__(self, uuid, connection=None, process=None, vm_pager=None):
        self.uuid = uuid
        self.connection = connection
        self.process = process
        self.vm_pager = vm_pager
        self.counters = {}
        self.finished = False

    @property
    def pager(self):
        """Its GuestPager, once its pager holds its RAM."""
        return None if self.vm_pager is None else self.vm_pager.guest

    def memory_bytes(self, default):
        if self.connection is not None:
            return self.connection.hello.memory_mb * MiB
        if self.pager is not None:
            return self.pager.pages * paging.PAGE
        return default

    def check(self):
        """Whether QEMU still runs, where no plugin says so; its pager
        replaced if it died meanwhile."""
        if self.vm_pager is not None:
            try:
                self.vm_pager = paged.upkeep(self.vm_pager)
            except pager_client.PagerError as error:
                LOG.error('No pager for %s: %s', self.uuid, error)
        if self.connection is None and (
                self.process.poll() is not None if self.process is not None
                else self.vm_pager is None):
            self.finished = True

    def collect(self, timeout):
        """The plugin's logs since the last collection, or an empty
        sample without one."""
        if self.connection is None:
            return driver.Sample(page_size=estimation.PAGE_SIZE, trace=None,
                                 guest_stats={})
        delivered = self.connection.sync(timeout)
        delta = {name: value - self.counters.get(name, 0)
                 for name, value in delivered.counters.items()}
        self.counters = delivered.counters
        # Once the guest has exited and this last delivery is taken, the
        # guest is gone.
        self.finished = self.connection.closed
        return driver.Sample(
            page_size=self.connection.hello.page_size, trace=None,
            guest_stats={'references': float(delta['references'])},
            logs=driver.LogDelivery(
                prl_gpas=delivered.prl, pml_gpas=delivered.pml,
                dirty_log=DirtyLog(self.connection, delivered.pml_partial),
                stats=interval_stats(delta), now_ns=delivered.time_ns))

    def stop(self, timeout):
        if self.connection is not None:
            self.connection.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.vm_pager is None:
            return
        if self.process is None:
            self.vm_pager.close()       # it serves its guest on
        else:
            # A pager exits with its guest's QEMU.
            self.vm_pager.process.wait(timeout)
            self.vm_pager.forget()


class QemuDriver(driver.HypervisorDriver):

    hypervisor_type = 'qemu'

    def __init__(self, conf, host):
        self.conf = conf
        self.host = host
        self.options = conf.qemu
        self.socket_dir = self.options.socket_dir
        longest = max(self.pager_socket_path(str(uuid.UUID(int=0))),
                      paged.pager_file(conf, str(uuid.UUID(int=0)), '.ctl'),
                      key=len)
        if len(longest.encode()) >= SOCKET_PATH_MAX:
            raise exception.MemcanalException(
                '%s is too long for a Unix socket (at most %d bytes): '
                'shorten [qemu] socket_dir or [pager] state_dir'
                % (longest, SOCKET_PATH_MAX - 1))
        os.makedirs(self.socket_dir, exist_ok=True)
        self.guests = {}
        # Guests an earlier agent started still run: attach, not restart.
        self._adopt()
        self._discover()
        for index in range(self.options.instances):
            instance_uuid = str(uuid.uuid5(uuid.NAMESPACE_DNS, '%s-%d' % (
                host, index)))
            if instance_uuid not in self.guests:
                self.start_guest(instance_uuid)

    def socket_path(self, instance_uuid):
        return os.path.join(self.socket_dir, instance_uuid + '.sock')

    def pager_socket_path(self, instance_uuid):
        return os.path.join(self.socket_dir, instance_uuid + '.pager.sock')

    def console_path(self, instance_uuid):
        return os.path.join(self.socket_dir, instance_uuid + '.console')

    def start_guest(self, instance_uuid, append=None, stores=(),
                    lease_tokens=None):
        """Start a guest from [qemu] kernel and initrd, traced by the
        plugin if there is one, pageable (and sampled) with [qemu]
        paging, and attach to it; ``append`` adds to [qemu] append. Its
        pager keeps each page it pages out in ``stores`` (memory
        servers, ``tls:HOST:PORT``, with their ``lease_tokens`` by
        store) and in the local file store."""
        options = self.options
        if not (options.kernel and options.initrd):
            raise exception.MemcanalException(
                '[qemu] kernel and initrd are needed to start guests')
        if not (options.plugin or options.paging):
            raise exception.MemcanalException(
                'a guest started without [qemu] plugin nor paging would '
                'be neither traced nor sampled')
        socket_path = self.socket_path(instance_uuid)
        plugin = options.plugin and plugin_argument(
            options.plugin, mode='both', socket=socket_path,
            uuid=instance_uuid, memory_mb=options.memory_mb,
            log_entries=self.conf.estimation.log_entries,
            tlb_entries=self.conf.estimation.tlb_entries,
            handler_base_ns=options.handler_base_ns,
            ring_logs=options.ring_logs)
        command = guest_command(
            options.binary, options.kernel, options.initrd,
            ' '.join(filter(None, [options.append, append])),
            options.memory_mb, options.vcpus, instance_uuid,
            self.console_path(instance_uuid), plugin, memfd=options.paging)
        LOG.info('Starting guest %s', instance_uuid)
        vm_pager = (self._start_pager(instance_uuid, stores, lease_tokens)
                    if options.paging else None)
        env = None if vm_pager is None else dict(
            os.environ, LD_PRELOAD=self.conf.pager.shim,
            MEMCANAL_PAGER_SOCKET=self.pager_socket_path(instance_uuid))
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, env=env)
        guest = Guest(instance_uuid, process=process, vm_pager=vm_pager)
        try:
            if vm_pager is not None:
                self._attached(guest)
            if plugin:
                guest.connection = memtrace.Connection(socket_path)
        except (memtrace.MemtraceError, pager_client.PagerError):
            guest.stop(10)
            raise
        self.guests[instance_uuid] = guest
        return instance_uuid

    def _start_pager(self, instance_uuid, stores, lease_tokens):
        """A pager for the guest, listening for its RAM: QEMU's shim
        offers it once, as QEMU starts."""
        if not self.conf.pager.shim:
            raise exception.MemcanalException(
                '[pager] shim is needed to start pageable guests')
        vm_pager = paged.VmPager.start(self.conf, instance_uuid,
                                       self.pager_socket_path(instance_uuid),
                                       stores, lease_tokens)
        # It answers on its control socket once it listens on both.
        vm_pager.attach()
        return vm_pager

    def _attached(self, guest):
        """Wait for QEMU's shim to hand the guest's RAM to its pager."""
        pager = guest.vm_pager.attach(self.conf.pager.timeout)
        attached = guest.vm_pager.record.qemu
        if pager is None or attached[0] != guest.process.pid:
            raise pager_client.PagerError(
                name=guest.uuid, reason='QEMU %d did not hand its RAM to '
                'the pager (%s)' % (guest.process.pid,
                                    attached or 'nothing came'))

    def _adopt(self):
        """The guests whose pager an earlier agent started and whose
        QEMU still runs (their memtrace, if any, is found by
        _discover)."""
        for record in paged.records(self.conf):
            vm_pager = paged.VmPager.adopt(self.conf, record)
            if not vm_pager.qemu_alive():
                vm_pager.forget()
                continue
            guest = Guest(record.uuid, vm_pager=vm_pager)
            guest.check()
            if guest.vm_pager is not None:
                self.guests[record.uuid] = guest

    def _discover(self):
        """Attach to plugins that appeared in the socket directory."""
        attached = {guest.connection.path for guest in self.guests.values()
                    if guest.connection is not None}
        for path in glob.glob(os.path.join(self.socket_dir, '*.sock')):
            if path in attached or path.endswith('.pager.sock'):
                continue
            try:
                connection = memtrace.Connection(path)
            except (memtrace.MemtraceError, OSError) as error:
                LOG.warning('Cannot attach to %s: %s', path, error)
                continue
            # A plugin started without uuid= is named by its socket.
            instance_uuid = connection.hello.uuid or os.path.basename(
                path).removesuffix('.sock')
            guest = self.guests.setdefault(instance_uuid,
                                           Guest(instance_uuid))
            guest.connection = connection
            LOG.info('Attached to memtrace of %s (%d MiB, %d vCPUs)',
                     instance_uuid, connection.hello.memory_mb,
                     connection.hello.vcpus)

    def host_info(self):
        pages = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
        return driver.HostInfo(memory_total_bytes=pages,
                               memory_reserved_bytes=0)

    def list_instances(self):
        self._discover()
        for instance_uuid, guest in list(self.guests.items()):
            guest.check()
            if guest.finished:
                guest.stop(self.conf.pager.timeout)
                del self.guests[instance_uuid]
        return [self._instance_info(guest) for guest in self.guests.values()]

    def _instance_info(self, guest):
        return paged.instance_info(driver.InstanceInfo(
            uuid=guest.uuid, project_id=self.options.project_id,
            allocated_bytes=guest.memory_bytes(self.options.memory_mb * MiB),
            target_bytes=None), guest.vm_pager)

    def _guest(self, instance_uuid):
        try:
            return self.guests[instance_uuid]
        except KeyError:
            raise exception.InstanceNotFound(uuid=instance_uuid)

    def collect(self, instance_uuid):
        """The guest's logs and samples since the last collection. A
        plugin that fails is detached, and its guest gives an empty
        sample and leaves."""
        guest = self._guest(instance_uuid)
        try:
            sample = guest.collect(self.options.sync_timeout)
        except memtrace.MemtraceError as error:
            LOG.error('Detaching from %s: %s', instance_uuid, error)
            guest.finished = True
            return driver.Sample(page_size=guest.connection.hello.page_size,
                                 trace=None, guest_stats={})
        guest.check()
        if guest.vm_pager is None or guest.finished:
            return sample
        accessed = None
        if sample.logs is not None and guest.pager is not None:
            # PRL pages are guest-physical frames.
            accessed = paging.frame_indexes(
                np.unique(sample.logs.prl_gpas),
                guest.pager.pages * paging.PAGE)
        return paged.collect(guest.vm_pager, sample, accessed,
                             sample.guest_stats.get('references', 0))

    def set_sampling(self, instance_uuid, rate, salt):
        guest = self._guest(instance_uuid)
        if guest.vm_pager is None or guest.finished:
            return False
        return paged.set_sampling(guest.vm_pager, rate, salt)

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=(),
                            lease_tokens=None):
        """Only paging: the other mechanisms are the libvirt driver's."""
        guest = self._guest(instance_uuid)
        if mechanism != 'paging':
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='the qemu driver only pages; '
                'resize through the libvirt driver')
        guest.check()
        if guest.vm_pager is None:
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='not started with [qemu] paging')
        return paged.set_resident(guest.vm_pager, target_bytes, stores,
                                  lease_tokens, self.conf.pager.timeout)

    def renew_lease_tokens(self, instance_uuid, lease_tokens):
        guest = self._guest(instance_uuid)
        if guest.vm_pager is None:
            raise exception.InstanceNotFound(uuid=instance_uuid)
        guest.vm_pager.renew(lease_tokens)

    def stop(self):
        """Detach from every guest and stop those the driver started."""
        for guest in self.guests.values():
            guest.stop(self.conf.pager.timeout)
        self.guests.clear()
