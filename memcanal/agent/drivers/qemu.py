"""The qemu driver: real guests, their references logged by memtrace.

Each guest runs under QEMU TCG with the memtrace plugin
(hypervisor-patches/memtrace), which turns its real loads and stores into
PRL and PML logs. The driver is the plugin's consumer, the "dom0 CPU" of
the PRL paper: it attaches to every plugin socket in ``[qemu]
socket_dir``, and at each report hands the logs delivered since the last
one to the agent as a LogDelivery, which the agent's estimators handle
exactly as they handle emulated logs. It can also start guests itself
(``[qemu] instances``) from a kernel and initrd, as the functional tests
and benchmarks do.

Resizing is the libvirt driver's job; this one observes, and pages: a
guest it starts with ``[qemu] paging`` has its RAM in a shared memfd and
a memcanal-pager of its own (memcanal.agent.paging), and
``apply_memory_target(..., mechanism='paging')`` sets how much of it
stays resident on the host.
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
from memcanal.agent import paging
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
    """One traced guest: its plugin connection and, if the driver started
    it, its QEMU process and, if it is pageable, its GuestPager."""

    def __init__(self, connection, process=None, pager=None):
        self.connection = connection
        self.process = process
        self.pager = pager
        self.counters = {}
        self.finished = False
        # A plugin started without uuid= is named by its socket.
        self.uuid = connection.hello.uuid or os.path.basename(
            connection.path).removesuffix('.sock')

    def collect(self, timeout):
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

    def stop(self):
        self.connection.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        # After QEMU: a pager serves its guest's faults until it exits.
        if self.pager is not None:
            self.pager.stop()


class QemuDriver(driver.HypervisorDriver):

    def __init__(self, conf, host):
        self.conf = conf
        self.host = host
        self.options = conf.qemu
        self.socket_dir = self.options.socket_dir
        if len(self.pager_socket_path(str(uuid.UUID(int=0))).encode()) \
                >= SOCKET_PATH_MAX:
            raise exception.MemcanalException(
                '[qemu] socket_dir %s is too long for Unix sockets (%d '
                'bytes with a socket name)' % (self.socket_dir,
                                               SOCKET_PATH_MAX))
        os.makedirs(self.socket_dir, exist_ok=True)
        self.guests = {}
        # Guests an earlier agent started still run: attach, not restart.
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

    def start_guest(self, instance_uuid, append=None, stores=()):
        """Start a guest from [qemu] kernel and initrd with the plugin, and
        attach to it; ``append`` adds to [qemu] append. With [qemu] paging
        its pager keeps each page it pages out in ``stores`` (memory
        servers, ``tcp:HOST:PORT``), then in the local file store."""
        options = self.options
        if not (options.plugin and options.kernel and options.initrd):
            raise exception.MemcanalException(
                '[qemu] plugin, kernel and initrd are needed to start '
                'guests')
        socket_path = self.socket_path(instance_uuid)
        plugin = plugin_argument(
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
        LOG.info('Starting traced guest %s', instance_uuid)
        client = (self._start_pager(instance_uuid, stores)
                  if options.paging else None)
        env = None if client is None else dict(
            os.environ, LD_PRELOAD=self.conf.pager.shim,
            MEMCANAL_PAGER_SOCKET=self.pager_socket_path(instance_uuid))
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, env=env)
        try:
            pager = (None if client is None
                     else self._guest_pager(client, process))
            self._attach(socket_path, process, pager)
        except (memtrace.MemtraceError, paging.PagerError):
            process.kill()
            process.wait(10)
            if client is not None:
                client.stop()
            raise
        return instance_uuid

    def _start_pager(self, instance_uuid, stores):
        options = self.conf.pager
        if not options.shim:
            raise exception.MemcanalException(
                '[pager] shim is needed to start pageable guests')
        return paged.start_pager(
            self.conf, self.pager_socket_path(instance_uuid), instance_uuid,
            stores, os.path.join(self.socket_dir,
                                 instance_uuid + '.pager.log'))

    def _guest_pager(self, client, process):
        """The GuestPager of a guest once QEMU's shim handed its RAM to
        the pager."""
        attached = client.wait_event('attached')
        if attached['pid'] != process.pid:
            raise paging.PagerError(name=client.name, reason=(
                'attached to pid %s, not QEMU %d' % (attached['pid'],
                                                     process.pid)))
        return paging.GuestPager(
            client, paging.memfd_of(process.pid),
            attached['len'] // paging.PAGE,
            self.conf.agent.report_interval, self.conf.pager.cold_after)

    def _attach(self, socket_path, process=None, pager=None):
        guest = Guest(memtrace.Connection(socket_path), process, pager)
        self.guests[guest.uuid] = guest
        LOG.info('Attached to memtrace of %s (%d MiB, %d vCPUs)',
                 guest.uuid, guest.connection.hello.memory_mb,
                 guest.connection.hello.vcpus)

    def _discover(self):
        """Attach to plugins that appeared in the socket directory."""
        attached = {guest.connection.path for guest in self.guests.values()}
        for path in glob.glob(os.path.join(self.socket_dir, '*.sock')):
            if path in attached:
                continue
            try:
                self._attach(path)
            except (memtrace.MemtraceError, OSError) as error:
                LOG.warning('Cannot attach to %s: %s', path, error)

    def host_info(self):
        pages = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
        return driver.HostInfo(memory_total_bytes=pages,
                               memory_reserved_bytes=0)

    def list_instances(self):
        self._discover()
        for instance_uuid, guest in list(self.guests.items()):
            if guest.finished:
                guest.stop()
                del self.guests[instance_uuid]
        return [self._instance_info(guest) for guest in self.guests.values()]

    def _instance_info(self, guest):
        return paged.instance_info(driver.InstanceInfo(
            uuid=guest.uuid, project_id=self.options.project_id,
            allocated_bytes=guest.connection.hello.memory_mb * MiB,
            target_bytes=None), guest.pager)

    def _guest(self, instance_uuid):
        try:
            return self.guests[instance_uuid]
        except KeyError:
            raise exception.InstanceNotFound(uuid=instance_uuid)

    def collect(self, instance_uuid):
        """The guest's logs since the last collection. A plugin that fails
        is detached, and its guest gives an empty sample and leaves."""
        guest = self._guest(instance_uuid)
        try:
            sample = guest.collect(self.options.sync_timeout)
        except memtrace.MemtraceError as error:
            LOG.error('Detaching from %s: %s', instance_uuid, error)
            guest.finished = True
            return driver.Sample(page_size=guest.connection.hello.page_size,
                                 trace=None, guest_stats={})
        if guest.pager is None or guest.finished:
            return sample
        # PRL pages are guest frames, the memfd's pages.
        return paged.paging_sample(
            guest.uuid, guest.pager, sample, np.unique(sample.logs.prl_gpas),
            sample.guest_stats.get('references', 0))

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=()):
        """Only paging: the other mechanisms are the libvirt driver's."""
        guest = self._guest(instance_uuid)
        if mechanism != 'paging':
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='the qemu driver only pages; '
                'resize through the libvirt driver')
        if guest.pager is None:
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='not started with [qemu] paging')
        return paged.set_resident(instance_uuid, guest.pager, target_bytes,
                                  stores)

    def stop(self):
        """Detach from every guest and stop those the driver started."""
        for guest in self.guests.values():
            guest.stop()
        self.guests.clear()
