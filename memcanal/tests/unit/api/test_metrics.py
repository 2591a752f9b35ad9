"""GET /metrics: the seeded cloud as Prometheus reads it."""

import json
import pathlib
import re

from prometheus_client import parser
import pytest
import sqlalchemy as sa

from memcanal.agent import metrics as agent_metrics
from memcanal.api import errors
from memcanal.api.handlers import metrics
from memcanal import context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import transitions
from memcanal.service import metrics as service_metrics
from memcanal.tests.unit.agent import test_metrics as test_agent_metrics
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


@pytest.fixture
def enabled(conf):
    conf.set_override('metrics_enabled', True, 'api')


def scrape(client):
    """{(name, frozenset of labels): value} of a scrape without a token,
    and the response."""
    response = client.request('/metrics', token=None)
    assert response.status_int == 200, response.body
    samples = {}
    for family in parser.text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = (
                sample.value)
    return samples, response


def labels(**values):
    return frozenset(values.items())


def test_off_by_default_is_404(client):
    base.assert_error(client.request('/metrics', token=None), 404,
                      errors.ROUTE_NOT_FOUND)


def test_hosts_as_the_api_shows_them(client, hosts, enabled):
    samples, response = scrape(client)
    assert response.headers['Content-Type'] == (
        'text/plain; version=0.0.4; charset=utf-8')
    for host in db_api.list_hosts(context.get_admin_context()):
        name = labels(host=host['name'])
        for key in metrics.HOST_BYTES:
            assert samples['memcanal_host_' + key, name] == host[key]
        assert samples['memcanal_host_instances', name] == (
            host['instance_count'])
        assert samples['memcanal_host_up', name] == (host['state'] == 'up')
        assert samples['memcanal_host_utilization_ratio', name] == (
            pytest.approx(host['utilization']))
    host_a = labels(host='host-a')
    assert samples['memcanal_host_capacity_bytes', host_a] == 62 * data.GIB
    assert samples['memcanal_host_instances', host_a] == 3
    # No allocation ratio was set: no series rather than a made-up one.
    assert not any(name == 'memcanal_host_allocation_ratio'
                   for name, _ in samples)


def test_instances_by_estimator_and_curve(client, hosts, enabled):
    samples, _ = scrape(client)
    a1 = dict(instance=data.A1, host='host-a', project=data.PROJECT_A)
    assert samples['memcanal_instance_allocated_bytes',
                   labels(**a1)] == 4 * data.GIB
    # Its newest report is host-a's third.
    for estimator, value in data.wss(data.HOST_A_REPORTS).items():
        assert samples['memcanal_instance_working_set_bytes',
                       labels(estimator=estimator, **a1)] == value
    # 4 GiB is past the curve's last point (512 MiB, 0.0).
    assert samples['memcanal_instance_miss_ratio',
                   labels(method='exact', **a1)] == 0.0
    assert samples['memcanal_instance_allocated_bytes', labels(
        instance=data.B2, host='host-b', project=data.PROJECT_B)] == (
            4 * data.GIB)
    # Nothing set a target or paged a VM: no series.
    assert not any(name in ('memcanal_instance_target_bytes',
                            'memcanal_instance_paged_bytes')
                   for name, _ in samples)


def test_a_sampled_working_set_with_its_interval(client, hosts, enabled):
    """A sampled VM's working set comes with both ends of its 95 %
    interval; an estimator without one has no bound series."""
    data.store_sampled(hosts['host-b'], 2, data.HOST_B_INSTANCES, {data.A3})
    samples, _ = scrape(client)
    a3 = dict(instance=data.A3, host='host-b', project=data.PROJECT_A)
    assert samples['memcanal_instance_working_set_bytes',
                   labels(estimator='sampled', **a3)] == data.SAMPLED_WSS
    for bound, value in zip(('low', 'high'), data.SAMPLED_BOUNDS):
        assert samples['memcanal_instance_working_set_bound_bytes',
                       labels(estimator='sampled', bound=bound,
                              **a3)] == value
    assert not any(
        name == 'memcanal_instance_working_set_bound_bytes'
        and dict(label_set)['instance'] != data.A3
        for name, label_set in samples)


def test_demand_and_the_miss_ratio_at_it(client, hosts, enabled):
    """A VM's demand is what its host's demand counts (its working set
    plus the kernel), and its curve is read there too: A1's 4 GiB are
    past its curve's last point, its demand is not."""
    samples, _ = scrape(client)
    a1 = dict(instance=data.A1, host='host-a', project=data.PROJECT_A)
    wss_bytes = db_api.get_instance(context.get_admin_context(),
                                    data.A1)['wss_bytes']
    demand = samples['memcanal_instance_demand_bytes', labels(**a1)]
    assert demand == wss_bytes + 64 * data.MIB     # [optimizer] kernel_mb
    # Newest report: [[256 MiB, 0.5 / 3], [512 MiB, 0.0]].
    assert 256 * data.MIB <= demand < 512 * data.MIB
    assert samples['memcanal_instance_demand_miss_ratio',
                   labels(method='exact', **a1)] == pytest.approx(0.5 / 3)
    assert samples['memcanal_instance_miss_ratio',
                   labels(method='exact', **a1)] == 0.0
    [host_a] = [host for host in db_api.list_hosts(
        context.get_admin_context()) if host['name'] == 'host-a']
    assert sum(value for (name, found), value in samples.items()
               if name == 'memcanal_instance_demand_bytes'
               and dict(found)['host'] == 'host-a') == host_a['demand_bytes']


def test_memory_is_what_the_guest_reached(client, hosts, enabled):
    """Under a 384 MiB target its guest reached 200 MiB only: its curve
    is read at 200 MiB (before its first point: all misses), and its
    demand is no more than that."""
    with db_api.context_manager.writer.using(
            context.get_admin_context()) as session:
        session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == data.A1).values(
                target_bytes=384 * data.MIB, reached_bytes=200 * data.MIB))
    samples, _ = scrape(client)
    a1 = dict(instance=data.A1, host='host-a', project=data.PROJECT_A)
    assert samples['memcanal_instance_target_bytes', labels(**a1)] == (
        384 * data.MIB)
    assert samples['memcanal_instance_demand_bytes', labels(**a1)] == (
        200 * data.MIB)
    for name in ('memcanal_instance_miss_ratio',
                 'memcanal_instance_demand_miss_ratio'):
        assert samples[name, labels(method='exact', **a1)] == 1.0


def test_miss_ratio_at_reads_the_curve_as_the_optimizer_does():
    points = [[256, 0.5], [512, 0.0]]
    assert metrics.miss_ratio_at(points, 100) == 1.0
    assert metrics.miss_ratio_at(points, 300) == 0.5
    assert metrics.miss_ratio_at(points, 512) == 0.0


def test_deleted_instances_leave(client, hosts, enabled):
    samples, _ = scrape(client)
    assert any(dict(found).get('instance') == data.B2
               for _name, found in samples)
    with db_api.context_manager.writer.using(
            context.get_admin_context()) as session:
        session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == data.B2).values(
                deleted_at=models.Instance.created_at))
    samples, _ = scrape(client)
    assert not any(dict(found).get('instance') == data.B2
                   for _name, found in samples)
    assert samples['memcanal_host_instances', labels(host='host-b')] == 1


def test_per_instance_series_can_be_left_out(client, hosts, enabled,
                                             conf):
    conf.set_override('metrics_per_instance', False, 'api')
    samples, _ = scrape(client)
    assert not any(name.startswith('memcanal_instance_')
                   for name, _ in samples)
    assert samples['memcanal_host_instances', labels(host='host-a')] == 3


def test_decisions_by_kind_and_state(client, hosts, enabled):
    ctx = context.get_admin_context()
    made = [decisions_db.create_decision(
        ctx, hosts[host], 'memory_targets', 'isolated_sharing', 'recommend',
        {}, {}, [{'instance_uuid': uuid, 'target_bytes': 3 * data.GIB,
                  'previous_bytes': 4 * data.GIB, 'mechanism': 'balloon'}])
        for host, uuid in (('host-a', data.A1), ('host-b', data.A3))]
    transitions.request_transition(ctx, made[0]['uuid'], 'reject')
    samples, _ = scrape(client)
    kind = dict(kind='memory_targets')
    assert samples['memcanal_decisions',
                   labels(state='recommended', **kind)] == 1
    assert samples['memcanal_decisions', labels(state='rejected',
                                                **kind)] == 1
    assert samples['memcanal_decision_transitions_total',
                   labels(state='recommended', **kind)] == 2
    assert samples['memcanal_decision_transitions_total',
                   labels(state='rejected', **kind)] == 1


def test_rejections_by_code(client, hosts, enabled):
    ctx = context.get_admin_context()
    for code in ('report.schema', 'report.schema', 'message.unsigned'):
        db_api.record_rejection(ctx, hosts['host-a'], None, code, 'why')
    samples, _ = scrape(client)
    assert samples['memcanal_report_rejections_total',
                   labels(code='report.schema')] == 2
    assert samples['memcanal_report_rejections_total',
                   labels(code='message.unsigned')] == 1


def test_a_token_is_not_needed_nor_json(client, hosts, enabled):
    response = client.request('/metrics', token=None,
                              headers={'Accept': 'text/plain'})
    assert response.status_int == 200
    assert b'memcanal_host_up' in response.body


def dashboard_queries():
    """The PromQL of doc/grafana-dashboard.json: its panels' and its
    variables'."""
    dashboard = json.loads((pathlib.Path(__file__).parents[4] / 'doc'
                            / 'grafana-dashboard.json').read_text())
    return ([target['expr'] for panel in dashboard['panels']
             for target in panel['targets']]
            + [variable['query']
               for variable in dashboard['templating']['list']
               if variable['type'] == 'query'])


def test_grafana_dashboard_queries_metrics_memcanal_serves(client, hosts,
                                                           enabled):
    """doc/grafana-dashboard.json asks only for series the API's
    /metrics, a service process or an agent serves."""
    served = {family.name for family in
              parser.text_string_to_metric_families(
                  client.request('/metrics', token=None).text)}
    served |= {metric.name for metric in
               service_metrics.ServiceMetrics().registry.collect()}
    agent = agent_metrics.AgentMetrics()
    agent.observe({'instances': [
        test_agent_metrics.entry(
            'paged', faults=3, paging_fault_p50_seconds=1e-4,
            paging_fault_p99_seconds=1e-3, paging_fault_seconds=0.1),
        test_agent_metrics.entry('sampled', sampling_rate=0.1,
                                 sampled_touches_per_s=10.0)]}, 0.1)
    served |= {metric.name for metric in agent.registry.collect()}
    assert 'memcanal_agent_sampling_ratio' in served
    # Counters' and histograms' sample names.
    served |= {name + suffix for name in served
               for suffix in ('_total', '_bucket', '_count', '_sum')}
    queried = {name for query in dashboard_queries()
               for name in re.findall(r'memcanal_\w+', query)}
    assert queried and queried <= served, queried - served
