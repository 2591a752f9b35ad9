"""memcanal.nova.client: the snapshot, its matching and its cache.

The adapter is a stand-in answering with the API's 1.4 bodies; the
functional tests in memcanal/tests/nova_functional read the real API.
"""

import threading
import time
import types

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg
import pytest

from memcanal.nova import client
from memcanal.nova import conf as memcanal_conf

GIB = 2 ** 30
MIB = 2 ** 20


def host(name, capacity, demand, state='up'):
    return {'uuid': name + '-uuid', 'name': name, 'state': state,
            'capacity_bytes': capacity, 'demand_bytes': demand,
            'headroom_bytes': capacity - demand}


HOSTS = {'hosts': [host('compute1', 16 * GIB, 4 * GIB),
                   host('compute2', 16 * GIB, 12 * GIB),
                   host('gone', 16 * GIB, 0, state='down')]}
RATIOS = {'flavors': {'m1.large': {'ratio': 0.25, 'instances': 7}},
          'projects': {'p1': {'ratio': 0.5, 'instances': 3}}}


class FakeAdapter:
    """Answers GETs from ``bodies`` by path, counting them; raises
    ``failure`` instead while it is set; ``delay`` seconds per GET."""

    def __init__(self, bodies, delay=0.0):
        self.bodies = bodies
        self.delay = delay
        self.failure = None
        self.requests = []

    def get(self, path, headers=None, raise_exc=True):
        self.requests.append((path, dict(headers)))
        time.sleep(self.delay)
        if self.failure is not None:
            raise self.failure
        return types.SimpleNamespace(json=lambda: self.bodies[path])


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    memcanal_conf.register_opts(conf)
    conf([], default_config_files=[])
    return conf


def make_client(conf, bodies=None, delay=0.0):
    clock = Clock()
    memcanal = client.Client(conf, clock=clock)
    memcanal._adapter = FakeAdapter(
        bodies or {'/hosts': HOSTS, '/demand_ratios': RATIOS}, delay)
    return memcanal, memcanal._adapter, clock


def host_state(host, nodename=None):
    return types.SimpleNamespace(host=host, nodename=nodename or host)


def spec(flavor='m1.small', memory_mb=2048, project='p0'):
    return types.SimpleNamespace(
        flavor=types.SimpleNamespace(name=flavor, memory_mb=memory_mb),
        project_id=project)


def test_options_and_their_defaults(conf):
    assert conf.memcanal.cache_seconds == 30
    assert conf.memcanal.pass_unknown_hosts is True
    assert conf.memcanal.margin == 0.1
    assert conf.memcanal.threshold == 0.9
    assert conf.memcanal.service_type == 'memcanal'
    assert conf.memcanal.timeout == memcanal_conf.DEFAULT_TIMEOUT
    # keystoneauth's own options are there to load the adapter from.
    for name in ('auth_type', 'endpoint_override', 'valid_interfaces',
                 'cafile'):
        assert hasattr(conf.memcanal, name)
    [(group, opts)] = memcanal_conf.list_opts()
    assert group.name == 'memcanal'
    assert {'cache_seconds', 'auth_type', 'endpoint_override'} <= {
        opt.dest for opt in opts}


def test_adapter_loads_from_a_config_file(tmp_path):
    path = tmp_path / 'nova.conf'
    path.write_text('[memcanal]\n'
                    'auth_type = admin_token\n'
                    'endpoint = http://memcanal.test:8793\n'
                    'token = admin\n'
                    'endpoint_override = http://memcanal.test:8793\n')
    conf = cfg.ConfigOpts()
    memcanal_conf.register_opts(conf)
    conf(['--config-file', str(path)], default_config_files=[])
    adapter = client.Client(conf)._get_adapter()
    assert adapter.service_type == 'memcanal'
    assert adapter.get_endpoint() == 'http://memcanal.test:8793'
    assert adapter.session.timeout == memcanal_conf.DEFAULT_TIMEOUT
    assert adapter.session.get_auth_headers(adapter.auth) == {
        'X-Auth-Token': 'admin'}


def test_snapshot_reads_hosts_and_ratios_at_1_4(conf):
    memcanal, adapter, _ = make_client(conf)
    snapshot = memcanal.snapshot()
    assert [path for path, _ in adapter.requests] == ['/hosts',
                                                      '/demand_ratios']
    for _, headers in adapter.requests:
        assert headers == {'OpenStack-API-Version': 'memcanal 1.4'}
    assert set(snapshot.hosts) == {'compute1', 'compute2', 'gone'}
    assert snapshot.flavor_ratios == {'m1.large': 0.25}
    assert snapshot.project_ratios == {'p1': 0.5}


def test_host_load_matches_host_then_nodename_and_skips_down_hosts(conf):
    snapshot = make_client(conf)[0].snapshot()
    load = snapshot.host_load(host_state('compute1'))
    assert (load.name, load.capacity_bytes, load.demand_bytes) == (
        'compute1', 16 * GIB, 4 * GIB)
    # nova's service host differs from memcanal's name: the node matches.
    assert snapshot.host_load(
        host_state('svc-1', 'compute2')).name == 'compute2'
    assert snapshot.host_load(host_state('unknown')) is None
    assert snapshot.host_load(host_state('gone')) is None


def test_expected_demand_flavor_ratio_then_project_then_all(conf):
    snapshot = make_client(conf)[0].snapshot()
    assert snapshot.expected_demand(
        spec('m1.large', 8192, 'p1')) == 2 * GIB
    assert snapshot.expected_demand(
        spec('m1.small', 2048, 'p1')) == GIB
    assert snapshot.expected_demand(
        spec('m1.small', 2048, 'p0')) == 2048 * MIB


def test_cache_is_reused_until_it_expires(conf):
    memcanal, adapter, clock = make_client(conf)
    first = memcanal.snapshot()
    clock.now += 29.9
    assert memcanal.snapshot() is first
    assert len(adapter.requests) == 2
    clock.now += 0.2
    assert memcanal.snapshot() is not first
    assert len(adapter.requests) == 4


def test_unreachable_api_gives_none_once_per_period(conf, caplog):
    memcanal, adapter, clock = make_client(conf)
    adapter.failure = ks_exc.ConnectFailure('refused')
    assert memcanal.snapshot() is None
    assert memcanal.snapshot() is None
    assert len(adapter.requests) == 1
    warnings = [r for r in caplog.records if r.levelname == 'WARNING']
    assert len(warnings) == 1
    assert 'memcanal API unavailable' in warnings[0].getMessage()
    # Back after the period.
    adapter.failure = None
    clock.now += 30
    assert memcanal.snapshot() is not None


@pytest.mark.parametrize('failure', [
    ks_exc.NotFound(), ks_exc.EndpointNotFound(), ks_exc.ConnectTimeout(),
    ValueError('not JSON'), KeyError('hosts')])
def test_any_failure_of_a_fetch_is_unreachable(conf, failure):
    memcanal, adapter, _ = make_client(conf)
    adapter.failure = failure
    assert memcanal.snapshot() is None


def test_many_threads_share_one_fetch(conf):
    memcanal, adapter, _ = make_client(conf, delay=0.05)
    snapshots = []
    threads = [threading.Thread(
        target=lambda: snapshots.append(memcanal.snapshot()))
        for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(adapter.requests) == 2
    assert len(snapshots) == 8
    assert all(s is snapshots[0] for s in snapshots)


def test_get_client_is_one_per_conf_and_registers_the_group():
    conf = cfg.ConfigOpts()
    try:
        first = client.get_client(conf)
        assert client.get_client(conf) is first
        conf([], default_config_files=[])
        assert conf.memcanal.cache_seconds == 30
    finally:
        client.reset()
