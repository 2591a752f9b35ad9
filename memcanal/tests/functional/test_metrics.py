"""Prometheus scrapes of running processes: memcanal-service's and
memcanal-agent's own metrics ports and the API's GET /metrics, with a
simulated agent reporting over real RabbitMQ; parsed with
prometheus_client's parser and checked against what the JSON API
shows."""

import os
import sys

from prometheus_client import parser
import pytest
import requests

from memcanal.tests.functional import services
from memcanal.tests.functional import test_rabbit
from memcanal.tests.functional.test_rabbit import cloud  # noqa: F401

API_SERVER = (
    'import sys\n'
    'from wsgiref import simple_server\n'
    'from memcanal.wsgi.api import application\n'
    'simple_server.make_server("127.0.0.1", int(sys.argv[1]), '
    'application).serve_forever()\n')


@pytest.fixture
def ports():
    """Free ports, for the service's and the agent's metrics and the
    API."""
    return {'service': services.free_port(), 'agent': services.free_port(),
            'api': services.free_port()}


def metrics_config(ports):
    """The service's metrics port ([service] goes on), the agent's (a
    second [agent] section, which oslo.config merges with the first),
    and the API's section for the API process reading the same file."""
    return ('metrics_port = %d\n'
            '[agent]\nmetrics_port = %d\n'
            '[api]\nauth_strategy = noauth2\nmetrics_enabled = true\n'
            % (ports['service'], ports['agent']))


@pytest.fixture
def extra_config(ports):
    return metrics_config(ports)


def scrape(url):
    """{(name, sorted label items): value} and {name: type} of a scrape."""
    response = requests.get(url, timeout=10)
    response.raise_for_status()
    samples, types = {}, {}
    for family in parser.text_string_to_metric_families(response.text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = (
                sample.value)
    return samples, types


def api_server(cloud, port):
    """memcanal-api on ``port`` of 127.0.0.1, reading the cloud's
    configuration file, until the block ends."""
    return services.serving(
        'api', [sys.executable, '-c', API_SERVER, str(port)], port,
        cloud['tmp_path'], env=dict(
            os.environ, OS_MEMCANAL_CONFIG_FILES=str(cloud['config'])))


def api(url, path):
    response = requests.get(
        url + path, timeout=10,
        headers={'X-Auth-Token': 'admin',
                 'OpenStack-API-Version': 'memcanal 1.5'})
    response.raise_for_status()
    return response.json()


def test_service_and_api_metrics_of_a_running_cloud(cloud,  # noqa: F811
                                                    ports):
    cloud['start']('service')
    cloud['start']('agent')
    service_url = 'http://127.0.0.1:%d/metrics' % ports['service']
    agent_url = 'http://127.0.0.1:%d/metrics' % ports['agent']
    api_url = 'http://127.0.0.1:%d' % ports['api']
    def counted():
        try:
            samples, _types = scrape(service_url)
        except requests.ConnectionError:
            return False    # not listening yet
        return samples['memcanal_service_reports_total',
                       (('outcome', 'stored'),)] >= 3
    services.wait_for(counted, what='three reports counted by the service')
    with api_server(cloud, ports['api']):
        services.wait_for(lambda: len(api(api_url, '/instances')[
            'instances'])
                          == test_rabbit.VMS, what='the agent\'s VMs')
        agent, agent_types = scrape(agent_url)
        # Stopped, so the JSON and the scrape see the same rows.
        cloud['kill']('agent')
        service, service_types = scrape(service_url)
        metrics, types = scrape(api_url + '/metrics')
        [host] = api(api_url, '/hosts')['hosts']
        instances = [api(api_url, '/instances/%s' % listed['uuid'])
                     for listed in api(api_url, '/instances')['instances']]

    assert service_types['memcanal_service_reports'] == 'counter'
    assert service_types['memcanal_service_report_ingest_seconds'] == (
        'histogram')
    stored = service['memcanal_service_reports_total',
                     (('outcome', 'stored'),)]
    assert service['memcanal_service_report_ingest_seconds_count', ()] >= (
        stored)
    assert service['memcanal_service_reports_total',
                   (('outcome', 'rejected'),)] == 0

    # The agent's own port: a collection per report, series of its VMs
    # alone.
    assert agent_types['memcanal_agent_collection_seconds'] == 'histogram'
    assert agent['memcanal_agent_collection_seconds_count', ()] >= 3
    assert {dict(labels)['instance'] for _name, labels in agent
            if 'instance' in dict(labels)} == {
                instance['uuid'] for instance in instances}
    for instance in instances:     # the simulated VMs are sampled
        assert 0 < agent['memcanal_agent_sampling_ratio', (
            ('instance', instance['uuid']),)] <= 1

    assert types['memcanal_host_demand_bytes'] == 'gauge'
    assert types['memcanal_decision_transitions'] == 'counter'
    name = (('host', host['name']),)
    for key in ('capacity_bytes', 'demand_bytes', 'headroom_bytes',
                'allocated_bytes', 'resident_bytes', 'lent_bytes',
                'borrowed_bytes'):
        assert metrics['memcanal_host_' + key, name] == host[key], key
    assert metrics['memcanal_host_up', name] == 1
    assert metrics['memcanal_host_instances', name] == test_rabbit.VMS
    for instance in instances:
        labels = (('host', host['name']), ('instance', instance['uuid']),
                  ('project', instance['project_id']))
        assert metrics['memcanal_instance_allocated_bytes', labels] == (
            instance['allocated_bytes'])
        wss = instance['latest_report']['wss']
        assert wss
        for estimator, value in wss.items():
            assert metrics['memcanal_instance_working_set_bytes', tuple(
                sorted(labels + (('estimator', estimator),)))] == value
