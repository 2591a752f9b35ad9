"""What of memcanal applies to a host, by its hypervisor type.

An agent registers its driver's ``hypervisor_type``: 'qemu' (libvirt's
QEMU driver, KVM or TCG), 'xen' (libvirt's libxl driver), 'qemu' for
the memtrace driver, 'simulated', or 'test' (libvirt's test driver).
Hosts registered before agents said (and agents that do not) have none,
and are taken as nova's, as they were.

Nova has had no Xen driver since 23.0.0 (Wallaby): a Xen host runs no
nova-compute, so placement holds no resource provider of it, nova's
scheduler never picks it (memcanal's filter and weigher never see it)
and nova cannot live-migrate its domains. Its VMs are resized by
balloon like any other host's; the placement step and the migration
planner pass it by, saying why.
"""

import re

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

TYPE_PATTERN = re.compile('^[a-z][a-z0-9_]{0,31}$')
# Types nova does not drive.
NOT_NOVA = frozenset({'xen'})


def nova_managed(hypervisor_type):
    """Whether nova (placement, its scheduler, its live migrations)
    manages a host of ``hypervisor_type`` (None: unknown, as before)."""
    return hypervisor_type not in NOT_NOVA


def not_nova_reason(hypervisor_type):
    """Why placement and migrations do not apply to such a host."""
    return ('a %s host: nova does not manage it (no nova-compute, no '
            'placement resource provider, no live migration)'
            % hypervisor_type)


class PassedBy:
    """The hosts a nova-only step (placement's ratios, migrations) passes
    by, each logged once per process with why."""

    def __init__(self, step):
        self.step = step
        self._told = set()

    def __call__(self, host):
        """Whether ``host`` (as db_api.list_hosts gives it) is passed by."""
        if host['nova_managed']:
            return False
        if host['name'] not in self._told:
            self._told.add(host['name'])
            LOG.info('%s passes %s by: %s', self.step, host['name'],
                     not_nova_reason(host['hypervisor_type']))
        return True
