"""Options of the service's optimizer: the policies, their mode, the
guardrails on what they may change."""

from oslo_config import cfg
from oslo_config import types

from memcanal.policy import base

POLICIES = ('isolated_sharing', 'esx', 'utube', 'none')

optimizer_group = cfg.OptGroup(
    'optimizer', title='Memory policy options',
    help='Every optimize_interval the service runs each host\'s policy on '
         'the latest reports of its VMs and records a decision: new memory '
         'targets, with the inputs and the predicted miss ratio of every '
         'VM. In recommend mode decisions wait for an operator to approve '
         'them through the API; in auto mode they are applied at once.')

optimizer_opts = [
    cfg.FloatOpt('optimize_interval', default=300.0, min=0.0,
                 help='Seconds between two runs of the optimizer; 0 turns '
                      'it off.'),
    cfg.StrOpt('mode', default='recommend', choices=('recommend', 'auto'),
               help='recommend: decisions wait for approval; auto: they '
                    'are applied as soon as they are made.'),
    cfg.StrOpt('policy', default='isolated_sharing', choices=POLICIES,
               help='The policy of hosts in no aggregate of '
                    'aggregate_policies. isolated_sharing: least geometric '
                    'mean of the miss ratios, no VM more than delta above '
                    'its misses at its flavor memory (Lu and Shen); esx: '
                    'proportional shares with an idle-memory tax; utube: '
                    'balance memory utilization (Liu et al.); none: no '
                    'decisions.'),
    # Typed so that a misspelled policy fails at start rather than
    # running another policy.
    cfg.Opt('aggregate_policies', default={},
            type=types.Dict(value_type=types.String(choices=POLICIES)),
            help='Policy by host aggregate, e.g. '
                 '"db:isolated_sharing,batch:utube"; each one of '
                 + ', '.join(POLICIES) + '.'),
    cfg.DictOpt('host_aggregates', default={},
                help='Aggregate of each host by host name, e.g. '
                     '"compute-1:db,compute-2:batch". Hosts not listed use '
                     'the policy option.'),
    cfg.FloatOpt('delta', default=0.05, min=0.0,
                 help='isolated_sharing: a VM given less than its flavor '
                      'memory may have at most this fraction more misses '
                      'than with it.'),
    cfg.FloatOpt('fault_rate_bound', default=base.DEFAULT_FAULT_RATE_BOUND,
                 min=1e-6, max=1.0,
                 help='Faults per minute a VM with a fault-rate curve (the '
                      'sampler\'s: the fraction of first-touch events that '
                      'fault at each size) may take, as a fraction of its '
                      'working set; the default is Google\'s far memory\'s '
                      '0.2 % per minute. Such a VM faults almost never at '
                      'its flavor memory, so isolated_sharing, esx, '
                      'migrations and pooling hold its faults at or under '
                      'this bound instead of delta above those (or at 1 + '
                      'delta times them, if they are more).'),
    cfg.FloatOpt('tax_rate', default=0.75, min=0.0, max=0.99,
                 help='esx: the idle memory tax rate.'),
    cfg.IntOpt('unit_mb', default=4, min=1,
               help='Step of the allocations the policies consider, MiB.'),
    cfg.StrOpt('default_mechanism', default='balloon',
               choices=('balloon', 'hotplug'),
               help='How to resize VMs that do not name a mechanism: '
                    'balloon (cannot grow past boot memory) or hotplug.'),
    cfg.IntOpt('kernel_mb', default=64, min=0,
               help='Guardrail: the guest kernel\'s footprint, added to a '
                    'VM\'s measured working set to give its floor.'),
    cfg.FloatOpt('max_step_fraction', default=0.05, min=0.001, max=1.0,
                 help='Guardrail: the largest change of a VM\'s memory in '
                      'one decision, as a fraction of its memory.'),
    cfg.IntOpt('min_change_mb', default=4, min=0,
               help='Guardrail: smaller changes are not made.'),
    cfg.FloatOpt('min_change_percent', default=2.0, min=0.0, max=100.0,
                 help='Guardrail: changes smaller than this percentage of '
                      'a VM\'s memory are not made either (hysteresis: a '
                      'curve measured again moves the optimum by a few '
                      'MiB, which is not worth a resize).'),
    cfg.FloatOpt('min_benefit', default=0.01, min=0.0, max=1.0,
                 help='isolated_sharing: a decision is made only when the '
                      'curves of the VMs it changes predict their miss '
                      'ratios, summed, at least this much lower at the '
                      'policy\'s targets than at their memory now, '
                      'counting only the VMs whose own miss ratio falls '
                      'by this much (or when a VM is '
                      'past its isolation bound, delta). A prediction is '
                      'about 0.02 off what the guest then measures: a '
                      'smaller gain is noise, and a steady workload '
                      'reaches a steady size. 0: every allocation that '
                      'changes a VM is made.'),
    cfg.FloatOpt('hold_seconds', default=300.0, min=0.0,
                 help='Guardrail: time after a VM\'s target changed before '
                      'it may change again.'),
    cfg.ListOpt('opt_out_projects', default=[],
                help='Projects whose VMs memcanal never resizes. A single '
                     'VM opts out with PATCH /instances/{uuid}.'),
    cfg.FloatOpt('action_timeout', default=300.0, min=1.0,
                 help='Seconds an agent has to answer for the actions of a '
                      'decision before they count as failed.'),
    cfg.FloatOpt('action_resend_interval', default=60.0, min=1.0,
                 help='Seconds after which actions no agent answered for '
                      'are sent again, until action_timeout: a decision '
                      'lost with its broker or its agent is still carried '
                      'out; the agent applies each action once.'),
]


def register_opts(conf):
    conf.register_group(optimizer_group)
    conf.register_opts(optimizer_opts, group=optimizer_group)


def list_opts():
    return {optimizer_group: optimizer_opts}
