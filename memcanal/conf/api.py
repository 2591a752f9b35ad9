"""Options of the REST API."""

from oslo_config import cfg

api_group = cfg.OptGroup('api', title='REST API options')

api_opts = [
    cfg.StrOpt('auth_strategy',
               default='keystone',
               choices=[('keystone',
                         'Validate tokens with keystonemiddleware'),
                        ('noauth2', 'Trust the X-Auth-Token, X-Project-Id '
                                    'and X-Roles headers; for all-in-one '
                                    'and tests only')],
               help='How API requests are authenticated.'),
    cfg.HostAddressOpt('bind_host',
                       default='127.0.0.1',
                       help='Address memcanal-aio serves the API on.'),
    cfg.PortOpt('bind_port',
                default=8793,
                help='Port memcanal-aio serves the API on.'),
    cfg.IntOpt('max_limit',
               default=1000,
               min=1,
               help='Largest page a collection request may ask for with '
                    '"limit", and the page size when it gives none.'),
    cfg.IntOpt('max_request_body_size',
               default=256 * 1024,
               min=1,
               help='Largest request body, in bytes, the API reads; a '
                    'larger one is refused with 413 before it is read '
                    '(a chunked one after this many bytes plus one). The '
                    'largest body memcanal takes, a decision\'s reason, '
                    'is at most 4000 characters.'),
    cfg.BoolOpt('metrics_enabled',
                default=False,
                help='Serve GET /metrics, the cloud\'s memory as read from '
                     'the database in Prometheus\'s text format, without '
                     'a token: Prometheus cannot send a keystone token. It '
                     'names hosts, instance uuids and project ids, so turn '
                     'it on only where /metrics is reachable from the '
                     'monitoring network alone (an internal API endpoint, '
                     'or a load balancer rule); off, /metrics is a 404. '
                     'doc/monitoring.md.'),
    cfg.BoolOpt('metrics_per_instance',
                default=True,
                help='Include per-VM series (label instance) in GET '
                     '/metrics: one series per live VM and metric, gone '
                     'once the VM is marked deleted. Off for clouds whose '
                     'Prometheus should hold per-host series only.'),
]


def register_opts(conf):
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)


def list_opts():
    return {api_group: api_opts}
