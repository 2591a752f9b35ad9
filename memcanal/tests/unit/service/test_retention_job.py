"""The service's periodic retention job (ServiceManager.run_retention)."""

from memcanal.service import manager
from memcanal.tests.unit.db import test_retention as cases
from memcanal.tests.unit.db.test_retention import ctx  # noqa: F401


def test_the_service_runs_retention_every_run_interval(conf):
    service_manager = manager.ServiceManager(conf)
    assert (3600, service_manager.run_retention) in \
        service_manager.periodic_jobs()
    conf.set_override('run_interval', 0, 'retention')
    assert service_manager.run_retention not in [
        job for _, job in service_manager.periodic_jobs()]


def test_the_job_folds_and_archives(ctx, conf):  # noqa: F811
    host = cases.register(ctx)
    for minute in range(3):
        cases.store(ctx, host, minute)
    cases.add_decision(ctx, host, 'rejected', cases.OLD)
    counts = manager.ServiceManager(conf).run_retention()
    assert counts == {'instance_reports': 2, 'host_reports': 2,
                      'history_created': 1, 'decisions': 1,
                      'decision_events': 2}
    assert cases.count(ctx, cases.TABLES['instance_reports']) == 1
