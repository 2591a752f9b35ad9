"""Options of hypervisor-cache tracing (memcanal.estimation.hcache)."""

from oslo_config import cfg

from memcanal.estimation import hcache

hcache_group = cfg.OptGroup(
    'hcache', title='Hypervisor exclusive cache tracing options',
    help='On drivers that support it, the agent periodically lends part of '
         'each VM\'s memory to a hypervisor cache for a window, traces '
         'every access that misses the rest, and reports the miss-ratio '
         'curve below the VM\'s allocation as the "hcache" curve (Lu and '
         'Shen, USENIX ATC\'07). The VM runs with less memory of its own '
         'meanwhile, so this is off unless tracing_period is set.')

hcache_opts = [
    cfg.FloatOpt('tracing_period', default=0.0, min=0.0,
                 help='Seconds between the starts of two tracing windows of '
                      'a VM, rounded up to whole report intervals; 0 turns '
                      'tracing off.'),
    cfg.FloatOpt('tracing_window', default=300.0, min=0.1,
                 help='Seconds a VM runs in tracing mode, rounded up to '
                      'whole report intervals, at least two: the first '
                      'only fills the hypervisor\'s list of evicted pages.'),
    cfg.FloatOpt('cache_fraction', default=0.25, min=0.01, max=0.9,
                 help='Fraction of a VM\'s memory lent to the hypervisor '
                      'cache while tracing. The curve starts at the memory '
                      'the VM keeps, so a larger fraction shows the cost of '
                      'deeper cuts.'),
    cfg.StrOpt('write_policy', default='through',
               choices=hcache.WRITE_POLICIES,
               help='How the hypervisor cache handles the VM\'s writes: '
                    '"through" writes storage at once, so a host crash '
                    'loses nothing the guest was told is written; '
                    '"delayed" buffers them, saving device writes.'),
]


def register_opts(conf):
    conf.register_group(hcache_group)
    conf.register_opts(hcache_opts, group=hcache_group)


def list_opts():
    return {hcache_group: hcache_opts}
