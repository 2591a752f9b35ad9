"""Options of migrations off hot hosts (memcanal.policy.migration) and of
who carries them out."""

from oslo_config import cfg

from memcanal.policy import demand
from memcanal.policy import migration

migration_group = cfg.OptGroup(
    'migration', title='Migration options',
    help='Every [optimizer] optimize_interval, with enabled set, the '
         'service plans live migrations off the hosts whose measured '
         'demand stayed above threshold of their capacity for '
         'hold_seconds, and records a decision per migration; it goes '
         'through the same recommend/approve/apply/rollback flow as '
         'memory targets, in [optimizer] mode.')

migration_opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Plan migrations off hot hosts.'),
    cfg.StrOpt('executor', default='nova', choices=('nova', 'agent'),
               help='Who moves a VM. nova: the service asks nova\'s API '
                    '(the [nova] options) to live-migrate it and follows '
                    'the migration. agent: the source host\'s agent moves '
                    'it itself; only the simulated driver can '
                    '(memcanal-aio sets it).'),
    cfg.FloatOpt('threshold', default=demand.DEFAULT_THRESHOLD,
                 min=0.0, max=1.0,
                 help='Measured demand over capacity above which a host '
                      'is hot (U-tube\'s 90 %). Destinations must stay at '
                      'or under it, as the nova filter requires.'),
    cfg.FloatOpt('margin', default=demand.DEFAULT_MARGIN, min=0.0,
                 help='Safety margin on a destination\'s measured demand, '
                      'as the nova filter\'s.'),
    cfg.FloatOpt('hold_seconds', default=migration.DEFAULT_HOLD_SECONDS,
                 min=0.0,
                 help='How long a host must stay hot before VMs move off '
                      'it: a burst moves nothing.'),
    cfg.IntOpt('min_gain_mb', default=migration.DEFAULT_MIN_GAIN_BYTES
               // 2 ** 20, min=0,
               help='Least demand above the threshold a migration must '
                    'take off its host.'),
    cfg.IntOpt('max_concurrent', default=migration.DEFAULT_MAX_CONCURRENT,
               min=0,
               help='Most migrations being carried out at once in the '
                    'cloud; a host takes part in one at a time.'),
    cfg.FloatOpt('delta', default=migration.DEFAULT_DELTA, min=0.0,
                 help='Miss bound: no VM moved, nor any VM on its '
                      'destination, may be left with more than 1 + delta '
                      'times its misses at its flavor memory.'),
    cfg.FloatOpt('migration_timeout', default=1800.0, min=1.0,
                 help='Seconds a migration may take before it is failed.'),
]


def register_opts(conf):
    conf.register_group(migration_group)
    conf.register_opts(migration_opts, group=migration_group)


def list_opts():
    return {migration_group: migration_opts}
