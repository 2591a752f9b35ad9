"""Allocation ratios set in a real placement 16, served by gunicorn from
the virtualenv tools/install-nova.sh makes (noauth2, SQLite); memcanal
talks HTTP to it from its own virtualenv."""

import os
import subprocess
import uuid

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import pytest

from memcanal.policy import overcommit
from memcanal.service import placement
from memcanal.tests.functional import services

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..')
NOVA_VENV = os.environ.get('MEMCANAL_NOVA_VENV',
                           os.path.join(ROOT, '.venv-nova'))
MB = 2 ** 20


def _nova_venv_bin(name):
    return os.path.join(NOVA_VENV, 'bin', name)


def _gunicorn_command(port):
    # One worker: two processes writing one SQLite file answer 500
    # (database is locked) when they collide; clients still race each
    # other between their GETs and PUTs.
    command = [_nova_venv_bin('gunicorn'), '-w', '1',
               '-b', '127.0.0.1:%d' % port]
    # gunicorn 25+ opens a control socket in ~/.gunicorn, shared by every
    # gunicorn of the user: parallel runs would take each other's.
    help_text = subprocess.run([command[0], '--help'], capture_output=True,
                               text=True).stdout
    if '--no-control-socket' in help_text:
        command.append('--no-control-socket')
    return command + ['placement.wsgi.api:application']


@pytest.fixture(scope='module')
def placement_url(tmp_path_factory):
    """A fresh placement for the module; its URL."""
    if not (os.path.exists(os.path.join(NOVA_VENV,
                                        '.memcanal-nova-installed'))
            and os.path.exists(_nova_venv_bin('placement-manage'))):
        services.missing('placement is not installed in %s; run '
                         'tools/install-nova.sh' % NOVA_VENV)
    state = tmp_path_factory.mktemp('placement')
    config = state / 'placement.conf'
    config.write_text(
        '[api]\nauth_strategy = noauth2\n'
        '[placement_database]\nconnection = sqlite:///%s\n'
        % (state / 'placement.sqlite'))
    subprocess.run([_nova_venv_bin('placement-manage'), '--config-file',
                    str(config), 'db', 'sync'],
                   check=True, capture_output=True, timeout=120)
    port = services.free_port()
    with services.serving('placement', _gunicorn_command(port), port, state,
                          cwd=state, env=dict(
                              os.environ, OS_PLACEMENT_CONFIG_DIR=str(state))):
        yield 'http://127.0.0.1:%d' % port


def _adapter(url):
    """An admin of noauth2 placement, as another writer (nova-compute)."""
    return ks_adapter.Adapter(
        ks_session.Session(auth=token_endpoint.Token(url, 'admin')),
        service_type='placement', default_microversion='1.39',
        raise_exc=True)


@pytest.fixture
def nova(placement_url):
    return _adapter(placement_url)


@pytest.fixture
def compute_node(nova):
    """A fresh provider like nova-compute's: VCPU and MEMORY_MB, 512 MiB
    of memory reserved, ratio 1.0; its name and uuid."""
    name = 'compute-%s' % uuid.uuid4().hex[:8]
    rp = nova.post('/resource_providers', json={'name': name}).json()
    nova.put('/resource_providers/%s/inventories' % rp['uuid'], json={
        'resource_provider_generation': rp['generation'],
        'inventories': {
            'VCPU': {'total': 8, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 16384, 'reserved': 512, 'max_unit': 16384,
                          'allocation_ratio': 1.0}}})
    return name, rp['uuid']


def memory(nova, rp_uuid):
    return nova.get('/resource_providers/%s/inventories/MEMORY_MB'
                    % rp_uuid).json()


def nova_reserves(nova, rp_uuid, reserved):
    """nova-compute's periodic update: MEMORY_MB with a new reserved,
    at the generation it reads."""
    inventory = memory(nova, rp_uuid)
    nova.put('/resource_providers/%s/inventories/MEMORY_MB' % rp_uuid,
             json=dict(inventory, reserved=reserved))


@pytest.fixture
def make_updater(conf, tmp_path, placement_url):
    """``make_updater(**options)``: a PlacementUpdater loaded from a
    [placement] config file pointing at the real placement."""
    def make(**options):
        config = tmp_path / 'memcanal.conf'
        config.write_text(
            '[placement]\nauth_type = admin_token\nendpoint = %s\n'
            'token = admin\n' % placement_url + ''.join(
                '%s = %s\n' % item for item in options.items()))
        conf(['--config-file', str(config)], project='memcanal',
             default_config_files=[])
        return placement.PlacementUpdater.from_conf(conf)
    yield make
    conf.reset()
    conf.unregister_opts(
        ks_loading.get_auth_plugin_conf_options('admin_token'),
        group='placement')


class RacingAdapter:
    """The client's adapter, letting ``writer`` write before each of
    the client's first ``times`` PUTs: between its GET and its PUT."""

    def __init__(self, adapter, writer, times=1):
        self.adapter, self.writer, self.times = adapter, writer, times

    def request(self, url, method, **kwargs):
        if method == 'PUT' and self.times:
            self.times -= 1
            self.writer()
        return self.adapter.request(url, method, **kwargs)


def test_ratio_is_set_and_nothing_else_changes(nova, compute_node,
                                               make_updater):
    name, rp_uuid = compute_node
    before = memory(nova, rp_uuid)
    vcpu = nova.get('/resource_providers/%s/inventories/VCPU'
                    % rp_uuid).json()
    updater = make_updater()
    result = updater.apply(name, 1.3)
    after = memory(nova, rp_uuid)
    assert after == dict(before, allocation_ratio=1.3,
                         resource_provider_generation=before[
                             'resource_provider_generation'] + 1)
    assert after['reserved'] == 512
    assert result == dict(host=name, resource_provider=rp_uuid, attempts=1,
                          previous_ratio=1.0, allocation_ratio=1.3,
                          changed=True, generation=after[
                              'resource_provider_generation'])
    assert nova.get('/resource_providers/%s/inventories/VCPU'
                    % rp_uuid).json()['allocation_ratio'] == vcpu[
                        'allocation_ratio']
    # Repeated: nothing is written.
    again = updater.apply(name, 1.3)
    assert again['changed'] is False
    assert memory(nova, rp_uuid) == after


def test_concurrent_update_is_retried_and_keeps_novas_reserved(
        nova, compute_node, make_updater):
    name, rp_uuid = compute_node
    updater = make_updater()
    client = updater.client
    client.adapter = RacingAdapter(
        client.adapter, lambda: nova_reserves(nova, rp_uuid, 1024))
    result = updater.apply(name, 1.4)
    assert result['attempts'] == 2 and result['changed'] is True
    after = memory(nova, rp_uuid)
    assert after['allocation_ratio'] == 1.4
    assert after['reserved'] == 1024


def test_updates_that_always_lose_the_race_give_up(nova, compute_node,
                                                   make_updater):
    name, rp_uuid = compute_node
    updater = make_updater(update_attempts=3)
    reserved = iter(range(600, 700))
    updater.client.adapter = RacingAdapter(
        updater.client.adapter,
        lambda: nova_reserves(nova, rp_uuid, next(reserved)), times=3)
    with pytest.raises(placement.ConcurrentUpdate, match='3 attempts'):
        updater.apply(name, 1.4)
    after = memory(nova, rp_uuid)
    assert after['allocation_ratio'] == 1.0 and after['reserved'] == 602


def test_racing_writers_both_keep_their_fields(nova, placement_url,
                                               compute_node, make_updater):
    """nova-compute and memcanal write at once, for real; whoever loses
    retries, and each one's field survives."""
    name, rp_uuid = compute_node
    updater = make_updater(update_attempts=50)

    def nova_compute():
        writer = _adapter(placement_url)
        for reserved in range(513, 533):
            for _attempt in range(50):
                try:
                    nova_reserves(writer, rp_uuid, reserved)
                    break
                except Exception as exc:
                    if getattr(exc, 'http_status', None) != 409:
                        raise

    outcomes = services.race(nova_compute, lambda: [
        updater.apply(name, ratio) for ratio in (1.1, 1.2, 1.3, 1.4)])
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    after = memory(nova, rp_uuid)
    assert after['allocation_ratio'] == 1.4 and after['reserved'] == 532


def test_ratio_follows_demand_within_bounds_and_steps(nova, compute_node,
                                                      make_updater):
    name, rp_uuid = compute_node
    updater = make_updater(max_ratio=1.5, max_step=0.1, min_change=0.02)
    idle = [overcommit.Guest(2048 * MB, 100 * MB) for _ in range(4)]
    seen = []
    for _ in range(10):
        ratio = updater.desired_ratio(name, idle)
        if ratio is None:
            break
        seen.append(updater.apply(name, ratio)['allocation_ratio'])
    assert seen == [1.1, 1.2, 1.3, 1.4, 1.5]
    assert memory(nova, rp_uuid)['allocation_ratio'] == 1.5
    # Busy VMs bring it down, one step at a time, to min_ratio.
    busy = [overcommit.Guest(2048 * MB, 2000 * MB) for _ in range(4)]
    proposal = updater.proposal(name, busy)
    assert proposal.ideal < 1.0
    assert proposal.ratio == 1.4
    assert proposal.reasons == ('min_ratio', 'max_step')
    updater.apply(name, proposal.ratio)
    after = memory(nova, rp_uuid)
    assert after['allocation_ratio'] == 1.4 and after['reserved'] == 512
    # A host with no measured VM keeps its ratio.
    unmeasured = [overcommit.Guest(2048 * MB, None)]
    assert updater.desired_ratio(name, unmeasured) is None


def test_unknown_compute_node_is_a_clear_error(make_updater):
    with pytest.raises(placement.ProviderNotFound, match='compute-none'):
        make_updater().apply('compute-none', 1.2)
