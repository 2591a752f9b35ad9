from unittest import mock

from oslo_db import exception as db_exc
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.service import manager
from memcanal.tests import keys
from memcanal.tests.unit.rpc import test_reports

COMPUTE_1 = keys.Agent('compute-1')


@pytest.fixture
def service_manager(conf, database):
    return manager.ServiceManager(conf)


@pytest.fixture
def ctx():
    return memcanal_context.get_admin_context()


def registered_report(service_manager, ctx, sequence=1):
    host = COMPUTE_1.register(service_manager, ctx, 2 ** 34, 2 ** 30)
    report = test_reports.good_report()
    report.update(host_uuid=host['uuid'], sequence=sequence)
    return report


def test_report_is_stored_once_even_when_redelivered(service_manager, ctx):
    report = registered_report(service_manager, ctx)
    COMPUTE_1.report(service_manager, ctx, report)
    COMPUTE_1.report(service_manager, ctx, report)
    assert db_api.count_reports(ctx) == {'host_reports': 1,
                                         'instance_reports': 1}
    assert service_manager.counters == {
        'stored': 1, 'duplicate': 1, 'rejected': 0, 'failed': 0,
        'refused': 0, 'left_out': 0}
    stored = db_api.get_instance(ctx, test_reports.VM)['latest_report']
    assert stored['wss'] == {'distinct': 2 ** 20}
    assert stored['mrc']['exact'][1] == [8192, 0.5]


def test_bad_report_is_rejected_counted_and_nothing_lost(service_manager,
                                                         ctx):
    good = registered_report(service_manager, ctx)
    COMPUTE_1.report(service_manager, ctx, good)
    bad = registered_report(service_manager, ctx, sequence=2)
    bad['instances'][0]['wss']['distinct'] = float('nan')
    COMPUTE_1.report(service_manager, ctx, bad)
    assert service_manager.counters['rejected'] == 1
    assert db_api.count_rejections(ctx, host_uuid=good['host_uuid']) == 1
    assert db_api.count_reports(ctx)['host_reports'] == 1
    latest = db_api.get_instance(ctx, test_reports.VM)['latest_report']
    assert latest['sequence'] == 1
    # The same sequence, now valid, is still accepted.
    COMPUTE_1.report(service_manager, ctx,
                     registered_report(service_manager, ctx, 2))
    assert db_api.count_reports(ctx)['host_reports'] == 2


def test_report_of_unknown_host_is_rejected(service_manager, ctx):
    report = test_reports.good_report()
    COMPUTE_1.report(service_manager, ctx, report)
    assert db_api.count_rejections(ctx, host_uuid=report['host_uuid']) == 1
    assert db_api.count_reports(ctx)['host_reports'] == 0


def test_garbage_report_is_rejected_without_raising(service_manager, ctx):
    COMPUTE_1.register(service_manager, ctx)
    COMPUTE_1.report(service_manager, ctx, 'garbage')
    COMPUTE_1.report(service_manager, ctx,
                     {'host_uuid': 12, 'sequence': 'x'})
    assert db_api.count_rejections(ctx) == 2


def test_register_host_returns_last_stored_sequence(service_manager, ctx):
    COMPUTE_1.report(service_manager, ctx,
                     registered_report(service_manager, ctx, 7))
    again = COMPUTE_1.register(service_manager, ctx, 2 ** 34, 0)
    assert again['last_sequence'] == 7


def test_registration_records_the_hosts_interval(service_manager, ctx):
    COMPUTE_1.register(service_manager, ctx, 2 ** 34, 0, 5.0)
    host = db_api.list_hosts(ctx)[0]
    assert (host['report_interval'], host['state']) == (5.0, 'up')


def test_periodic_jobs_include_deleting_gone_instances(service_manager,
                                                       conf):
    jobs = service_manager.periodic_jobs()
    assert (conf.service.periodic_interval,
            service_manager.mark_gone_instances) in jobs


def test_database_failure_is_counted_not_raised(service_manager, ctx):
    report = registered_report(service_manager, ctx)
    with mock.patch.object(db_api, 'store_report',
                           side_effect=db_exc.DBError('gone')):
        COMPUTE_1.report(service_manager, ctx, report)
    assert service_manager.counters['failed'] == 1
    assert db_api.count_rejections(ctx) == 0


def test_optimize_moves_vms_before_it_pages_them_and_pages_signed(
        service_manager, conf, tmp_path):
    """Migrations first: pooling a hot host would keep it busy (and its
    paged VMs are never migrated). Pooling only with the key that signs
    its lease tokens."""
    ran = []
    for name in ('migrations', 'pooling', 'optimizer', 'ratios'):
        planner = mock.Mock()
        planner.run.side_effect = lambda context, name=name: (
            ran.append(name) or [])
        setattr(service_manager, name, planner)
    service_manager.optimize()
    assert ran == ['migrations', 'optimizer', 'ratios']
    service_manager.dispatcher.signing_key = keys.SERVICE_KEY
    ran.clear()
    service_manager.optimize()
    assert ran == ['migrations', 'pooling', 'optimizer', 'ratios']


def test_reports_with_intervals_and_without_are_both_stored(service_manager,
                                                            ctx):
    """RPC 1.7's intervals are stored with their report and on the
    instance, and its host's demand is their upper bound; a 1.6 agent's
    report without them is stored as before, its working set read as
    exact."""
    older = registered_report(service_manager, ctx)
    COMPUTE_1.report(service_manager, ctx, older)
    instance = db_api.get_instance(ctx, test_reports.VM)
    assert instance['wss_bounds_bytes'] is None
    assert instance['latest_report']['wss_bounds'] == {}
    assert instance['latest_report']['mrc_bands'] == {}
    host = db_api.get_host(ctx, older['host_uuid'])
    assert host['demand_bounds_bytes'] == [host['demand_bytes']] * 2

    report = test_reports.sampled_report()
    report.update(host_uuid=older['host_uuid'], sequence=2)
    del report['instances'][0]['wss']['distinct']
    COMPUTE_1.report(service_manager, ctx, report)
    assert service_manager.counters['stored'] == 2
    instance = db_api.get_instance(ctx, test_reports.VM)
    low, high = 2 ** 20 - 8192, 2 ** 20 + 8192
    assert instance['wss_bytes'] == 2 ** 20
    assert instance['wss_bounds_bytes'] == [low, high]
    assert instance['demand_wss_bytes'] == high
    latest = instance['latest_report']
    assert latest['wss_bounds'] == {'sampled': [low, high]}
    assert latest['mrc_bands']['sampled']['high'][1] == [8192, 0.6]
    kernel = service_manager.conf.optimizer.kernel_mb * 2 ** 20
    host = db_api.get_host(ctx, older['host_uuid'])
    assert host['demand_bounds_bytes'] == [low + kernel, high + kernel]
    assert host['demand_bytes'] == high + kernel


def test_an_upside_down_interval_is_rejected_counted_and_recorded(
        service_manager, ctx):
    report = test_reports.sampled_report()
    report.update(host_uuid=registered_report(service_manager, ctx)[
        'host_uuid'])
    report['instances'][0]['wss_bounds']['sampled'].reverse()
    COMPUTE_1.report(service_manager, ctx, report)
    assert service_manager.counters['rejected'] == 1
    assert db_api.count_rejections(ctx, host_uuid=report['host_uuid']) == 1
    assert db_api.count_reports(ctx)['host_reports'] == 0
