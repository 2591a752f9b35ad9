"""Options of the agent's estimators (memcanal.estimation)."""

from oslo_config import cfg

from memcanal.estimation import logsim
from memcanal.estimation import mrc
from memcanal.estimation import wss

estimation_group = cfg.OptGroup(
    'estimation', title='Working-set and miss-ratio estimation options',
    help='How the compute agent turns each VM\'s page-reference logs into '
         'working-set sizes and miss-ratio curves. The PRL estimator\'s '
         'observation interval (mu) is [agent] report_interval.')

estimation_opts = [
    cfg.IntOpt('prl_tau', default=wss.PRL_TAU, min=1,
               help='Log entries a page needs in the cumulative buffer to '
                    'count as hot (the PRL paper\'s tau).'),
    cfg.FloatOpt('prl_stability_window', default=wss.PRL_OMEGA_S, min=0.1,
                 help='Seconds over which the hot-page count must not '
                      'change for the PRL estimate to be taken (omega); '
                      'rounded up to whole report intervals.'),
    cfg.IntOpt('guest_kernel_footprint_mb', default=0, min=0,
               help='Memory the guest kernel needs whatever the workload '
                    '(epsilon), added to the PRL estimate.'),
    cfg.IntOpt('log_entries', default=logsim.LOG_ENTRIES, min=1,
               help='Entries of each vCPU\'s PML and PRL log buffer.'),
    cfg.IntOpt('tlb_entries', default=logsim.TLB_ENTRIES, min=1,
               help='Entries of the emulated per-vCPU TLB; PRL logs only '
                    'references that miss it.'),
    cfg.IntOpt('esx_sample_pages', default=wss.ESX_SAMPLE_PAGES, min=1,
               help='Pages ESX-style sampling invalidates per period.'),
    cfg.FloatOpt('esx_period', default=wss.ESX_PERIOD_S, min=0.1,
                 help='Seconds of one ESX sampling period.'),
    cfg.ListOpt('mrc_methods', default=['shards'],
                item_type=cfg.types.String(choices=sorted(mrc.METHODS)),
                help='Miss-ratio curves to report per VM: shards '
                     '(fixed-rate SHARDS, the cheap default), '
                     'shards_fixed_size, aet, exact (every reference; '
                     'costly at high log rates).'),
    cfg.FloatOpt('shards_rate', default=0.01, min=1e-6, max=1.0,
                 help='Sampling rate of fixed-rate SHARDS.'),
    cfg.IntOpt('shards_max_pages', default=8192, min=16,
               help='Pages tracked by fixed-size SHARDS.'),
    cfg.IntOpt('mrc_window', default=4, min=1,
               help='Report intervals of logged references each miss-ratio '
                    'curve covers.'),
    cfg.IntOpt('sampling_window', default=12, min=1,
               help='Sampling intervals ([sampling] interval) whose first '
                    'touches the "sampled" fault-rate curve counts.'),
    cfg.IntOpt('sampling_max_reuse', default=12, min=1,
               help='Longest reuse time, in sampling intervals, the '
                    '"sampled" curve tells apart: its sizes are the '
                    'working sets of 1 to this many intervals (12 '
                    'intervals of 10 s: the 2 minutes of Google\'s cold '
                    'age); longer reuses miss at every size.'),
]


def register_opts(conf):
    conf.register_group(estimation_group)
    conf.register_opts(estimation_opts, group=estimation_group)


def list_opts():
    return {estimation_group: estimation_opts}
