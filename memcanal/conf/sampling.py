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
                      'interval (the hash of SHARDS: the same pages '
                      'every time). The cost grows with it: each sampled '
                      'page the guest uses faults once per interval.'),
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
