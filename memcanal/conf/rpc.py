"""Options of the RPC between the service and its agents."""

from oslo_config import cfg

rpc_group = cfg.OptGroup('rpc', title='RPC between service and agents')

rpc_opts = [
    cfg.IntOpt('replay_window',
               default=300,
               min=10,
               help='Seconds a signed RPC message stays good: the service '
                    'and the agents refuse one sent more than this before '
                    '(or after) their own clock says, or one whose nonce '
                    'they saw within it (memcanal.rpc.freshness). Keep '
                    'the hosts\' clocks within a fraction of it (NTP); a '
                    'message that waited in the queue longer is sent '
                    'again by whoever needs it. The same on every node.'),
]


def register_opts(conf):
    conf.register_group(rpc_group)
    conf.register_opts(rpc_opts, group=rpc_group)


def list_opts():
    return {rpc_group: rpc_opts}
