"""Options of the simulated hypervisor driver."""

from oslo_config import cfg

simulated_group = cfg.OptGroup(
    'simulated', title='Simulated hypervisor driver options',
    help='A host whose VMs are workload generators. Used by memcanal-aio, '
         'by tests and by benchmarks; the same agent code runs on it as on '
         'a real hypervisor.')

simulated_opts = [
    cfg.IntOpt('instances', default=4, min=0,
               help='Number of VMs on the simulated host.'),
    cfg.IntOpt('host_memory_mb', default=65536, min=1,
               help='Memory of the simulated host in MiB.'),
    cfg.DictOpt('host_memory_mb_by_host', default={},
                help='Memory in MiB of named simulated hosts, e.g. '
                     '"sim-host-1:4096", in place of host_memory_mb: a '
                     'small one runs hot and its VMs are migrated off.'),
    cfg.IntOpt('reserved_host_memory_mb', default=2048, min=0,
               help='Memory kept for the simulated host itself, in MiB.'),
    cfg.IntOpt('instance_memory_mb', default=1024, min=1,
               help='Memory allocated to each simulated VM, in MiB.'),
    cfg.IntOpt('references_per_interval', default=200000, min=1,
               help='Page references each VM makes per report interval. '
                    'The VMs run the papers\' workloads (PRL\'s synthetic '
                    'application in RWRW and RRWW order, Hcache\'s Zipf '
                    'file server, write-all-then-work-on-a-quarter) over '
                    'working sets of 1/64 to 1/8 of their memory.'),
    cfg.FloatOpt('file_server_memory_ratio', default=0.125, min=0.001,
                 help='Size of the files of the file-server VMs (the '
                      'third of every four) as a multiple of their '
                      'memory; above 1 they are short of memory, the '
                      'case the memory policies help.'),
    cfg.IntOpt('guest_kernel_mb', default=64, min=0,
               help='Memory each simulated guest\'s kernel uses, counted '
                    'in its used and committed memory.'),
    cfg.ListOpt('fail_resize_instances', default=[],
                item_type=cfg.types.Integer(min=0),
                help='Indexes of VMs (0 is the first) whose resizes always '
                     'fail, to exercise the failure path.'),
    cfg.IntOpt('paging_scans_per_interval', default=4, min=1,
               help='How many times per report interval the pager of a '
                    'simulated VM looks at which pages it touched (its '
                    'cold-page detector\'s scan period) and, while the VM '
                    'is paged, swaps pages out to keep to its resident '
                    'target.'),
    cfg.IntOpt('paging_pool_mb', default=16, min=0,
               help='Pages each simulated pager keeps in memory after '
                    'swapping them out (TMemCanal\'s shared cache pool), '
                    'in MiB: a fault on one of them is served at pool '
                    'latency (12 us) instead of a store\'s (30 us from '
                    'a memory server, 75 us from the local store).'),
    cfg.IntOpt('memserver_mb', default=0, min=0,
               help='Memory a simulated memory server on each simulated '
                    'host lends to the others, in MiB, registered with '
                    'every report as a real host\'s memcanal-memserver '
                    'is. 0: none (memcanal-aio sets one).'),
    cfg.IntOpt('seed', default=0,
               help='Seed for the workloads, so runs can be repeated.'),
    cfg.StrOpt('resize_log',
               help='A file where the simulated host keeps its VMs\' '
                    'sizes across agent restarts, as a real hypervisor\'s '
                    'VMs keep theirs: each resize is appended to it as a '
                    'JSON line (instance, target_bytes, mechanism) and the '
                    'lines are replayed when the driver starts. Tests '
                    'count the resizes in it. Unset: VMs start at their '
                    'allocated memory.'),
    cfg.FloatOpt('resize_delay', default=0.0, min=0.0,
                 help='Seconds a resize takes after the VM has its new '
                      'size and before the driver returns: a test hook to '
                      'stop an agent in the middle of applying an action.'),
]


def register_opts(conf):
    conf.register_group(simulated_group)
    conf.register_opts(simulated_opts, group=simulated_group)


def list_opts():
    return {simulated_group: simulated_opts}
