"""Options of the Xen hypervisor driver (memcanal.agent.drivers.xen)."""

from oslo_config import cfg

xen_group = cfg.OptGroup(
    'xen', title='Xen hypervisor driver options',
    help='The driver of a Xen host, run in its dom0 ([agent] driver = '
         'xen): its domains through libvirt\'s Xen (libxl) driver, their '
         'balloon statistics and resizes, and each domain\'s written '
         'frames from Xen\'s log-dirty by memcanal-logdirty (doc/xen.md).')

xen_opts = [
    cfg.StrOpt('connection_uri', default='xen:///system',
               help='libvirt connection URI of the host\'s libxl driver.'),
    cfg.IntOpt('reserved_host_memory_mb', default=0, min=0,
               help='Memory kept for the host besides Domain-0\'s, MiB '
                    '(Domain-0\'s own memory is always reserved).'),
    cfg.StrOpt('unowned_project_id', default='unowned',
               help='Project reported for domains without nova\'s owner '
                    'metadata: on Xen, which nova no longer drives, '
                    'usually all of them.'),
    cfg.StrOpt('logdirty_binary', default='memcanal-logdirty',
               help='memcanal-logdirty (hypervisor-patches/xen), run as '
                    '"BINARY DOMID INTERVAL 0" for each domain while it '
                    'runs; a name is looked up on PATH.'),
    cfg.FloatOpt('logdirty_interval', default=1.0, min=0.01,
                 help='Seconds of one log-dirty interval: how often each '
                      'domain\'s bitmap is read and cleared. Keep it '
                      'below [agent] report_interval.'),
    cfg.FloatOpt('logdirty_retry_interval', default=60.0, min=0.0,
                 help='Seconds before a helper that exited (log-dirty '
                      'already on for its domain, held by a migration or '
                      'save; a missing binary) is started again.'),
    cfg.FloatOpt('logdirty_stop_timeout', default=10.0, min=0.1,
                 help='Seconds a helper has to turn log-dirty off and '
                      'exit after SIGTERM before it is killed.'),
]


def register_opts(conf):
    conf.register_group(xen_group)
    conf.register_opts(xen_opts, group=xen_group)


def list_opts():
    return {xen_group: xen_opts}
