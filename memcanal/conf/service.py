"""Options of the central service."""

from oslo_config import cfg

service_group = cfg.OptGroup('service', title='Central service options')

service_opts = [
    cfg.IntOpt('missed_heartbeats',
               default=3,
               min=1,
               help='A compute host is down once it has sent no report or '
                    'registration for this many of its own report '
                    'intervals (plus heartbeat_grace).'),
    cfg.FloatOpt('heartbeat_grace',
                 default=10.0,
                 min=0.0,
                 help='Seconds added to missed_heartbeats intervals before '
                      'a host is down: the time a report may take to be '
                      'delivered and stored.'),
    cfg.FloatOpt('instance_gone_after',
                 default=600.0,
                 min=0.0,
                 help='Seconds an instance may be missing from its host\'s '
                      'reports before it is marked deleted: it then leaves '
                      'the optimizer\'s inputs and is listed only on '
                      'request (GET /instances?deleted=true). Judged '
                      'against the host\'s own last report, so the VMs '
                      'of a host whose agent stopped are kept.'),
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
    cfg.IntOpt('report_batch_size',
               default=32,
               min=1,
               help='Most reports stored in one transaction. Reports that '
                    'arrive while another transaction is being written '
                    'wait for it and are then stored together, so under '
                    'load a transaction and its INSERTs serve many; a '
                    'lone report is never held back. 1 stores each alone.'),
    cfg.StrOpt('signing_key',
               help='PEM file of the service\'s Ed25519 private key '
                    '(memcanal-manage service create-key), readable by the '
                    'service alone. It signs every action the service '
                    'casts to agents and the lease tokens memory servers '
                    'admit pagers by; agents and memory servers check them '
                    'with its public key ([agent] service_public_key, '
                    'memcanal-memserver --lease-key). Unset: the service '
                    'still takes reports and serves the API, but fails the '
                    'actions meant for agents at once, saying why, and '
                    'plans no memory pooling.'),
    cfg.HostAddressOpt('metrics_listen_address',
                       default='127.0.0.1',
                       help='Address memcanal-service serves its own '
                            'Prometheus metrics on (what this process '
                            'ingested: reports by outcome, ingest latency, '
                            'pager faults), at any path, without a token.'),
    cfg.PortOpt('metrics_port',
                default=0,
                help='Port of memcanal-service\'s Prometheus metrics; 0 '
                     'serves none. Each service process is a target of '
                     'its own (doc/monitoring.md).'),
]


def register_opts(conf):
    conf.register_group(service_group)
    conf.register_opts(service_opts, group=service_group)


def list_opts():
    return {service_group: service_opts}
