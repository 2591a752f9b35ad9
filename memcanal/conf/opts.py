"""Entry point for oslo-config-generator."""

from memcanal.conf import agent
from memcanal.conf import api
from memcanal.conf import base
from memcanal.conf import coordination
from memcanal.conf import database
from memcanal.conf import estimation
from memcanal.conf import hcache
from memcanal.conf import libvirt
from memcanal.conf import migration
from memcanal.conf import notifications
from memcanal.conf import nova
from memcanal.conf import optimizer
from memcanal.conf import pager
from memcanal.conf import placement
from memcanal.conf import pooling
from memcanal.conf import qemu
from memcanal.conf import retention
from memcanal.conf import rpc
from memcanal.conf import sampling
from memcanal.conf import service
from memcanal.conf import simulated
from memcanal.conf import upgrade_levels
from memcanal.conf import xen

_MODULES = (base, agent, api, coordination, database, estimation, hcache,
            libvirt, migration, notifications, nova, optimizer, pager,
            placement, pooling, qemu, retention, rpc, sampling, service,
            simulated, upgrade_levels, xen)


def list_opts():
    """Return [(group, opts)] for every memcanal option group."""
    return [(group, opts)
            for module in _MODULES
            for group, opts in module.list_opts().items()]
