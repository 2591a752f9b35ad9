"""All of memcanal's configuration options, registered on the global CONF.

oslo.messaging only works with the global ``cfg.CONF``, so every part of
memcanal registers its options here rather than on private ConfigOpts.
"""

from oslo_config import cfg

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

CONF = cfg.CONF

base.register_opts(CONF)
coordination.register_opts(CONF)
agent.register_opts(CONF)
api.register_opts(CONF)
database.register_opts(CONF)
coordination.register_opts(CONF)
estimation.register_opts(CONF)
hcache.register_opts(CONF)
libvirt.register_opts(CONF)
migration.register_opts(CONF)
notifications.register_opts(CONF)
nova.register_opts(CONF)
optimizer.register_opts(CONF)
pager.register_opts(CONF)
placement.register_opts(CONF)
pooling.register_opts(CONF)
qemu.register_opts(CONF)
retention.register_opts(CONF)
rpc.register_opts(CONF)
sampling.register_opts(CONF)
service.register_opts(CONF)
simulated.register_opts(CONF)
upgrade_levels.register_opts(CONF)
xen.register_opts(CONF)
