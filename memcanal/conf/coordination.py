"""Options of the coordination of several memcanal-service processes
(memcanal.service.coordination)."""

from oslo_config import cfg

coordination_group = cfg.OptGroup(
    'coordination', title='Coordination of service processes',
    help='Several memcanal-service processes share the reports\' queue. '
         'With a tooz backend, each periodic job that must run once '
         '(the optimizer with its migration, pooling and ratio planners, '
         'following up sent actions, marking gone instances, retention) '
         'runs in one process at a time, the holder of the job\'s lock, '
         'and another process takes it over when that one dies; the '
         'per-host work (following up sent actions, the host watch) is '
         'split over the live processes by a hash ring over the group of '
         'processes, and a dead process\'s hosts go to the others once '
         'its membership expires. Without a backend every process runs '
         'every job for every host: run one process only.')

coordination_opts = [
    cfg.StrOpt('backend_url', secret=True,
               help='tooz backend URL, e.g. redis://127.0.0.1:6379 '
                    '(?timeout=N: seconds a dead holder keeps a job\'s '
                    'lock and its hosts, 30 by default; redis+sentinel:// in '
                    'production) or mysql://user:pass@host/db (locks '
                    'held by a connection, freed when it closes; not '
                    'across Galera nodes). Unset: no coordination.'),
]


def register_opts(conf):
    conf.register_group(coordination_group)
    conf.register_opts(coordination_opts, group=coordination_group)


def list_opts():
    return {coordination_group: coordination_opts}
