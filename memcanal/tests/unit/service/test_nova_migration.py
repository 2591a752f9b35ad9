"""NovaMigrator against a fake openstacksdk connection; the real nova is
in memcanal/tests/nova_functional/test_migrator.py."""

import types

from oslo_config import cfg
import pytest

from memcanal.conf import nova as nova_conf
from memcanal.service import nova_migration


class NotFound(Exception):
    status_code = 404


class Forbidden(Exception):
    status_code = 403


class FakeCompute:
    """Servers by uuid; records live_migrate_server calls."""

    def __init__(self, **servers):
        self.servers = servers
        self.migrations = []
        self.failure = None

    def get_server(self, uuid):
        if self.failure is not None:
            raise self.failure
        if uuid not in self.servers:
            raise NotFound(uuid)
        return self.servers[uuid]

    def live_migrate_server(self, server, host=None, block_migration=None):
        self.migrations.append((server.id, host, block_migration))


def server(uuid='s1', host='compute1', status='ACTIVE', task_state=None,
           fault=None):
    return types.SimpleNamespace(id=uuid, compute_host=host, status=status,
                                 task_state=task_state, fault=fault)


def migrator(*servers):
    compute = FakeCompute(**{s.id: s for s in servers})
    return (nova_migration.NovaMigrator(types.SimpleNamespace(
        compute=compute)), compute)


def test_start_asks_for_a_live_migration_to_the_host():
    mig, compute = migrator(server())
    mig.start('s1', 'compute2')
    assert compute.migrations == [('s1', 'compute2', 'auto')]


@pytest.mark.parametrize('state', [
    dict(host='compute2'),
    dict(status='MIGRATING'),
    dict(task_state='migrating')])
def test_start_leaves_a_server_there_or_migrating(state):
    mig, compute = migrator(server(**state))
    mig.start('s1', 'compute2')
    assert compute.migrations == []


def test_start_lets_nova_refusals_through():
    mig, compute = migrator()
    with pytest.raises(NotFound):
        mig.start('s1', 'compute2')


@pytest.mark.parametrize('state, expected', [
    (dict(host='compute2'), ('applied', None)),
    (dict(task_state='migrating'), ('in_progress', None)),
    (dict(status='MIGRATING', task_state='migrating'),
     ('in_progress', None)),
    # nova moved it back, or never moved it.
    (dict(host='compute1'),
     ('failed', 'server is ACTIVE on compute1, not on compute2')),
    (dict(host='compute1', status='ERROR',
          fault={'message': 'migration pre-check failed'}),
     ('failed', 'server is in ERROR: migration pre-check failed')),
    (dict(host='compute2', status='ERROR'),
     ('failed', 'server is in ERROR: no fault given'))])
def test_poll_reads_host_status_and_task_state(state, expected):
    mig, _ = migrator(server(**state))
    assert mig.poll('s1', 'compute2') == expected


def test_poll_a_gone_server_failed():
    mig, _ = migrator()
    assert mig.poll('s1', 'compute2') == ('failed', 'server s1 is gone')


def test_poll_lets_other_errors_through():
    mig, compute = migrator(server())
    compute.failure = Forbidden()
    with pytest.raises(Forbidden):
        mig.poll('s1', 'compute2')


def test_nova_group_has_keystoneauth_options_for_compute():
    conf = cfg.ConfigOpts()
    nova_conf.register_opts(conf)
    conf([], default_config_files=[])
    assert conf.nova.service_type == 'compute'
    assert conf.nova.valid_interfaces == ['internal', 'public']
    for name in ('auth_type', 'endpoint_override', 'timeout', 'cafile'):
        assert hasattr(conf.nova, name)
    [(group, opts)] = nova_conf.list_opts().items()
    assert group.name == 'nova'
    assert {'auth_type', 'endpoint_override', 'username'} <= {
        opt.dest for opt in opts}


def test_server_groups_of_every_project_with_their_policy():
    mig, compute = migrator()
    groups = [types.SimpleNamespace(id='g1', policy='anti-affinity',
                                    policies=None, member_ids=['a', 'b']),
              # Before microversion 2.64: a list of policies.
              types.SimpleNamespace(id='g2', policy=None,
                                    policies=['affinity'], member_ids=None)]
    asked = []
    compute.server_groups = lambda **query: asked.append(query) or groups
    assert mig.server_groups() == {'g1': ('anti-affinity', ('a', 'b')),
                                   'g2': ('affinity', ())}
    assert asked == [{'all_projects': True}]
