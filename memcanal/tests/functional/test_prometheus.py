"""A real Prometheus server (Debian's package, tools/install-prometheus.sh)
scraping a running memcanal-api's /metrics, a memcanal-service's and a
simulated memcanal-agent's metrics ports, with the scrape configuration
doc/monitoring.md gives; PromQL through its HTTP API returns what the
JSON API shows."""

import collections
import re
import shutil
import time

import pytest
import requests

from memcanal import context as memcanal_context
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal.tests.functional import services
from memcanal.tests.functional import test_metrics
from memcanal.tests.functional import test_rabbit
from memcanal.tests.functional.test_metrics import api
from memcanal.tests.functional.test_rabbit import cloud  # noqa: F401
from memcanal.tests.unit.api import test_metrics as test_api_metrics

# The agent samples every VM at this fixed rate (target_error 0), so
# its last scrape and its last stored report agree.
RATE = 0.25

PROMETHEUS_CONFIG = '''\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: memcanal-api
    metrics_path: /metrics
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:%(api)d']
  - job_name: memcanal-service
    static_configs:
      - targets: ['127.0.0.1:%(service)d']
  - job_name: memcanal-agent
    honor_labels: true
    relabel_configs:
      - source_labels: [__address__]
        target_label: node
    static_configs:
      - targets: ['127.0.0.1:%(agent)d']
'''


@pytest.fixture
def ports():
    """Free ports, for the metrics of the service and the agent, the API
    and Prometheus."""
    return {'service': services.free_port(), 'agent': services.free_port(),
            'api': services.free_port(), 'prometheus': services.free_port()}


@pytest.fixture
def extra_config(ports):
    return test_metrics.metrics_config(ports) + (
        '[sampling]\nrate = %s\ntarget_error = 0\n'
        % RATE)


@pytest.fixture
def prometheus(ports, tmp_path):
    """A Prometheus server on its own port and storage, scraping the
    three targets every second; its URL."""
    binary = shutil.which('prometheus')
    if binary is None:
        services.missing('prometheus is not installed '
                         '(tools/install-prometheus.sh)')
    config = tmp_path / 'prometheus.yml'
    config.write_text(PROMETHEUS_CONFIG % ports)
    address = '127.0.0.1:%d' % ports['prometheus']
    with services.serving(
            'prometheus', [binary, '--config.file=%s' % config,
                           '--storage.tsdb.path=%s' % (tmp_path / 'tsdb'),
                           '--web.listen-address=%s' % address],
            ports['prometheus'], tmp_path):
        yield 'http://' + address


def query(url, promql):
    """{frozenset of labels but the name: value} of an instant PromQL
    query."""
    response = requests.get(url + '/api/v1/query', params={'query': promql},
                            timeout=10)
    response.raise_for_status()
    body = response.json()
    assert body['status'] == 'success', body
    assert body['data']['resultType'] == 'vector', body
    return {frozenset((name, value)
                      for name, value in result['metric'].items()
                      if name != '__name__'): float(result['value'][1])
            for result in body['data']['result']}


def targets_up(url):
    """Whether Prometheus has scraped all three targets, the last time
    successfully."""
    jobs = {dict(labels)['job'] for labels, value in query(url, 'up').items()
            if value == 1}
    return jobs == {'memcanal-api', 'memcanal-service', 'memcanal-agent'}


def labels(**values):
    return frozenset(values.items())


def api_labels(**values):
    """The labels of a series of the API's /metrics, in Prometheus."""
    return labels(job='memcanal-api', **values)


def api_view(api_url, api_target):
    """What the JSON API shows, as the PromQL results of the API's series
    that should say the same."""
    [host] = api(api_url, '/hosts')['hosts']
    instances = [api(api_url, '/instances/%s' % listed['uuid'])
                 for listed in api(api_url, '/instances')['instances']]
    decisions = collections.Counter(
        (decision['kind'], decision['state'])
        for decision in api(api_url, '/decisions')['decisions'])
    # Its host series name no VM: Prometheus labels them with the target.
    host_labels = api_labels(host=host['name'], instance=api_target)
    return {
        'memcanal_host_capacity_bytes': {
            host_labels: host['capacity_bytes']},
        'memcanal_host_demand_bytes': {host_labels: host['demand_bytes']},
        'memcanal_instance_working_set_bytes': {
            api_labels(host=host['name'], instance=instance['uuid'],
                       project=instance['project_id'], estimator=estimator):
            value for instance in instances
            for estimator, value in instance['latest_report']['wss'].items()},
        'sum by (kind, state) (memcanal_decisions)': {
            labels(kind=kind, state=state): count
            for (kind, state), count in decisions.items()},
    }


def dashboard_answers(url):
    """Prometheus takes every query of doc/grafana-dashboard.json, with
    its variables set to all hosts and nodes; the variables' own
    queries (Grafana's label_values) find values."""
    variables = {'$host': '.*', '$node': '.*', '$estimator': 'sampled'}
    for promql in test_api_metrics.dashboard_queries():
        found = re.fullmatch(r'label_values\((\w+), (\w+)\)', promql)
        if found:
            metric, label = found.groups()
            assert query(url, 'group by (%s) (%s)' % (label, metric)), (
                promql)
            continue
        for variable, value in variables.items():
            promql = promql.replace(variable, value)
        query(url, promql)


def decide(instances):
    """Two decisions of the instances' host, as the optimizer records
    them (the simulated cloud needs none): the first superseded by the
    second, which an operator rejects."""
    ctx = memcanal_context.get_admin_context()
    [instance] = instances[:1]
    made = [decisions_db.create_decision(
        ctx, instance['host_uuid'], 'memory_targets', 'isolated_sharing',
        'recommend', {}, {}, [{
            'instance_uuid': instance['uuid'], 'target_bytes': target,
            'previous_bytes': instance['allocated_bytes'],
            'mechanism': 'balloon'}])
        for target in (instance['allocated_bytes'] // 2,
                       instance['allocated_bytes'] // 4)]
    transitions.request_transition(ctx, made[1]['uuid'], 'reject')


def stored_reports(prometheus, service_url):
    """The reports the service counts as stored, from its own port and
    through Prometheus."""
    direct = test_metrics.scrape(service_url)[0][
        'memcanal_service_reports_total', (('outcome', 'stored'),)]
    [scraped] = query(prometheus, 'memcanal_service_reports_total'
                      '{outcome="stored"}').values() or [None]
    return direct, scraped


def test_prometheus_scrapes_the_api_the_service_and_the_agent(
        cloud, ports, prometheus):  # noqa: F811
    cloud['start']('service')
    cloud['start']('agent')
    api_url = 'http://127.0.0.1:%d' % ports['api']
    service_url = 'http://127.0.0.1:%d/metrics' % ports['service']
    with test_metrics.api_server(cloud, ports['api']):
        services.wait_for(lambda: targets_up(prometheus),
                          what='Prometheus to scrape its three targets')
        services.wait_for(
            lambda: len(query(prometheus, 'memcanal_agent_sampling_ratio'))
            == len(query(prometheus, 'memcanal_instance_allocated_bytes'))
            == test_rabbit.VMS,
            what='every VM in the agent\'s and the API\'s series')
        # The agent's own series, while it runs: the node label is the
        # target's address, the instance label the VM's uuid.
        instances = [api(api_url, '/instances/%s' % listed['uuid'])
                     for listed in api(api_url, '/instances')['instances']]
        node = '127.0.0.1:%d' % ports['agent']
        assert query(prometheus, 'memcanal_agent_sampling_ratio') == {
            labels(instance=instance['uuid'], node=node,
                   job='memcanal-agent'):
            instance['latest_report']['guest_stats']['sampling_rate']
            for instance in instances}
        assert set(query(prometheus, 'memcanal_agent_sampling_ratio')
                   .values()) == {RATE}
        [collections_count] = query(
            prometheus, 'memcanal_agent_collection_seconds_count').values()
        assert collections_count >= 1
        dashboard_answers(prometheus)
        # The agent stopped, the service's count stops once it stored
        # what was queued, and Prometheus scrapes that count.
        cloud['kill']('agent')
        direct, scraped = services.wait_for(
            lambda: (lambda counts: counts[0] == counts[1] and counts)(
                stored_reports(prometheus, service_url)),
            what='Prometheus to scrape the service\'s last count')
        assert scraped == len(test_rabbit.stored_host_reports())
        # The service stopped too, nothing moves in the database any
        # more: Prometheus's next scrapes of the API say what the JSON API
        # says.
        cloud['kill']('service')
        decide(instances)
        api_target = '127.0.0.1:%d' % ports['api']
        deadline = time.monotonic() + 30
        while True:
            expected = api_view(api_url, api_target)
            found = {promql: query(prometheus, promql)
                     for promql in expected}
            if found == expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert found == expected
    assert all(expected.values())
    assert expected['sum by (kind, state) (memcanal_decisions)'] == {
        labels(kind='memory_targets', state='superseded'): 1,
        labels(kind='memory_targets', state='rejected'): 1}
