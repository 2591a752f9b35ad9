"""Options of memory pooling (memcanal.policy.pooling): which hosts page
cold memory out to which memory servers, and the memory server a host
lends."""

from oslo_config import cfg

from memcanal.policy import pooling

pooling_group = cfg.OptGroup(
    'pooling', title='Memory pooling options',
    help='Every [optimizer] optimize_interval, with enabled set, the '
         'service pages the cold memory of VMs on hosts whose VMs hold '
         'more than threshold of their capacity out to the memory servers '
         'of hosts with idle memory, and takes it back when they have '
         'room; a decision per VM, through the same recommend/approve/'
         'apply/rollback flow as memory targets, in [optimizer] mode. '
         'Agents register the memory server of their host '
         '(memserver_address).')

pooling_opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Pool memory across hosts by remote paging.'),
    cfg.FloatOpt('threshold', default=pooling.DEFAULT_THRESHOLD,
                 min=0.0, max=1.0,
                 help='Resident memory over capacity above which a host '
                      'pages cold memory out (U-tube\'s 90 %).'),
    cfg.FloatOpt('target', default=pooling.DEFAULT_TARGET, min=0.0,
                 max=1.0,
                 help='Resident memory over capacity a host pages down to.'),
    cfg.FloatOpt('release', default=pooling.DEFAULT_RELEASE, min=0.0,
                 max=1.0,
                 help='A host under this takes its paged VMs back whole '
                      'while they fit under it; a lender lends only while '
                      'its own VMs and what it lends stay under it.'),
    cfg.FloatOpt('delta', default=pooling.DEFAULT_DELTA, min=0.0,
                 help='Miss bound: no VM keeps less resident than the '
                      'memory at which it has 1 + delta times its misses '
                      'at its flavor memory.'),
    cfg.IntOpt('min_page_mb', default=pooling.DEFAULT_MIN_PAGE_BYTES
               // 2 ** 20, min=0,
               help='Least memory a decision pages out of a VM.'),
    cfg.StrOpt('memserver_address',
               help='HOST:PORT of the memcanal-memserver this host runs '
                    '(hypervisor-patches/memserver), which its agent '
                    'registers with the service to lend its idle memory. '
                    'Unset: the host lends nothing.'),
    cfg.StrOpt('memserver_admin_socket',
               default='/run/memcanal/memserver.admin',
               help='The admin Unix socket of this host\'s '
                    'memcanal-memserver (its --admin): the agent asks it '
                    'what the server holds (STAT) to register it. Only '
                    'root may use it; no network client can.'),
    cfg.IntOpt('lease_lifetime', default=3600, min=60, max=86400,
               help='Seconds a lease token the service signs is good for '
                    '(memcanal-memserver refuses it from then on, and '
                    'caps it at its own --max-token-lifetime). The service '
                    'renews the tokens of live leases every third of it, '
                    'and has lenders revoke ended leases until then. '
                    'Shorter: a stolen token and an orphan\'s pages last '
                    'less; the renewals come more often.'),
    cfg.StrOpt('tls_ca_file',
               help='PEM file of the CA that signed the memory servers\' '
                    'certificates (tools/pki.sh ca makes one): the pagers '
                    'of this host\'s VMs check every memory server they '
                    'page to against it, and the host name it is '
                    'registered under (memcanal-pager --tls-ca). Unset: '
                    'a paging action that lends a memory server fails.'),
]


def register_opts(conf):
    conf.register_group(pooling_group)
    conf.register_opts(pooling_opts, group=pooling_group)


def list_opts():
    return {pooling_group: pooling_opts}
