"""Options of the compute agent."""

from oslo_config import cfg

agent_group = cfg.OptGroup('agent', title='Compute agent options')

agent_opts = [
    cfg.StrOpt('driver',
               default='libvirt',
               help='Hypervisor driver, by its name in the '
                    '"memcanal.agent.drivers" entry point group: libvirt '
                    '(a compute node\'s domains), qemu (guests traced '
                    'by memtrace) or simulated (invented VMs, for trying '
                    'memcanal out; memcanal-aio uses it).'),
    cfg.FloatOpt('report_interval',
                 default=60.0,
                 min=0.1,
                 help='Seconds between two reports of this host\'s '
                      'instances to the service. Each report is also the '
                      'host\'s heartbeat.'),
    cfg.IntOpt('register_timeout',
               default=10,
               min=1,
               help='Seconds the agent waits for the service to answer its '
                    'registration before it tries again. A message sent '
                    'before the service has started is lost, so this is '
                    'kept well below rpc_response_timeout.'),
    cfg.IntOpt('max_mrc_points',
               default=256,
               min=2,
               help='Most (size, miss ratio) points the agent sends per '
                    'miss-ratio curve; longer curves are resampled.'),
]


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)


def list_opts():
    return {agent_group: agent_opts}
