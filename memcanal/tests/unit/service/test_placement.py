import json

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
import pytest

from memcanal.conf import placement as placement_conf_module
from memcanal.policy import guardrails
from memcanal.policy import overcommit
from memcanal.service import placement

RP = 'c0c0c0c0-0000-4000-8000-000000000001'
MB = 2 ** 20
INVENTORY_URL = '/resource_providers/%s/inventories/MEMORY_MB' % RP


class Response:
    def __init__(self, status_code, body=None):
        self.status_code = status_code
        self.body = body
        self.text = json.dumps(body)

    def json(self):
        return self.body


def conflict(code):
    return Response(409, {'errors': [{'status': 409, 'code': code,
                                      'title': 'Conflict', 'detail': '-'}]})


class FakePlacement:
    """One compute node's provider as placement answers for it: a PUT
    with a stale generation is refused, each write bumps it. Each PUT
    first runs the next of ``before_put`` (another writer's turn), which
    may answer in its stead."""

    def __init__(self, ratio=1.0, reserved=512):
        self.generation = 3
        self.inventory = dict(total=16384, reserved=reserved, min_unit=1,
                              max_unit=16384, step_size=1,
                              allocation_ratio=ratio)
        self.calls = []
        self.before_put = []

    def request(self, url, method, microversion=None, raise_exc=True,
                **kwargs):
        self.calls.append((method, url, kwargs.get('json')))
        assert microversion == '1.39' and raise_exc is False
        if method == 'GET' and url == '/resource_providers':
            found = kwargs['params']['name'] == 'compute-1'
            return Response(200, {'resource_providers': [
                {'uuid': RP, 'name': 'compute-1',
                 'generation': self.generation}] if found else []})
        if url != INVENTORY_URL:
            return Response(404, {'errors': [{'status': 404}]})
        if method == 'GET':
            return Response(200, dict(
                self.inventory, resource_provider_generation=self.generation))
        if self.before_put:
            answer = self.before_put.pop(0)(self)
            if answer is not None:
                return answer
        body = dict(kwargs['json'])
        if body.pop('resource_provider_generation') != self.generation:
            return conflict('placement.concurrent_update')
        self.inventory = body
        self.generation += 1
        return Response(200, dict(
            body, resource_provider_generation=self.generation))

    def puts(self):
        return [body for method, _url, body in self.calls if method == 'PUT']


def nova_writes_reserved(fake):
    fake.inventory = dict(fake.inventory, reserved=fake.inventory[
        'reserved'] + 256)
    fake.generation += 1


@pytest.fixture
def fake():
    return FakePlacement()


@pytest.fixture
def client(fake):
    return placement.PlacementClient(fake, attempts=3)


def test_provider_is_found_by_name(client):
    assert client.provider('compute-1')['uuid'] == RP
    with pytest.raises(placement.ProviderNotFound, match='compute-2'):
        client.provider('compute-2')


def test_missing_inventory_is_a_clear_error(client):
    with pytest.raises(placement.InventoryNotFound, match='VCPU'):
        client.inventory(RP, 'VCPU')


def test_ratio_is_set_with_every_other_field_as_read(fake, client):
    result = client.set_allocation_ratio(RP, 1.3)
    assert fake.puts() == [dict(
        total=16384, reserved=512, min_unit=1, max_unit=16384, step_size=1,
        allocation_ratio=1.3, resource_provider_generation=3)]
    assert result == dict(resource_provider=RP, attempts=1,
                          previous_ratio=1.0, allocation_ratio=1.3,
                          changed=True, generation=4)
    assert fake.inventory['reserved'] == 512


def test_a_ratio_already_set_is_not_written_again(fake, client):
    client.set_allocation_ratio(RP, 1.3)
    again = client.set_allocation_ratio(RP, 1.3)
    assert len(fake.puts()) == 1
    assert again['changed'] is False and again['generation'] == 4


def test_single_precision_ratio_counts_as_set(fake, client):
    fake.inventory['allocation_ratio'] = 1.100000023841858
    assert client.set_allocation_ratio(RP, 1.1)['changed'] is False


def test_concurrent_update_is_read_again_and_keeps_the_new_reserved(
        fake, client):
    fake.before_put.append(nova_writes_reserved)
    result = client.set_allocation_ratio(RP, 1.3)
    assert result['attempts'] == 2 and result['changed'] is True
    first, second = fake.puts()
    assert first['reserved'] == 512
    assert second['reserved'] == 768
    assert second['resource_provider_generation'] == 4
    assert fake.inventory == dict(total=16384, reserved=768, min_unit=1,
                                  max_unit=16384, step_size=1,
                                  allocation_ratio=1.3)


def test_a_race_that_set_the_same_ratio_ends_without_writing(fake, client):
    def sets_it(fake):
        fake.inventory = dict(fake.inventory, allocation_ratio=1.3)
        fake.generation += 1
    fake.before_put.append(sets_it)
    result = client.set_allocation_ratio(RP, 1.3)
    assert result['changed'] is False and result['attempts'] == 2


def test_endless_concurrent_updates_give_up_after_the_attempts(fake, client):
    fake.before_put.extend([nova_writes_reserved] * 3)
    with pytest.raises(placement.ConcurrentUpdate, match='3 attempts'):
        client.set_allocation_ratio(RP, 1.3)
    assert len(fake.puts()) == 3
    assert fake.inventory['allocation_ratio'] == 1.0


def test_another_conflict_is_not_retried(fake, client):
    fake.before_put.append(lambda fake: conflict('placement.inventory.inuse'))
    with pytest.raises(placement.PlacementError, match='409'):
        client.set_allocation_ratio(RP, 1.3)
    assert len(fake.puts()) == 1


def test_placement_unreachable_is_a_placement_error(client):
    class Down:
        def request(self, url, method, **kwargs):
            raise ks_exc.ConnectFailure('refused')
    client.adapter = Down()
    with pytest.raises(placement.PlacementError, match='refused'):
        client.provider('compute-1')


def test_updater_proposes_from_placements_ratio_and_applies(fake):
    updater = placement.PlacementUpdater(
        placement.PlacementClient(fake),
        overcommit.Bounds(max_ratio=2.0, max_step=0.1),
        guardrails.Rails(kernel_bytes=64 * MB))
    fake.inventory['allocation_ratio'] = 1.2
    idle = placement.guests_of([
        {'allocated_bytes': 1024 * MB, 'demand_wss_bytes': 0}])
    proposal = updater.proposal('compute-1', idle)
    assert proposal.current == 1.2 and proposal.ratio == 1.3
    assert updater.desired_ratio('compute-1', idle) == 1.3
    result = updater.apply('compute-1', 1.3)
    assert result['host'] == 'compute-1' and result['changed'] is True
    assert fake.inventory['allocation_ratio'] == 1.3
    assert updater.apply('compute-1', 1.3)['changed'] is False


def test_unmeasured_instances_keep_the_ratio(fake):
    updater = placement.PlacementUpdater(placement.PlacementClient(fake))
    guests = placement.guests_of([
        {'allocated_bytes': 1024 * MB, 'demand_wss_bytes': None}])
    assert updater.desired_ratio('compute-1', guests) is None


@pytest.fixture
def placement_conf(conf, tmp_path):
    """CONF from a file with placement's admin_token auth. Loading the
    plugin registers its options (endpoint, token) on the global CONF;
    they go again afterwards."""
    config = tmp_path / 'memcanal.conf'
    config.write_text('[placement]\nauth_type = admin_token\n'
                      'endpoint = http://placement.test:8780\n'
                      'token = admin\nmax_ratio = 1.8\n'
                      'update_attempts = 7\n')
    conf(['--config-file', str(config)], project='memcanal',
         default_config_files=[])
    yield conf
    conf.reset()
    conf.unregister_opts(
        ks_loading.get_auth_plugin_conf_options('admin_token'),
        group='placement')


def test_client_and_bounds_load_from_the_placement_options(placement_conf):
    assert placement_conf.placement.enabled is False
    updater = placement.PlacementUpdater.from_conf(placement_conf)
    adapter = updater.client.adapter
    assert adapter.service_type == 'placement'
    assert adapter.get_endpoint() == 'http://placement.test:8780'
    assert updater.client.attempts == 7
    assert updater.bounds == overcommit.Bounds(max_ratio=1.8)


def test_placement_options_for_the_sample_config():
    (group, opts), = placement_conf_module.list_opts().items()
    names = {opt.dest for opt in opts}
    assert group.name == 'placement'
    assert {'enabled', 'max_ratio', 'auth_type', 'username', 'cafile',
            'region_name', 'valid_interfaces'} <= names
    service_type, = [opt for opt in opts if opt.dest == 'service_type']
    assert service_type.default == 'placement'
