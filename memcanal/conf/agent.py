"""Options of the compute agent."""

from oslo_config import cfg

agent_group = cfg.OptGroup('agent', title='Compute agent options')

agent_opts = [
    cfg.StrOpt('driver',
               default='libvirt',
               help='Hypervisor driver, by its name in the '
                    '"memcanal.agent.drivers" entry point group: libvirt '
                    '(a compute node\'s domains), xen (a Xen host\'s '
                    'domains, from its dom0: [xen]), qemu (guests traced '
                    'by memtrace) or simulated (invented VMs, for trying '
                    'memcanal out; memcanal-aio uses it).'),
    cfg.StrOpt('availability_zone',
               help='Nova availability zone of this host, sent with every '
                    'report: the migration planner keeps a VM in its zone, '
                    'as a live migration does. Unset: the zone the host '
                    'had (none for a new host).'),
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
                    'registration, or its question about which reports '
                    'are stored, before it tries again. A message sent '
                    'before the service has started is lost, so this is '
                    'kept well below rpc_response_timeout.'),
    cfg.IntOpt('max_unconfirmed_reports',
               default=1000,
               min=1,
               help='Most reports the agent keeps in its outbox '
                    '(state_path) until the service confirms it stored '
                    'them; past it the oldest are dropped with a warning. '
                    'At the default report interval, 1000 cover an outage '
                    'of the service, its broker or its database of about '
                    '16 hours.'),
    cfg.FloatOpt('report_confirm_delay',
                 default=10.0,
                 min=0.0,
                 help='Seconds after the agent sent a report that it asks '
                      'the service whether the report is stored, and sends '
                      'it again if not. Longer than the service takes to '
                      'store a report, so a report is seldom sent twice; '
                      'the service stores a report sent twice once.'),
    cfg.IntOpt('max_resent_reports',
               default=50,
               min=1,
               help='Most unconfirmed reports the agent sends again per '
                    'report interval, oldest first, so a service back from '
                    'an outage is not flooded.'),
    cfg.IntOpt('max_mrc_points',
               default=256,
               min=2,
               help='Most (size, miss ratio) points the agent sends per '
                    'miss-ratio curve; longer curves are resampled.'),
    cfg.FloatOpt('target_settle_timeout',
                 default=30.0,
                 min=0.0,
                 help='Seconds the agent waits, after a memory target was '
                      'set, for the guest to reach it (a balloon or '
                      'virtio-mem completes in the guest after the '
                      'hypervisor accepted it), reading the VM\'s memory '
                      'back every 0.5 s. The action\'s result says what '
                      'the guest reached (reached_bytes) and whether it '
                      'still lagged the target (lagged); the service '
                      'counts the VM at what it reached. The actions of '
                      'one decision share this wait (they are applied one '
                      'after another: a lagging shrink leaves the growths '
                      'after it less), so a decision is answered within it '
                      'plus the resizes\' own time. 0: read back once.'),
    cfg.StrOpt('host_key',
               help='PEM file of this host\'s Ed25519 private key, which '
                    'signs everything the agent sends the service. The '
                    'service pins the key the host first registers with '
                    'and refuses messages of the host signed by any other '
                    '(memcanal-manage host forget-key lets a rebuilt host '
                    'register a new one). Created, mode 0600, on the '
                    'agent\'s first start. Unset: '
                    '$state_path/agent-<host>.key.'),
    cfg.StrOpt('service_public_key',
               help='PEM file of the service\'s Ed25519 public key (the '
                    'pair of [service] signing_key). The agent applies only '
                    'the actions the service signed with it; the same file '
                    'is memcanal-memserver\'s --lease-key. Unset: the agent '
                    'reports, but refuses every action.'),
    cfg.HostAddressOpt('metrics_listen_address',
                       default='127.0.0.1',
                       help='Address memcanal-agent serves its node\'s '
                            'Prometheus metrics on (its VMs\' pager faults '
                            'and their latency, paged and resident bytes, '
                            'sampling rate and cost, collection time), at '
                            'any path, without a token.'),
    cfg.PortOpt('metrics_port',
                default=0,
                help='Port of memcanal-agent\'s Prometheus metrics; 0 '
                     'serves none. Each agent is a target of its own '
                     '(doc/monitoring.md).'),
]


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)


def list_opts():
    return {agent_group: agent_opts}
