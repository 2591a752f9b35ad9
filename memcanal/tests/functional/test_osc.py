"""The real ``openstack memcanal`` CLI against a seeded memcanal behind a
real keystone: the endpoint comes from keystone's catalog, the token is
keystone's, outputs are parsed from ``-f json``.

One keystone and one cloud for the module (cloud.py); each CLI process
costs a second or two, so each invocation checks several things.
"""

import json
import os
import subprocess
import sys

from oslo_config import cfg
import pytest

from memcanal.api import deploy
from memcanal.cmd import plan
from memcanal.tests.functional import cloud as seeded
from memcanal.tests.functional import test_api

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
GIB_MIB = 1024
PLAN_INPUT = {'vms': [
    {'name': 'cache', 'baseline_mb': 1024,
     'mrc': [[256, 0.5], [512, 0.1], [1024, 0.0]]},
    {'name': 'scan', 'baseline_mb': 1024,
     'mrc': [[256, 0.9], [512, 0.8], [1024, 0.7]]}]}


@pytest.fixture(scope='module')
def cloud(keystone_url, tmp_path_factory):
    with seeded.seeded_cloud(keystone_url,
                             tmp_path_factory.mktemp('cloud')) as running:
        yield running


def openstack(cloud, *args, stdin=None, env=None):
    """``openstack memcanal *args`` as the keystone admin (plus ``env``);
    the finished process."""
    env = dict({key: value for key, value in os.environ.items()
                if not key.startswith('OS_')}, **cloud.env(), **(env or {}))
    return subprocess.run([OPENSTACK, 'memcanal', *args], env=env,
                          input=stdin, capture_output=True, text=True,
                          timeout=120)


def as_json(cloud, *args, stdin=None):
    done = openstack(cloud, *args, '-f', 'json', stdin=stdin)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_cloud_is_in_the_catalog_and_seeded(cloud):
    """cloud.py's promises, checked before the CLI tests change it."""
    session = cloud.session()
    assert session.get_endpoint(service_type='memcanal',
                                interface='public') == cloud.api_url
    decisions = session.get(
        cloud.api_url + '/decisions',
        headers={'OpenStack-API-Version': 'memcanal 1.1'}).json()
    states = {d['uuid']: (d['state'], d['kind'])
              for d in decisions['decisions']}
    assert sorted(states[uuid] for uuid in cloud.recommended) == sorted(
        ('recommended', kind) for kind in ('memory_targets',
                                           'allocation_ratio') * 2)
    assert states[cloud.applied] == ('applied', 'memory_targets')
    assert len(states) == 5
    for name, uuid in cloud.instances.items():
        shown = session.get(cloud.api_url + '/instances/' + uuid).json()
        assert shown['host_uuid'] == cloud.hosts[cloud.instance_hosts[name]]
        report = shown['latest_report']
        assert set(report['wss']) == {'prl', 'pml', 'esx'}
        assert {len(c) for c in report['mrc'].values()} == {
            seeded.CURVE_POINTS}


def test_hosts_and_instances(cloud):
    listed = as_json(cloud, 'host', 'list')
    assert sorted((h['Name'], h['UUID'], h['Instances']) for h in listed) == [
        ('compute-1', cloud.hosts['compute-1'], 3),
        ('compute-2', cloud.hosts['compute-2'], 2)]
    on_2 = as_json(cloud, 'instance', 'list', '--host', 'compute-2')
    assert sorted(i['UUID'] for i in on_2) == sorted(
        cloud.instances[name] for name in ('web-2', 'batch-2'))
    assert {i['Memory (MiB)'] for i in on_2} == {2 * GIB_MIB, 4 * GIB_MIB}
    shown = as_json(cloud, 'instance', 'show', cloud.instances['db-1'])
    # db-1's latest working set is 6 GiB by PRL; PML and ESX near it.
    assert shown['wss_mib'] == {'prl': 6144, 'pml': 6451, 'esx': 5530}
    curve = shown['miss_ratio_curve']['hcache']
    assert len(curve) == seeded.CURVE_POINTS
    assert curve[-1] == [8 * 2 ** 30, 0.0]
    assert shown['latest_report_sequence'] == seeded.REPORTS


def test_the_endpoint_override_wins_over_the_catalog(cloud):
    # Nothing listens on port 1: the override was used.
    done = openstack(cloud, 'host', 'list', env={
        'OS_MEMCANAL_ENDPOINT_OVERRIDE': 'http://127.0.0.1:1'})
    assert done.returncode == 1
    assert 'http://127.0.0.1:1/' in done.stderr


def test_instance_shown_as_a_table_charts_its_curve(cloud):
    done = openstack(cloud, 'instance', 'show', cloud.instances['web-1'])
    assert done.returncode == 0, done.stderr
    assert 'miss ratio by memory (hcache)' in done.stdout
    assert '1.0 |*' in done.stdout
    assert '4096 MiB' in done.stdout


def test_decisions_approve_reject_rollback(cloud):
    waiting = as_json(cloud, 'decision', 'list', '--state', 'recommended',
                      '--kind', 'memory_targets')
    # Hosts by name: the admin may list them.
    by_host = {d['Host']: d['UUID'] for d in waiting}
    assert sorted(by_host) == sorted(cloud.hosts)
    assert set(by_host.values()) <= set(cloud.recommended)
    approved = as_json(cloud, 'decision', 'approve',
                       by_host['compute-2'], '--reason', 'ok')
    assert approved['state'] == 'approved'
    assert approved['events'][-1]['reason'] == 'ok'
    rejected = as_json(cloud, 'decision', 'reject', by_host['compute-1'])
    assert rejected['state'] == 'rejected'
    # compute-2's approval does not supersede compute-1's applied one.
    rolled = as_json(cloud, 'decision', 'rollback', cloud.applied)
    assert rolled['state'] == 'rolling_back'
    assert {a['kind'] for a in rolled['actions']} == {'set_target',
                                                      'restore'}
    # The error's code reaches the user.
    again = openstack(cloud, 'decision', 'approve', by_host['compute-1'])
    assert again.returncode == 1
    assert 'memcanal.decision.state_conflict' in again.stderr
    assert 'HTTP 409' in again.stderr


def test_instance_set(cloud):
    uuid = cloud.instances['web-2']
    changed = as_json(cloud, 'instance', 'set', uuid, '--opt-out',
                      '--floor', '512', '--mechanism', 'hotplug')
    assert (changed['opt_out'], changed['floor_bytes'],
            changed['ceiling_bytes'], changed['mechanism']) == (
        True, 512 * 2 ** 20, None, 'hotplug')
    restored = as_json(cloud, 'instance', 'set', uuid, '--opt-in',
                       '--no-floor', '--mechanism', 'default')
    assert (restored['opt_out'], restored['floor_bytes'],
            restored['mechanism']) == (False, None, None)


def test_memory_server_list_and_set(cloud):
    [listed] = as_json(cloud, 'memory', 'server', 'list')
    assert (listed['UUID'], listed['Host'], listed['Enabled'],
            listed['Free (MiB)']) == (cloud.memory_server, 'compute-2',
                                      False, 0)
    enabled = as_json(cloud, 'memory', 'server', 'set', 'compute-2',
                      '--enable')
    assert (enabled['uuid'], enabled['enabled'], enabled['free_bytes']) == (
        cloud.memory_server, True, 8 * 2 ** 30)
    disabled = as_json(cloud, 'memory', 'server', 'set',
                       cloud.memory_server, '--disable')
    assert disabled['enabled'] is False
    refused = openstack(cloud, 'memory', 'server', 'set', 'compute-2')
    assert refused.returncode == 2 and '--enable' in refused.stderr


def _targets(rows):
    """{policy: {vm: MiB}} of ``plan -f json``'s rows."""
    targets = {}
    for row in rows:
        targets.setdefault(row['Policy'], {})[row['VM']] = row[
            'Target (MiB)']
    return targets


def test_plan_a_file_and_a_live_host(cloud):
    from_stdin = as_json(cloud, 'plan', '-',
                         stdin=json.dumps(PLAN_INPUT))
    expected = plan.plan(PLAN_INPUT)['policies']
    assert _targets(from_stdin) == {
        name: policy['targets_mb'] for name, policy in expected.items()}
    live = as_json(cloud, 'plan', '--host', 'compute-1', '--total', '12288')
    on_1 = {cloud.instances[name] for name, host
            in cloud.instance_hosts.items() if host == 'compute-1'}
    assert set(_targets(live)) == set(expected)
    for name, targets in _targets(live).items():
        assert set(targets) == on_1
        # 12 GiB of the VMs' 16 shared out, all of it.
        assert sum(targets.values()) == 12288, name


def test_the_all_in_ones_way_no_keystone(cloud):
    """memcanal-aio serves the API with noauth2: ``--os-auth-type none``
    (this plugin sends noauth2's admin token) or keystoneauth's
    ``admin_token`` with the token ``admin``, the endpoint given."""
    cfg.CONF.set_override('auth_strategy', 'noauth2', 'api')
    try:
        noauth_app = deploy.loadapp(cfg.CONF)
    finally:
        cfg.CONF.clear_override('auth_strategy', 'api')
    without_keystone = {key: value for key, value in os.environ.items()
                        if not key.startswith('OS_')}
    with test_api.serving(noauth_app) as url:
        for auth in (['--os-auth-type', 'none'],
                     ['--os-auth-type', 'admin_token', '--os-token',
                      'admin', '--os-endpoint', url]):
            done = subprocess.run(
                [OPENSTACK, *auth, 'memcanal', 'decision', 'list',
                 '--limit', '1', '-f', 'json', '-c', 'Host'],
                env=dict(without_keystone,
                         OS_MEMCANAL_ENDPOINT_OVERRIDE=url),
                capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (auth, done.stderr)
            [newest] = json.loads(done.stdout)
            assert newest['Host'] in cloud.hosts
