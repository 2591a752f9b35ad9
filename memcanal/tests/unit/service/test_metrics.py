"""A service process's own metrics: what it ingested, served over HTTP."""

import pytest

from memcanal import context as memcanal_context
from memcanal.service import manager
from memcanal.service import service
from memcanal.tests.functional import services
from memcanal.tests import keys
from memcanal.tests.unit import test_prometheus
from memcanal.tests.unit.rpc import test_reports

COMPUTE_1 = keys.Agent('compute-1')


@pytest.fixture
def service_manager(conf, database):
    return manager.ServiceManager(conf)


def value(service_manager, name, **labels):
    return service_manager.metrics.registry.get_sample_value(name, labels)


def send(service_manager, sequence, **paging):
    ctx = memcanal_context.get_admin_context()
    host = COMPUTE_1.register(service_manager, ctx, 2 ** 34, 2 ** 30)
    report = test_reports.good_report()
    report.update(host_uuid=host['uuid'], sequence=sequence)
    if paging:
        report['instances'][0]['paging'] = dict(
            resident_bytes=2 ** 29, paged_bytes=2 ** 29, **paging)
    COMPUTE_1.report(service_manager, ctx, report)


def test_outcomes_latency_and_pager_faults(service_manager):
    send(service_manager, 1, faults=7, swapped_out=3)
    send(service_manager, 1, faults=7, swapped_out=3)   # redelivered
    send(service_manager, 2, faults=5)
    send(service_manager, 3)                             # not paged
    bad = test_reports.good_report()
    bad.update(host_uuid='not-this-host', sequence=4)
    COMPUTE_1.report(service_manager, memcanal_context.get_admin_context(),
                     bad)
    assert service_manager.counters == {
        'stored': 3, 'duplicate': 1, 'rejected': 0, 'failed': 0,
        'refused': 1, 'left_out': 0}
    assert value(service_manager, 'memcanal_service_reports_total',
                 outcome='stored') == 3
    # The redelivery's faults were counted with its first delivery only.
    assert value(service_manager, 'memcanal_service_pager_faults_total',
                 host='compute-1') == 12
    # Stored and duplicate reports are timed; refused ones never reach
    # the database.
    assert value(service_manager,
                 'memcanal_service_report_ingest_seconds_count') == 4
    assert value(service_manager,
                 'memcanal_service_report_ingest_seconds_sum') > 0


def test_served_over_http_in_prometheus_text(service_manager, conf):
    """Served while the service runs ([service] metrics_port), gone
    once it stopped."""
    send(service_manager, 1, faults=2)
    port = services.free_port()
    conf.set_override('metrics_port', port, 'service')
    central = service.CentralService('memcanal-service', 'ctl-1',
                                     [service_manager], conf=conf)
    central.manager = service_manager
    families = test_prometheus.served_while_running(central, port)
    assert families['memcanal_service_reports'].type == 'counter'
    assert families['memcanal_service_report_ingest_seconds'].type == (
        'histogram')
    [faults] = families['memcanal_service_pager_faults'].samples
    assert (faults.labels, faults.value) == ({'host': 'compute-1'}, 2.0)
