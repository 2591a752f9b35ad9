"""Options every memcanal process shares."""

import socket

from oslo_config import cfg

base_opts = [
    cfg.StrOpt('host',
               default=socket.gethostname(),
               sample_default='<current_hostname>',
               help='Name of this node. A compute agent registers under '
                    'this name, so it must match the name nova-compute '
                    'uses for the same host.'),
    cfg.StrOpt('state_path',
               default='/var/lib/memcanal',
               help='Directory where memcanal keeps local state, such as '
                    'the agent\'s report sequence number.'),
]


def register_opts(conf):
    conf.register_opts(base_opts)


def list_opts():
    return {'DEFAULT': base_opts}
