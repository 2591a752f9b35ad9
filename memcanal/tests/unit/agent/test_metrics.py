"""The agent's own Prometheus metrics ([agent] metrics_port)."""

from unittest import mock

from prometheus_client import exposition
from prometheus_client import parser
import pytest

from memcanal.agent import metrics
from memcanal.agent import service as agent_service
from memcanal.rpc import service as rpc_service
from memcanal.tests.functional import services
from memcanal.tests.unit.agent import test_manager
from memcanal.tests.unit import test_prometheus

PAGED = '0b0a2b9c-3c6e-4d5e-8f00-000000000001'
SAMPLED = '0b0a2b9c-3c6e-4d5e-8f00-000000000002'


def entry(uuid, faults=None, **stats):
    """A report's entry for a VM: paged when ``faults`` is given (as
    its pager said), with ``stats`` as its guest_stats."""
    sample = {'uuid': uuid, 'guest_stats': dict(stats)}
    if faults is not None:
        sample['paging'] = {'resident_bytes': 48 * 2 ** 20,
                            'paged_bytes': 16 * 2 ** 20, 'faults': faults,
                            'swapped_out': 0}
    return sample


def scrape(node):
    """{family name: {(sample name, labels as sorted tuples): value}}
    and {family name: type} from the registry's text, as Prometheus
    would read it."""
    text = exposition.generate_latest(node.registry).decode()
    values, types = {}, {}
    for family in parser.text_string_to_metric_families(text):
        types[family.name] = family.type
        values[family.name] = {
            (sample.name, tuple(sorted(sample.labels.items()))):
                sample.value for sample in family.samples}
    return values, types


def report(*entries):
    return {'instances': list(entries)}


def test_pager_and_sampling_series_by_instance():
    node = metrics.AgentMetrics()
    node.observe(report(
        entry(PAGED, faults=30, paging_fault_p50_seconds=9e-5,
              paging_fault_p99_seconds=2e-3, paging_fault_seconds=0.25),
        entry(SAMPLED, sampling_rate=0.05, sampled_touches_per_s=1200.0)),
        0.2)
    node.observe(report(
        entry(PAGED, faults=12, paging_fault_p50_seconds=8e-5,
              paging_fault_p99_seconds=1e-3, paging_fault_seconds=0.5),
        entry(SAMPLED, sampling_rate=0.02, sampled_touches_per_s=400.0)),
        3.0)
    values, types = scrape(node)
    paged = (('instance', PAGED),)
    sampled = (('instance', SAMPLED),)
    # Counters add up the intervals; gauges say the last one.
    assert types['memcanal_agent_pager_faults'] == 'counter'
    assert values['memcanal_agent_pager_faults'] == {
        ('memcanal_agent_pager_faults_total', paged): 42}
    assert values['memcanal_agent_pager_fault_seconds'] == {
        ('memcanal_agent_pager_fault_seconds_total', paged): 0.75}
    assert values['memcanal_agent_pager_fault_latency_seconds'] == {
        ('memcanal_agent_pager_fault_latency_seconds',
         (('instance', PAGED), ('quantile', '0.5'))): 8e-5,
        ('memcanal_agent_pager_fault_latency_seconds',
         (('instance', PAGED), ('quantile', '0.99'))): 1e-3}
    assert values['memcanal_agent_paged_bytes'] == {
        ('memcanal_agent_paged_bytes', paged): 16 * 2 ** 20}
    assert values['memcanal_agent_resident_bytes'] == {
        ('memcanal_agent_resident_bytes', paged): 48 * 2 ** 20}
    assert values['memcanal_agent_sampling_ratio'] == {
        ('memcanal_agent_sampling_ratio', sampled): 0.02}
    assert values['memcanal_agent_sampled_touches_per_second'] == {
        ('memcanal_agent_sampled_touches_per_second', sampled): 400.0}
    assert types['memcanal_agent_collection_seconds'] == 'histogram'
    collection = values['memcanal_agent_collection_seconds']
    assert collection[('memcanal_agent_collection_seconds_count', ())] == 2
    assert collection[('memcanal_agent_collection_seconds_sum', ())] == 3.2
    assert collection[('memcanal_agent_collection_seconds_bucket',
                       (('le', '0.25'),))] == 1
    # Its own registry: no process_* or python_* series.
    assert all(name.startswith('memcanal_agent_') for name in values)


def test_a_vm_that_left_loses_its_series_and_counts_afresh():
    node = metrics.AgentMetrics()
    node.observe(report(entry(PAGED, faults=30),
                        entry(SAMPLED, sampling_rate=0.05)), 0.1)
    node.observe(report(entry(SAMPLED, sampling_rate=0.05)), 0.1)
    values, _types = scrape(node)
    for name in ('memcanal_agent_pager_faults', 'memcanal_agent_paged_bytes',
                 'memcanal_agent_resident_bytes'):
        assert values.get(name, {}) == {}
    node.observe(report(entry(PAGED, faults=5)), 0.1)
    values, _types = scrape(node)
    assert values['memcanal_agent_pager_faults'] == {
        ('memcanal_agent_pager_faults_total', (('instance', PAGED),)): 5}
    assert values.get('memcanal_agent_sampling_ratio', {}) == {}


def test_a_vm_before_paging_has_no_pager_series():
    node = metrics.AgentMetrics()
    node.observe(report(entry(PAGED)), 0.1)
    values, _types = scrape(node)
    assert {name for name in values if not name.endswith('_created')} == {
        'memcanal_agent_collection_seconds', 'memcanal_agent_refused_casts'}
    # Refused casts count from zero, by code (memcanal.rpc.freshness).
    assert set(values['memcanal_agent_refused_casts'].values()) == {0}


@pytest.fixture
def agent(conf, tmp_path):
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('instances', 2, 'simulated')
    conf.set_override('instance_memory_mb', 64, 'simulated')
    conf.set_override('references_per_interval', 500, 'simulated')
    return test_manager.make_agent(conf)


def test_every_report_the_agent_builds_is_observed(agent):
    agent.report()
    report = agent.report()
    values, _types = scrape(agent.metrics)
    assert values['memcanal_agent_collection_seconds'][
        ('memcanal_agent_collection_seconds_count', ())] == 2
    # The simulated VMs are sampled: their rates, as last reported.
    assert values['memcanal_agent_sampling_ratio'] == {
        ('memcanal_agent_sampling_ratio', (('instance', entry['uuid']),)):
            entry['guest_stats']['sampling_rate']
        for entry in report['instances']}


def test_the_agent_service_serves_them_once_started(agent, conf):
    port = services.free_port()
    conf.set_override('metrics_port', port, 'agent')
    service = agent_service.AgentService('memcanal-agent', 'compute-1',
                                         [agent], conf=conf)
    service.manager = agent
    agent.report()
    families = test_prometheus.served_while_running(service, port)
    assert families['memcanal_agent_collection_seconds'].type == 'histogram'


def test_no_port_no_server(agent, conf):
    service = agent_service.AgentService('memcanal-agent', 'compute-1',
                                         [agent], conf=conf)
    service.manager = agent
    with mock.patch.object(rpc_service.RPCService, 'start'):
        service.start()
    assert service.metrics_server is None
