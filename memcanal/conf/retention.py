"""Options of the data lifecycle: how long reports, their history,
decisions and deleted instances are kept (memcanal.db.retention)."""

from oslo_config import cfg

retention_group = cfg.OptGroup(
    'retention', title='Data lifecycle options',
    help='Full instance reports are kept for full_reports_days, then '
         'folded into a downsampled history (one row per VM and '
         'history_interval) kept for history_days. Finished decisions '
         'and deleted instances are archived into shadow_* tables '
         '(memcanal-manage db archive) after decisions_days (superseded '
         'ones after superseded_decisions_days) and '
         'deleted_instances_days; memcanal-manage db purge deletes them '
         'from there. The service does all but the purge every '
         'run_interval. A value of 0 days keeps that data forever.')

retention_opts = [
    cfg.IntOpt('full_reports_days', default=7, min=0,
               help='Days instance reports (with their WSS estimates and '
                    'miss-ratio curves) and host reports are kept whole; '
                    'older ones are folded into the history and deleted. '
                    'The latest report of every instance is kept however '
                    'old, for the policies and GET /instances/{uuid}. '
                    '0 keeps every report.'),
    cfg.IntOpt('history_days', default=365, min=0,
               help='Days the downsampled history is kept. 0 keeps it '
                    'forever.'),
    cfg.IntOpt('history_interval', default=3600, min=60,
               help='Seconds of reports one history row sums up (per VM: '
                    'count, min, mean and max of every WSS estimator, of '
                    'the allocation and of every guest statistic, and the '
                    'last miss-ratio curves of the period).'),
    cfg.IntOpt('decisions_days', default=90, min=0,
               help='Days after their last change that finished decisions '
                    '(applied, failed, rejected, superseded, rolled_back, '
                    'rollback_failed) are archived with their actions and '
                    'events. The newest applied and the newest failed '
                    'decision of each host are kept, as a rollback may '
                    'still need them; decisions waiting or being carried '
                    'out are never archived. 0 archives none.'),
    cfg.IntOpt('superseded_decisions_days', default=7, min=0,
               help='Days after which superseded decisions (recommendations '
                    'nobody acted on before a newer one replaced them) are '
                    'archived, when sooner than decisions_days. In '
                    'recommend mode most decisions end so, every optimizer '
                    'run, each with its VMs\' curves. 0: as decisions_days.'),
    cfg.IntOpt('deleted_instances_days', default=30, min=0,
               help='Days after an instance was marked deleted (gone from '
                    'its host\'s reports) that it is archived, its last '
                    'reports folded into the history first. One an '
                    'unarchived decision\'s action names waits for that '
                    'decision. 0 archives none.'),
    cfg.IntOpt('run_interval', default=3600, min=0,
               help='Seconds between two runs of the service\'s retention '
                    'job (folding, history expiry, archiving; never '
                    'purging). 0 turns it off: then run memcanal-manage db '
                    'retention and db archive from cron.'),
    cfg.IntOpt('batch_size', default=1000, min=1, max=10000,
               help='Rows one transaction of the retention job folds, '
                    'deletes or archives at most; the job repeats batches '
                    'until done, so a crash loses at most one batch\'s '
                    'work, never data.'),
]


def register_opts(conf):
    conf.register_group(retention_group)
    conf.register_opts(retention_opts, group=retention_group)


def list_opts():
    return {retention_group: retention_opts}
