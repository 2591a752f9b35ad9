"""Options of the central service."""

from oslo_config import cfg

service_group = cfg.OptGroup('service', title='Central service options')

service_opts = [
    cfg.IntOpt('host_down_after',
               default=180,
               min=1,
               help='Seconds without a report or registration after which '
                    'a compute host is marked down.'),
    cfg.IntOpt('periodic_interval',
               default=10,
               min=1,
               help='Seconds between runs of the service\'s periodic '
                    'tasks.'),
    cfg.IntOpt('max_mrc_points',
               default=256,
               min=2,
               help='Reports with a miss-ratio curve of more points than '
                    'this are rejected.'),
    cfg.IntOpt('max_instances_per_report',
               default=1024,
               min=1,
               help='Reports that describe more instances than this are '
                    'rejected.'),
]


def register_opts(conf):
    conf.register_group(service_group)
    conf.register_opts(service_opts, group=service_group)


def list_opts():
    return {service_group: service_opts}
