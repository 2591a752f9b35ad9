"""Options of guest access sampling (memcanal-pager, issue #24).

Every driver that samples guests reads this group: the simulated one
for its VMs, the libvirt and qemu drivers for their pagers.
"""

from oslo_config import cfg

sampling_group = cfg.OptGroup(
    'sampling', title='Guest access sampling options',
    help='How a guest\'s memory accesses are sampled through its RAM\'s '
         'userfaultfd: every interval the pager zaps a fixed hashed '
         'sample of the guest\'s pages and records the first access to '
         'each; every few intervals it zaps every page (a full pass). '
         'The agent turns what it saw into each VM\'s "sampled" working '
         'set and fault-rate curve (doc/estimation.md, "Sampled '
         'accesses") and feeds it to the cold-page detector of paging.')

sampling_opts = [
    cfg.BoolOpt('enabled', default=True,
                help='Sample the accesses of every guest whose RAM the '
                     'agent can reach.'),
    cfg.FloatOpt('rate', default=0.01, min=1e-6, max=1.0,
                 help='Fraction of a guest\'s pages sampled every '
                      'interval at first (the hash of SHARDS: the same '
                      'pages every time), and always with target_error '
                      '0. The cost grows with it: each sampled page the '
                      'guest uses faults once per interval.'),
    cfg.FloatOpt('target_error', default=0.05, min=0.0, max=1.0,
                 help='Relative error, either way at 95 % confidence, '
                      'the agent samples each VM for: every interval it '
                      'sets the VM\'s rate to the one whose sample of '
                      'its recent working set is that close (fewer than '
                      'about 1,500 sampled pages at 5 %), within '
                      'min_rate and max_rate and the fault budgets. 0: '
                      'no adaptation, every VM sampled at "rate".'),
    cfg.FloatOpt('min_rate', default=0.01, min=1e-6, max=1.0,
                 help='Lowest rate the agent samples a VM at, whatever '
                      'the fault budgets say.'),
    cfg.FloatOpt('max_rate', default=1.0, min=1e-6, max=1.0,
                 help='Highest rate the agent samples a VM at (a small '
                      'or quiet VM needs a large share of its few pages '
                      'sampled; its faults are few).'),
    cfg.FloatOpt('vm_fault_budget', default=500.0, min=0.0,
                 help='Sampled first touches per second one VM may '
                      'take (each is a fault the pager serves, about 5 '
                      'to 30 us of the vCPU): the rate is lowered to '
                      'keep within it. 0: no budget.'),
    cfg.FloatOpt('host_fault_budget', default=4000.0, min=0.0,
                 help='Sampled first touches per second all the host\'s '
                      'VMs together may take: every VM\'s rate is '
                      'scaled down alike to keep within it. 0: no '
                      'budget.'),
    cfg.IntOpt('resalt_every', default=0, min=0,
               help='Every this many intervals the agent gives each '
                    'VM\'s sample a new salt (another hashed sample), so '
                    'that the error of a fixed sample of a set of pages '
                    'that stays does not repeat interval after interval; '
                    'the window\'s and the curve\'s estimates then start '
                    'over. 0: never.'),
    cfg.FloatOpt('systematic_pages', default=40.0, min=0.0,
                 help='Pages an interval\'s sampled working set may count '
                      'beyond the guest\'s own loads, stores and code: '
                      'the guest\'s page tables the MMU walks and '
                      'devices\' DMA, which the sampler sees and the '
                      'guest\'s accesses do not make. The low end of every '
                      'sampled working set\'s 95 % interval reaches this '
                      'much lower (doc/estimation.md, "The reference": '
                      'at most 30 to 41 pages an interval measured on a '
                      'small guest); the estimate and the high end, which '
                      'demand is taken from, do not move. 0: none.'),
    cfg.FloatOpt('interval', min=0.1,
                 help='Seconds between two zaps of the sample: the '
                      'working set is counted per interval, and a reuse '
                      'time in the curve is a number of intervals. '
                      'Default: [agent] report_interval.'),
    cfg.IntOpt('full_pass_every', default=12, min=0,
               help='Every this many intervals every page of the guest '
                    'is zapped instead of the sample, so that the '
                    'cold-page detector learns which pages are idle '
                    '(the 12th, 24th, ... interval). 0: never; paging '
                    'then finds cold pages in the sample only.'),
]


def register_opts(conf):
    conf.register_group(sampling_group)
    conf.register_opts(sampling_opts, group=sampling_group)


def list_opts():
    return {sampling_group: sampling_opts}
