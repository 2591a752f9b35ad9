"""A small memcanal cloud behind a real keystone, for CLI and tempest tests.

``seeded_cloud(keystone_url, state_dir)`` is a context manager. Given the
v3 URL of a running keystone (the ``keystone_url`` fixture of
conftest.py), it

1. builds a fresh SQLite database in ``state_dir`` and stores, the way the
   service does (``register_host``, ``validate_report``,
   ``store_report``, ``create_decision``), two hosts, five VMs with three
   reports each carrying WSS estimates and miss-ratio curves, a memory
   server, and decisions;
2. serves the memcanal API on 127.0.0.1 (a free port, a thread of this
   process) with ``[api] auth_strategy = keystone``: real tokens,
   validated by keystonemiddleware;
3. registers the service (type ``memcanal``) and its public and internal
   endpoints in keystone's catalog, and removes them on exit;

and yields a ``Cloud``:

- ``api_url``, ``keystone_url``;
- ``username``, ``password``, ``project_name``, ``user_domain_name``,
  ``project_domain_name``: keystone's bootstrap admin (role admin);
- ``env()``: the ``OS_*`` variables an ``openstack`` CLI process needs to
  log in as that admin (merge them into ``os.environ``);
- ``session()``: a keystoneauth1 Session for that admin;
- ``hosts``: host name -> uuid, ``compute-1`` and ``compute-2``;
- ``instances``: VM name -> uuid (``web-1``, ``db-1``, ``files-1`` on
  compute-1, ``web-2``, ``batch-2`` on compute-2), with
  ``instance_hosts``: VM name -> host name;
- ``recommended``: the uuids of the decisions waiting for an operator, in
  state ``recommended``, one per (host, kind): memory_targets and
  allocation_ratio of each host, so four in all, to approve or reject;
- ``applied``: the uuid of an earlier memory_targets decision of
  compute-1 whose actions were applied, to roll back;
- ``memory_server``: the uuid of compute-2's memory server, which its
  reports registered and no operator enabled yet.

No service or agent runs, but the hosts registered with an hour's
report interval, so they are ``up`` for an hour. An approved decision
stays ``approved`` and keeps its host busy (approving or rolling back
another decision of that host is then 409 ``memcanal.decision.host_busy``);
a rollback stays ``rolling_back``. Rejecting never conflicts. Every VM's
latest report has ``wss`` by ``prl``, ``pml`` and ``esx`` and ``mrc`` by
``hcache`` and ``shards`` (sixteen points up to its memory).

The API parses the global oslo.config CONF (as every memcanal process
does): don't use the function-scoped ``conf`` fixtures in a test while
the cloud runs. The caller's pytest decides whether a missing keystone
skips or fails, through the ``keystone_url`` fixture.
"""

import contextlib
import dataclasses
import datetime

from keystoneauth1.identity import v3
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneclient.v3 import client as ks_client
from oslo_utils import timeutils

from memcanal.api import deploy
from memcanal.api import microversion
from memcanal import context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.db import transitions
from memcanal.rpc import reports
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.functional import test_api
from memcanal.tests.unit.api import data

MIB = 2 ** 20
GIB = 2 ** 30
PROJECT_A = 'project-a'
PROJECT_B = 'project-b'
REPORTS = 3
REPORT_INTERVAL = 3600.0
CURVE_POINTS = 16

# name: (host, uuid, project, memory, working set at the last report,
# how steeply its misses fall with memory: high for a cache-friendly VM).
VMS = {
    'web-1': ('compute-1', '1a000000-0000-4000-8000-000000000001',
              PROJECT_A, 4 * GIB, 1536 * MIB, 4.0),
    'db-1': ('compute-1', '1b000000-0000-4000-8000-000000000002',
             PROJECT_A, 8 * GIB, 6 * GIB, 2.0),
    'files-1': ('compute-1', '1c000000-0000-4000-8000-000000000003',
                PROJECT_B, 4 * GIB, 4 * GIB, 1.0),
    'web-2': ('compute-2', '2a000000-0000-4000-8000-000000000004',
              PROJECT_A, 2 * GIB, 768 * MIB, 4.0),
    'batch-2': ('compute-2', '2b000000-0000-4000-8000-000000000005',
                PROJECT_B, 4 * GIB, 3 * GIB, 1.5),
}
HOSTS = {'compute-1': (64 * GIB, 2 * GIB), 'compute-2': (32 * GIB, GIB)}
MEMORY_SERVER = '192.0.2.2:7400'


@dataclasses.dataclass
class Cloud:
    api_url: str
    keystone_url: str
    hosts: dict
    instances: dict
    instance_hosts: dict
    recommended: list
    applied: str
    memory_server: str
    username: str = 'admin'
    password: str = services.KEYSTONE_ADMIN_PASSWORD
    project_name: str = 'admin'
    user_domain_name: str = 'Default'
    project_domain_name: str = 'Default'

    def env(self):
        return {'OS_AUTH_URL': self.keystone_url, 'OS_AUTH_TYPE': 'password',
                'OS_IDENTITY_API_VERSION': '3',
                'OS_USERNAME': self.username, 'OS_PASSWORD': self.password,
                'OS_PROJECT_NAME': self.project_name,
                'OS_USER_DOMAIN_NAME': self.user_domain_name,
                'OS_PROJECT_DOMAIN_NAME': self.project_domain_name}

    def session(self):
        return admin_session(self.keystone_url)


def admin_session(keystone_url):
    return ks_session.Session(auth=v3.Password(
        auth_url=keystone_url, username='admin',
        password=services.KEYSTONE_ADMIN_PASSWORD, project_name='admin',
        user_domain_name='Default', project_domain_name='Default'))


def curve(memory, wss, steepness):
    """A miss-ratio curve: misses fall from 1 at no memory towards 0 at
    the working set, faster for a steeper (more cache-friendly) VM."""
    sizes = [memory * (i + 1) // CURVE_POINTS for i in range(CURVE_POINTS)]
    return [[size, round((1 - min(size, wss) / wss) ** steepness, 4)]
            for size in sizes]


def _sample(name, sequence):
    host, uuid, project, memory, wss, steepness = VMS[name]
    # The working set grows to its last value over the reports.
    grown = wss * (REPORTS + sequence) // (2 * REPORTS)
    return {'uuid': uuid, 'project_id': project, 'allocated_bytes': memory,
            'observed_bytes': memory, 'flavor': 'm1.%d' % (memory // GIB),
            'wss': {'prl': grown, 'pml': grown * 21 // 20,
                    'esx': grown * 9 // 10},
            'mrc': {'hcache': curve(memory, grown, steepness),
                    'shards': curve(memory, grown * 11 // 10, steepness)},
            'guest_stats': {'references': 1e6 * sequence,
                            'major_faults': 12.0 * sequence}}


def _seed_reports(ctx):
    # An hour's report interval: the hosts stay up (the API derives the
    # state from heartbeats) however long the tests take.
    hosts = {name: db_api.register_host(ctx, name, total, reserved,
                                        REPORT_INTERVAL)['uuid']
             for name, (total, reserved) in HOSTS.items()}
    start = timeutils.utcnow() - datetime.timedelta(minutes=REPORTS)
    for sequence in range(1, REPORTS + 1):
        collected = start + datetime.timedelta(minutes=sequence)
        for host, host_uuid in hosts.items():
            report = {'host_uuid': host_uuid, 'sequence': sequence,
                      'collected_at': collected.strftime(
                          '%Y-%m-%dT%H:%M:%SZ'),
                      'instances': [_sample(name, sequence)
                                    for name, vm in VMS.items()
                                    if vm[0] == host]}
            if host == 'compute-2':
                report['memserver'] = {'address': MEMORY_SERVER,
                                       'capacity_bytes': 8 * GIB}
            assert db_api.store_report(ctx, reports.validate_report(
                report, max_mrc_points=CURVE_POINTS, max_instances=len(VMS)))
    return hosts


def _memory_targets(ctx, host_uuid, host, fraction):
    """A decision resizing each VM of ``host`` to ``fraction`` of its
    memory, shaped as the optimizer records one."""
    targets = {vm[1]: int(vm[3] * fraction) // MIB * MIB
               for vm in VMS.values() if vm[0] == host}
    outputs = {'policy': {'policy': 'isolated_sharing', 'targets': targets},
               'instances': {uuid: {'target_bytes': target,
                                    'policy_target_bytes': target,
                                    'curve': 'hcache',
                                    'predicted_miss_ratio': 0.02,
                                    'guardrails': []}
                             for uuid, target in targets.items()}}
    return decisions_db.create_decision(
        ctx, host_uuid, 'memory_targets', 'isolated_sharing', 'recommend',
        {'free_bytes': 0}, outputs,
        [{'instance_uuid': uuid, 'target_bytes': target,
          'previous_bytes': None, 'mechanism': 'balloon'}
         for uuid, target in targets.items()])['uuid']


def _seed_decisions(ctx, hosts):
    """(the recommended decisions' uuids, the applied one's)."""
    applied = _memory_targets(ctx, hosts['compute-1'], 'compute-1', 0.9)
    actions = transitions.request_transition(ctx, applied,
                                             'approve')['actions']
    action_delivery.record_results(ctx, applied, [
        {'uuid': action['uuid'], 'state': 'applied', 'error': None,
         'result': {'seconds': 0.4}} for action in actions])
    recommended = [_memory_targets(ctx, hosts[host], host, 0.75)
                   for host in HOSTS]
    recommended += [decisions_db.create_ratio_decision(
        ctx, hosts[host], ratio, 'demand_ratio', 'recommend', {},
        {'allocation_ratio': ratio})['uuid']
        for host, ratio in (('compute-1', 1.5), ('compute-2', 1.25))]
    return recommended, applied


def configure_keystone_auth(conf, directory, keystone_url,
                            password=services.KEYSTONE_ADMIN_PASSWORD):
    """Point the API's auth_token at keystone, authenticating as the
    bootstrap admin (``password``); the configuration file goes in
    ``directory``."""
    config = directory / 'memcanal-keystone.conf'
    config.write_text(
        '[api]\nauth_strategy = keystone\n'
        '[keystone_authtoken]\n'
        'www_authenticate_uri = %(url)s\nauth_url = %(url)s\n'
        'auth_type = password\nusername = admin\npassword = %(password)s\n'
        'project_name = admin\n'
        'user_domain_name = Default\nproject_domain_name = Default\n'
        'delay_auth_decision = False\n' % {
            'url': keystone_url, 'password': password})
    conf(['--config-file', str(config)], project='memcanal',
         default_config_files=[])


@contextlib.contextmanager
def _registered(keystone_url, api_url):
    """The memcanal service and its endpoints in keystone's catalog."""
    keystone = ks_client.Client(session=admin_session(keystone_url))
    service = keystone.services.create(
        'memcanal', microversion.SERVICE_TYPE,
        description='memcanal (functional tests)')
    for interface in ('public', 'internal'):
        keystone.endpoints.create(service, api_url, interface=interface)
    try:
        yield
    finally:
        # Deleting the service deletes its endpoints.
        keystone.services.delete(service)


@contextlib.contextmanager
def seeded_cloud(keystone_url, state_dir):
    """See the module's docstring. ``state_dir``: a pathlib.Path."""
    with data.using(memcanal_fixtures.ConfFixture()) as conf_fixture, \
            data.using(memcanal_fixtures.Database(
                'sqlite:///%s' % (state_dir / 'memcanal.sqlite'))):
        conf = conf_fixture.conf
        try:
            configure_keystone_auth(conf, state_dir, keystone_url)
            ctx = context.get_admin_context()
            hosts = _seed_reports(ctx)
            [server] = pooling_db.list_memory_servers(ctx)
            recommended, applied = _seed_decisions(ctx, hosts)
            with test_api.serving(deploy.loadapp(conf)) as api_url, \
                    _registered(keystone_url, api_url):
                yield Cloud(
                    api_url=api_url, keystone_url=keystone_url, hosts=hosts,
                    instances={name: vm[1] for name, vm in VMS.items()},
                    instance_hosts={name: vm[0]
                                    for name, vm in VMS.items()},
                    recommended=recommended, applied=applied,
                    memory_server=server['uuid'])
        finally:
            conf.reset()
            conf.unregister_opts(
                ks_loading.get_auth_plugin_conf_options('password'),
                group='keystone_authtoken')
