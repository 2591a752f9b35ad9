"""memcanal-status upgrade check on real SQLite database files: one
synced by the migrations for the module, emptied after each test, and
others at no schema, an older one and an unknown one."""

import datetime
import json

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck
from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from memcanal.cmd import status
from memcanal.db import migration
from memcanal.db import models

Code = upgradecheck.Code
CONF = status.CONF


def sqlite_url(path):
    return 'sqlite:///%s' % path


@pytest.fixture(scope='module')
def synced_url(tmp_path_factory):
    url = sqlite_url(tmp_path_factory.mktemp('status') / 'synced.sqlite')
    migration.upgrade(url)
    return url


@pytest.fixture
def synced(conf, synced_url):
    """A connection to the synced database CONF points at (tests commit
    what the checks should see), whose rows are deleted after the test."""
    conf.set_override('connection', synced_url, 'database')
    engine = sa.create_engine(synced_url)
    with engine.connect() as connection:
        yield connection
    with engine.begin() as connection:
        for table in (models.Decision, models.MemoryServer, models.Host):
            connection.execute(sa.delete(table))
    engine.dispose()


def add_host(connection, name='host1', silent_seconds=0):
    """A host that reported ``silent_seconds`` ago, every 60 s."""
    return connection.execute(sa.insert(models.Host).values(
        uuid=name + '-uuid', name=name, memory_total_bytes=2 ** 30,
        report_interval=60.0,
        last_heartbeat_at=timeutils.utcnow() - datetime.timedelta(
            seconds=silent_seconds))).inserted_primary_key[0]


def add_decision(connection, state, age_seconds=0):
    connection.execute(sa.insert(models.Decision).values(
        uuid='decision-%s-%d' % (state, age_seconds),
        host_id=add_host(connection, 'host-%s-%d' % (state, age_seconds)),
        kind='memory_targets', policy='isolated_sharing', inputs={},
        outputs={}, state=state, mode='recommend',
        created_at=timeutils.utcnow() - datetime.timedelta(
            seconds=age_seconds)))


def check(name):
    """The result of the check called ``name``."""
    commands = status.UpgradeCommands()
    for title, function in commands._upgrade_checks:
        if title == name:
            if isinstance(function, tuple):
                function, kwargs = function
                return function(commands, **kwargs)
            return function(commands)
    raise AssertionError('no check %r' % name)


def test_every_check_succeeds_on_a_synced_database(synced):
    commands = status.UpgradeCommands()
    assert commands.check() == Code.SUCCESS


def test_schema_of_an_empty_database_fails(conf, tmp_path):
    conf.set_override('connection', sqlite_url(tmp_path / 'empty.sqlite'),
                      'database')
    result = check('Database schema')
    assert result.code == Code.FAILURE
    assert 'memcanal-manage db sync' in result.details
    # The checks reading the database warn instead of failing again.
    assert check('Decisions in flight').code == Code.WARNING
    assert 'Not checked' in check('Decisions in flight').details


def test_schema_behind_head_fails_naming_both(conf, tmp_path):
    url = sqlite_url(tmp_path / 'old.sqlite')
    previous = migration.revisions()[-2]
    migration.upgrade(url, previous)
    conf.set_override('connection', url, 'database')
    result = check('Database schema')
    assert result.code == Code.FAILURE
    assert 'at revision %s, this code needs %s' % (
        previous, migration.head_revision()) in result.details


def test_schema_of_a_newer_release_fails(synced):
    synced.execute(sa.text("UPDATE alembic_version SET version_num = "
                           "'9999'"))
    synced.commit()
    try:
        result = check('Database schema')
    finally:
        synced.execute(sa.text('UPDATE alembic_version SET version_num = '
                               ':head'), {'head': migration.head_revision()})
        synced.commit()
    assert result.code == Code.FAILURE
    assert 'revision 9999, which this code does not know' in result.details


def test_unreachable_database_fails(conf, tmp_path):
    conf.set_override('connection',
                      sqlite_url(tmp_path / 'missing' / 'db.sqlite'),
                      'database')
    result = check('Database schema')
    assert result.code == Code.FAILURE
    assert result.details.startswith('Cannot read the database')


def test_pooling_without_a_memory_server_warns(synced):
    CONF.set_override('enabled', True, 'pooling')
    result = check('Pooling memory servers')
    assert result.code == Code.WARNING
    assert 'memserver_address' in result.details


@pytest.mark.parametrize('enabled, admitted, code, details', [
    (True, True, Code.SUCCESS, '1 memory servers registered, 1 enabled.'),
    (True, False, Code.WARNING, '1 memory servers enabled, none on a host '
     'admitted to pooling, so nothing is pooled: admit the hosts you trust '
     '(openstack memcanal host set --admit).'),
    (False, True, Code.WARNING, '1 memory servers registered, none enabled, '
     'so nothing is pooled: enable those you trust (openstack memcanal '
     'memory server set --enable).')])
def test_pooling_with_a_memory_server_needs_it_enabled_and_admitted(
        synced, enabled, admitted, code, details):
    CONF.set_override('enabled', True, 'pooling')
    host_id = add_host(synced)
    synced.execute(sa.update(models.Host).where(models.Host.id == host_id)
                   .values(pooling_admitted=admitted))
    synced.execute(sa.insert(models.MemoryServer).values(
        host_id=host_id, address='10.0.0.1:7001',
        uuid='server-1', enabled=enabled, capacity_bytes=2 ** 30))
    synced.commit()
    result = check('Pooling memory servers')
    assert (result.code, result.details) == (code, details)


def test_hosts_up_succeed(synced):
    add_host(synced, 'host1')
    synced.commit()
    result = check('Compute hosts up')
    assert (result.code, result.details) == (Code.SUCCESS, '1 hosts up.')


def test_hosts_down_warn_naming_them(synced):
    add_host(synced, 'host1')
    # [service] missed_heartbeats (3) intervals and the grace have passed.
    add_host(synced, 'host2', silent_seconds=3600)
    synced.commit()
    result = check('Compute hosts up')
    assert result.code == Code.WARNING
    assert result.details.startswith('1 of 2 hosts are down')
    assert ': host2.' in result.details


def test_finished_decisions_succeed(synced):
    for state in ('recommended', 'applied', 'failed', 'rolled_back'):
        add_decision(synced, state, age_seconds=3600)
    synced.commit()
    assert check('Decisions in flight').code == Code.SUCCESS


def test_decisions_being_carried_out_warn(synced):
    add_decision(synced, 'approved')
    add_decision(synced, 'rolling_back')
    synced.commit()
    result = check('Decisions in flight')
    assert result.code == Code.WARNING
    assert result.details.startswith('2 decisions are being carried out')


def test_decisions_in_flight_past_the_action_timeout_warn_as_stuck(synced):
    CONF.set_override('action_timeout', 60, 'optimizer')
    add_decision(synced, 'approved', age_seconds=30)
    add_decision(synced, 'approved', age_seconds=120)
    synced.commit()
    result = check('Decisions in flight')
    assert result.code == Code.WARNING
    assert result.details.startswith('1 decisions have been approved')
    assert 'memcanal-service running' in result.details


def test_json_policy_file_fails(conf, tmp_path):
    policy_file = tmp_path / 'policy.json'
    policy_file.write_text('{"memcanal:decisions:list": "role:admin"}')
    conf.set_override('policy_file', str(policy_file), 'oslo_policy')
    result = check('Policy File JSON to YAML Migration')
    assert result.code == Code.FAILURE


@pytest.mark.parametrize('rules, code', [
    ('"memcanal:decisions:list": "role:reader"\n', Code.SUCCESS),
    ('"memcanal:decisions:lst": "role:reader"\n', Code.WARNING),
    ('"memcanal:decisions:list": [role:reader\n', Code.FAILURE),
])
def test_policy_file_overriding_unknown_rules_warns_unparsable_fails(
        conf, tmp_path, rules, code):
    policy_file = tmp_path / 'policy.yaml'
    policy_file.write_text(rules)
    conf.set_override('policy_file', str(policy_file), 'oslo_policy')
    result = check('Policy rules')
    assert result.code == code
    if code == Code.WARNING:
        assert 'memcanal:decisions:lst.' in result.details


def forget_command_line():
    """main() registers its command line, which may be done only on an
    unparsed CONF and only once."""
    CONF.reset()
    CONF.unregister_opt(cfg.SubCommandOpt('command'))


@pytest.fixture
def main(conf, tmp_path, capsys):
    """``main(database_url, *args)``: memcanal-status's exit status and
    stdout, configured by a file as an operator's would be."""
    config_file = tmp_path / 'memcanal.conf'

    def main(url, *args):
        forget_command_line()
        config_file.write_text('[database]\nconnection = %s\n' % url)
        code = status.main(['memcanal-status', '--config-file',
                            str(config_file), 'upgrade', 'check', *args])
        return code, capsys.readouterr().out
    yield main
    forget_command_line()


def test_main_prints_json_and_exits_with_the_worst_result(main, tmp_path,
                                                          synced_url):
    code, out = main(sqlite_url(tmp_path / 'empty.sqlite'), '--json')
    assert code == Code.FAILURE
    checks = {c['check']: c['result'] for c in json.loads(out)['checks']}
    assert checks == {
        'Database schema': Code.FAILURE,
        'Policy File JSON to YAML Migration': Code.SUCCESS,
        'Policy rules': Code.SUCCESS,
        'Pooling memory servers': Code.SUCCESS,
        'Compute hosts up': Code.WARNING,
        'Decisions in flight': Code.WARNING,
    }
    code, out = main(synced_url)
    assert code == Code.SUCCESS
    assert 'Check: Decisions in flight' in out
