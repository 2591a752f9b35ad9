"""Options of the libvirt hypervisor driver
(memcanal.agent.drivers.libvirt)."""

from oslo_config import cfg

DIRTY_RATE_MODES = ('auto', 'page-sampling', 'dirty-bitmap', 'dirty-ring',
                    'off')

libvirt_group = cfg.OptGroup(
    'libvirt', title='libvirt hypervisor driver options',
    help='The driver of a real compute node: the domains nova runs under '
         'libvirt\'s QEMU driver (KVM or TCG), their balloon statistics '
         'and dirty rate, and their resizes by balloon, virtio-mem or '
         'paging. A Xen host has a driver of its own: [xen].')

libvirt_opts = [
    cfg.StrOpt('connection_uri', default='qemu:///system',
               help='libvirt connection URI; the same as nova-compute\'s '
                    '[libvirt] connection_uri.'),
    cfg.IntOpt('memory_stats_period', min=0,
               help='Seconds between two balloon-statistics updates the '
                    'guest sends. Unset: [agent] report_interval rounded '
                    'up. A domain that already updates at least this '
                    'often (nova\'s mem_stats_period_seconds) is left as '
                    'it is; 0 never changes any domain.'),
    cfg.StrOpt('dirty_rate_mode', default='auto',
               choices=[('auto', 'dirty-bitmap on KVM domains (KVM dirty '
                                 'logging, PML-backed on Intel), '
                                 'page-sampling on the others'),
                        ('page-sampling', 'hash sampled pages; any QEMU '
                                          'accelerator'),
                        ('dirty-bitmap', 'KVM dirty logging; only used on '
                                         'KVM domains (QEMU 7.2 under TCG '
                                         'crashes on it)'),
                        ('dirty-ring', 'KVM dirty ring; QEMU must run with '
                                       'dirty-ring-size set'),
                        ('off', 'do not measure the dirty rate')],
               help='How libvirt measures each QEMU domain\'s dirty rate '
                    '(virDomainStartDirtyRateCalc), reported as the '
                    'dirty_rate_mib_per_s guest statistic.'),
    cfg.IntOpt('dirty_rate_period', default=1, min=1, max=60,
               help='Seconds each dirty-rate calculation lasts; keep it '
                    'below [agent] report_interval.'),
    cfg.IntOpt('reserved_host_memory_mb', default=0, min=0,
               help='Memory kept for the host itself, MiB; set it to '
                    'nova\'s reserved_host_memory_mb.'),
    cfg.BoolOpt('paging', default=True,
                help='Listen on the MEMCANAL_PAGER_SOCKET of every domain '
                     'whose XML sets it (<qemu:env>, doc/paging.md), from '
                     'before the domain starts, so that its QEMU hands its '
                     'RAM to the agent: its memcanal-pager then samples it '
                     '([sampling] enabled: from the handoff on) and pages '
                     'it (apply_memory_target with mechanism paging, '
                     '[pager] options). Off: no domain is sampled or '
                     'paged.'),
    cfg.StrOpt('pager_socket_dir',
               help='Where the QEMU wrapper (hypervisor-patches/pager/'
                    'memcanal-qemu, doc/deployment.md) has every guest '
                    'hand its RAM over, <dir>/<uuid>.sock: set it to the '
                    'wrapper\'s SOCKET_DIR on a nova compute node, whose '
                    'domains set no MEMCANAL_PAGER_SOCKET of their own. '
                    'Unset: only domains that set it are sampled and '
                    'paged.'),
    cfg.StrOpt('qemu_group', default='libvirt-qemu',
               help='The group libvirt runs QEMU as (qemu.conf\'s group: '
                    'libvirt-qemu on Debian and Ubuntu, qemu on Fedora '
                    'and RHEL). The pager sockets the agent listens on '
                    'are root\'s and this group\'s, mode 0660: no other '
                    'user can connect.'),
    cfg.StrOpt('qemu_run_dir', default='/run/libvirt/qemu',
               help='Where libvirt keeps the pid file of each domain\'s '
                    'QEMU (<domain name>.pid): an offer of guest RAM is '
                    'taken only from the process that file names '
                    '(doc/paging.md). The system daemon\'s default.'),
    cfg.StrOpt('unowned_project_id', default='unowned',
               help='Project reported for domains without nova\'s owner '
                    'metadata (not started by nova). List it in '
                    '[optimizer] opt_out_projects to leave them alone.'),
]


def register_opts(conf):
    conf.register_group(libvirt_group)
    conf.register_opts(libvirt_opts, group=libvirt_group)


def list_opts():
    return {libvirt_group: libvirt_opts}
