"""Options of placement: how the service reaches it (keystoneauth1's
session, auth and adapter options, as nova's [placement] has them) and
the bounds of the MEMORY_MB allocation ratios it sets there."""

from oslo_config import cfg

from memcanal.conf import ksa

SERVICE_TYPE = 'placement'

placement_group = cfg.OptGroup(
    'placement', title='Placement options',
    help='With enabled set, the service sets each compute node\'s '
         'MEMORY_MB allocation_ratio in placement from its VMs\' measured '
         'demand (memcanal.policy.overcommit), within min_ratio and '
         'max_ratio and at most max_step at a time, leaving every other '
         'inventory field, reserved among them, as nova-compute wrote it. '
         'nova-compute then must not set ram_allocation_ratio in its '
         '[DEFAULT] section (initial_ram_allocation_ratio only), or it '
         'writes its own ratio back every periodic update.')

memcanal_opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Set allocation ratios in placement.'),
    cfg.FloatOpt('min_ratio', default=1.0, min=0.1,
                 help='Lowest ratio set. 1.0 still offers a host\'s whole '
                      'memory whatever its VMs demand; memory that must '
                      'stay free is nova-compute\'s reserved_host_memory_mb, '
                      'which memcanal leaves alone.'),
    cfg.FloatOpt('max_ratio', default=1.5, min=0.1,
                 help='Highest ratio set. The default is nova\'s own '
                      'initial_ram_allocation_ratio: turned on with the '
                      'defaults, memcanal offers no host more flavor memory '
                      'than an unconfigured nova would and only lowers the '
                      'ratio where VMs use what they were given. Raise it '
                      'once the measurements are trusted: at 2.0, VMs that '
                      'all touched their whole flavor memory at once would '
                      'need as much again as the host has.'),
    cfg.FloatOpt('max_step', default=0.1, min=0.001,
                 help='Largest change of a ratio in one update, up or '
                      'down.'),
    cfg.FloatOpt('min_change', default=0.02, min=0.0,
                 help='Smaller changes of a ratio are not made.'),
    cfg.FloatOpt('target_utilization', default=0.9, min=0.01, max=1.0,
                 help='Demand over capacity that a host filled up to its '
                      'ratio should reach; U-tube\'s admission threshold.'),
    cfg.IntOpt('min_measured_instances', default=1, min=1,
               help='A host with fewer VMs whose working set was measured '
                    'keeps its ratio.'),
    cfg.IntOpt('update_attempts', default=5, min=1,
               help='Times an inventory update is tried when another '
                    'writer (nova-compute) changed the provider between '
                    'reading and writing it (409 '
                    'placement.concurrent_update).'),
]


def register_opts(conf):
    conf.register_group(placement_group)
    conf.register_opts(memcanal_opts, group=placement_group)
    ksa.register_opts(conf, placement_group, SERVICE_TYPE)


def list_opts():
    return {placement_group: memcanal_opts + ksa.list_opts(SERVICE_TYPE)}
