"""Options of the qemu hypervisor driver (guests traced by memtrace)."""

from oslo_config import cfg

from memcanal.estimation import logsim

qemu_group = cfg.OptGroup(
    'qemu', title='QEMU guest-tracing driver options',
    help='Guests run under QEMU TCG, traced by the memtrace plugin '
         '(hypervisor-patches/memtrace), which emulates PRL and PML logs '
         'from their real loads and stores, or sampled by their '
         'memcanal-pager (paging, [sampling]), or both. The agent attaches '
         'to every plugin socket in socket_dir and can start guests '
         'itself. The log and TLB sizes are [estimation] log_entries and '
         'tlb_entries.')

# The test guest's serial console, quiet, and no reboot on a panic.
GUEST_APPEND = 'console=ttyS0 quiet panic=-1'

qemu_opts = [
    cfg.StrOpt('binary', default='qemu-system-x86_64',
               help='The QEMU system emulator the driver starts guests '
                    'with.'),
    cfg.StrOpt('plugin',
               help='Path of memtrace.so (tools/build-test-guest.sh builds '
                    'it into build/test-guest). Unset: the guests the '
                    'driver starts are not traced (start them with paging '
                    'to have them sampled).'),
    cfg.StrOpt('socket_dir', default='$state_path/memtrace',
               help='Directory of the plugins\' sockets, one '
                    '<instance uuid>.sock per guest, and of the guests\' '
                    'serial consoles (<instance uuid>.console). The agent '
                    'attaches to every socket that appears here.'),
    cfg.IntOpt('instances', default=0, min=0,
               help='Guests the driver starts itself from kernel and '
                    'initrd; 0 only attaches to guests started by '
                    'someone else.'),
    cfg.StrOpt('kernel', help='Kernel of the guests the driver starts.'),
    cfg.StrOpt('initrd', help='Initramfs of the guests the driver starts.'),
    cfg.StrOpt('append', default=GUEST_APPEND,
               help='Kernel command line of the guests the driver starts.'),
    cfg.IntOpt('memory_mb', default=512, min=16,
               help='Memory of each guest the driver starts, in MiB.'),
    cfg.IntOpt('vcpus', default=1, min=1,
               help='vCPUs of each guest the driver starts.'),
    cfg.StrOpt('project_id', default='memcanal',
               help='Project reported for the traced guests, which no '
                    'cloud assigned.'),
    cfg.IntOpt('handler_base_ns', default=logsim.HANDLER_BASE_NS, min=0,
               help='Nanoseconds a log-full event costs beyond copying the '
                    'log (the IPI or VM exit): PRL misses references for '
                    'that long, PML stops the vCPU for it.'),
    cfg.IntOpt('ring_logs', default=2048, min=1,
               help='Full logs the plugin holds per vCPU for the agent; '
                    'when they are all waiting, PRL misses references and '
                    'PML stops the vCPU.'),
    cfg.BoolOpt('paging', default=False,
                help='Start guests with their RAM in a shared memfd, '
                     '[pager] shim preloaded into QEMU, and a '
                     'memcanal-pager per guest, which samples them '
                     '([sampling]) and pages their cold memory out when '
                     'apply_memory_target asks with mechanism paging '
                     '([pager] options).'),
    cfg.FloatOpt('sync_timeout', default=10.0, min=0.1,
                 help='Seconds the agent waits for a plugin to hand over '
                      'its logs at each report.'),
]


def register_opts(conf):
    conf.register_group(qemu_group)
    conf.register_opts(qemu_opts, group=qemu_group)


def list_opts():
    return {qemu_group: qemu_opts}
