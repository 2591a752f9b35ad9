"""Options of remote paging (memcanal-pager, issue #17)."""

from oslo_config import cfg

pager_group = cfg.OptGroup(
    'pager', title='Remote paging options',
    help='One memcanal-pager daemon per guest (hypervisor-patches/pager) '
         'holds the guest\'s RAM through a userfaultfd that '
         'libmemcanal-uffd.so, preloaded into QEMU, hands over: it samples '
         'the guest\'s page accesses ([sampling]) and swaps out the pages '
         'the agent\'s cold-page detector finds, to a local file store and '
         'to the memory servers the service lends. Pagers run detached '
         'from the agent and outlive it; a restarted agent finds them '
         'again by the records in state_dir (doc/paging.md).')

pager_opts = [
    cfg.StrOpt('binary', default='memcanal-pager',
               help='The memcanal-pager daemon (make -C '
                    'hypervisor-patches/pager builds it into build/).'),
    cfg.StrOpt('shim',
               help='Path of libmemcanal-uffd.so, preloaded into QEMU '
                    '(built beside the daemon). Needed to page guests.'),
    cfg.StrOpt('local_store_dir', default='$state_path/pages',
               help='Directory of the local file store, <instance '
                    'uuid>.pages: where a paging action without a memory '
                    'server pages out to, and pooled pages too with '
                    'local_copy.'),
    cfg.BoolOpt('local_copy', default=False,
                help='Also keep a copy of each page a pooling action '
                     'pages out to a memory server in the local file '
                     'store: the fallback when the lender loses a page '
                     '(a memory server may drop pages at any time: its '
                     'operator\'s RECLAIM, a restart), at the cost of '
                     'writing every page to the local disk too. Off: '
                     'pooled pages are on the lender only, and a page it '
                     'drops is lost to the guest (read as zeros, counted '
                     'in the pager\'s lost).'),
    cfg.StrOpt('state_dir', default='$state_path/pagers',
               help='Directory of each guest\'s pager files, the '
                    'agent\'s alone (made 0700): the pager\'s state file '
                    '(<instance uuid>.state, which lets a pager take over '
                    'from one that died), the guest\'s page key (.key, 32 '
                    'random bytes, 0600: every page leaves the host '
                    'encrypted with it, and it never leaves the host), '
                    'its control socket (.ctl), the socket it takes its '
                    'guest\'s RAM on (.sock), its log (.log) and the '
                    'agent\'s record of it (.json, 0600: it holds the '
                    'lease tokens of the guest\'s memory servers). Keep '
                    'it short: socket paths have at most 107 bytes.'),
    cfg.IntOpt('pool_mb', default=0, min=0,
               help='MiB of TMemCanal\'s shared cache pool: pages recently '
                    'paged out stay in memory and a fault takes them from '
                    'it first. 0: no pool.'),
    cfg.StrOpt('pool_path', default='/dev/shm/memcanal/pool',
               help='The file the pool lives in, shared by every pager of '
                    'this host (the first creates it with pool_mb), so '
                    'the pool is the host\'s, not one per VM. Its '
                    'directory is root\'s alone (the agent makes it '
                    '0700, and takes one it did not make only if it is '
                    'root\'s, mode 0700, not a link; otherwise no pager '
                    'starts and the error says why): a pager refuses a '
                    'pool file someone else could have planted. Empty: '
                    'each pager has a pool of its own.'),
    cfg.FloatOpt('cold_after', min=0.1,
                 help='Seconds a page must go unaccessed, once in the '
                      'lowest queue, before it is cold (the detector\'s '
                      'expire-time-II). Default: 20 report intervals. '
                      'Where the pager samples, a page outside the hashed '
                      'sample is seen at full passes only ([sampling] '
                      'full_pass_every), and is never cold while it was '
                      'seen since the last one.'),
    cfg.FloatOpt('timeout', default=120.0, min=1.0,
                 help='Seconds the agent waits for a pager to answer a '
                      'command (a swap-out of many pages included).'),
]


def register_opts(conf):
    conf.register_group(pager_group)
    conf.register_opts(pager_opts, group=pager_group)


def list_opts():
    return {pager_group: pager_opts}
