"""The Xen hypervisor driver: a Xen host's domains, from its dom0.

The agent runs in dom0 and reaches Xen through libvirt's Xen (libxl)
driver, ``[xen] connection_uri``. What libvirt does for Xen as for QEMU
is the libvirt driver's, inherited: domains listed with their memory,
nova's metadata where present (nova has had no Xen driver since 23.0.0,
so a Xen host's domains are usually ``[xen] unowned_project_id``'s),
balloon statistics (libxl gives ``actual`` and ``available``), and
resizes by balloon (``setMemoryFlags`` live, at most the domain's
``<memory>``). What differs:

- Domain-0 is not listed: it is the host's, not a VM. Its memory is
  reserved on the host (``HostInfo.memory_reserved_bytes``, with
  ``[xen] reserved_host_memory_mb``): Xen gives VMs none of it.
- Only balloons resize: Xen has no virtio-mem, and memcanal's pager
  takes a QEMU guest's RAM, which a Xen guest does not have.
- No dirty-rate calculation (QEMU's) and no balloon-statistics period
  (libxl has none to set).
- Each domain's writes come from Xen's own log-dirty: one
  ``memcanal-logdirty`` per domain
  (memcanal.agent.drivers.logdirty_helpers), its intervals the Sample's
  ``write_log`` (the agent's ``xen_logdirty`` working set and write
  curve), its counters guest statistics (``logdirty_*``, below).

Guest statistics besides the libvirt driver's, per collection:
``logdirty_running`` (1 while the domain's helper runs),
``logdirty_intervals``, ``logdirty_frames`` (frames written, summed over
the intervals), ``logdirty_cost_ns`` (dom0's time to clean and scan the
bitmap, summed), ``logdirty_rejected_lines``, ``logdirty_dropped_frames``
(outside the domain), ``logdirty_overflowed`` (intervals lost between two
collections), ``logdirty_starts`` (helpers started for the domain).
"""

from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.agent.drivers import libvirt as libvirt_driver
from memcanal.agent.drivers import logdirty
from memcanal.agent.drivers import logdirty_helpers
from memcanal import exception

LOG = logging.getLogger(__name__)

KIB = libvirt_driver.KIB
SOURCE = 'xen'


def logdirty_stats(taken):
    """The guest statistics of a logdirty_helpers.Taken."""
    stats = {
        'logdirty_running': float(taken.running),
        'logdirty_intervals': float(len(taken.intervals)),
        'logdirty_frames': float(sum(interval.frames.size
                                     for interval in taken.intervals)),
        'logdirty_cost_ns': float(sum(interval.cost_ns
                                      for interval in taken.intervals)),
        'logdirty_rejected_lines': float(taken.rejected),
        'logdirty_dropped_frames': float(taken.dropped),
        'logdirty_overflowed': float(taken.overflowed),
        'logdirty_starts': float(taken.starts),
    }
    return stats


class XenDriver(libvirt_driver.LibvirtDriver):
    """Domains of ``[xen] connection_uri`` (or of ``connection``), each
    logged by a memcanal-logdirty while it runs."""

    OPTIONS = 'xen'
    hypervisor_type = 'xen'

    def __init__(self, conf, host, connection=None,
                 helpers=None):
        super().__init__(conf, host, connection)
        if helpers is None:
            self._end_strays()
            helpers = logdirty_helpers.LogDirtyHelpers(
                self.options, conf.agent.report_interval)
        self.helpers = helpers

    def _end_strays(self):
        try:
            logdirty_helpers.end_strays(self.options.logdirty_binary,
                                        self.options.logdirty_stop_timeout)
        except OSError as error:
            LOG.warning('Cannot look for memcanal-logdirty processes an '
                        'earlier agent left: %s', error)

    def _domain_pagers(self):
        return None

    def _stats_period(self):
        return 0

    def _dirty_rate(self, domain, root, state):
        state.dirty_rate = False

    # -- host and instances ----------------------------------------------

    def host_info(self):
        info = super().host_info()
        return driver.HostInfo(
            memory_total_bytes=info.memory_total_bytes,
            memory_reserved_bytes=info.memory_reserved_bytes
            + self._dom0_bytes())

    def _dom0_bytes(self):
        try:
            return self.connection.lookupByID(0).info()[2] * KIB
        except libvirt_driver.libvirt.libvirtError as error:
            LOG.warning('Cannot read Domain-0\'s memory: %s', error)
            return 0

    def _active_domains(self):
        return [domain for domain in super()._active_domains()
                if domain.ID() != 0]

    def _refresh(self, domains):
        wanted = {}
        for domain in domains:
            try:
                wanted[domain.UUIDString()] = (
                    domain.ID(), logdirty.domain_frames(
                        domain.maxMemory() * KIB))
            except libvirt_driver.libvirt.libvirtError as error:
                LOG.debug('Not logging domain %s: %s', domain.UUIDString(),
                          error)
        self.helpers.refresh(wanted)

    def stop(self):
        """End every domain's memcanal-logdirty: log-dirty off."""
        self.helpers.stop()

    # -- collection ----------------------------------------------------------

    def collect(self, instance_uuid):
        stats = self.guest_stats(instance_uuid)
        taken = self.helpers.take(instance_uuid)
        write_log = None
        if taken is not None:
            stats.update(logdirty_stats(taken))
            write_log = driver.WriteLog(SOURCE, tuple(
                interval.frames for interval in taken.intervals))
        return driver.Sample(page_size=logdirty.PAGE_SIZE, trace=None,
                             guest_stats=stats, write_log=write_log)

    # -- resizing ------------------------------------------------------------

    def apply_memory_target(self, instance_uuid, target_bytes,
                            mechanism='balloon', stores=(),
                            lease_tokens=None):
        if mechanism != 'balloon':
            raise exception.ResizeFailed(
                uuid=instance_uuid, reason='a Xen domain resizes by balloon '
                'only, not by %r' % (mechanism,))
        return super().apply_memory_target(instance_uuid, target_bytes)
