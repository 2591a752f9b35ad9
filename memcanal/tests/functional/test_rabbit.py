"""The agent and the service as separate processes, over real RabbitMQ;
and what someone holding the broker's credentials but no host's key can
no longer do to them (issue #25, finding 5)."""

import os
import signal
import subprocess
import sys
import time
import uuid

import oslo_messaging as messaging
import pytest
import requests
import sqlalchemy as sa

from memcanal.api import deploy
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal import rpc
from memcanal.rpc import service_api
from memcanal.rpc import signing
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests import keys
from memcanal.tests.functional import services
from memcanal.tests.functional import test_api
from memcanal.tests.unit.rpc import test_reports

BIN = os.path.dirname(sys.executable)
VMS = 3
TIB = 2 ** 40


@pytest.fixture
def extra_config():
    """More of the processes' configuration file (a test overrides it)."""
    return ''


@pytest.fixture
def cloud(rabbit_url, tmp_path, extra_config):
    """Config for one service and one agent on a private exchange, with
    the service's key pair."""
    db_path = tmp_path / 'memcanal.sqlite'
    database = memcanal_fixtures.Database('sqlite:///%s' % db_path,
                                          migrate=True)
    database.setUp()
    exchange = 'memcanal-test-%s' % uuid.uuid4().hex[:8]
    private, public = (str(tmp_path / 'service.key'),
                       str(tmp_path / 'service.pub'))
    signing.create_key_pair(private, public)
    config = tmp_path / 'memcanal.conf'
    config.write_text(
        '[DEFAULT]\n'
        'transport_url = %s\n'
        'control_exchange = %s\n'
        'state_path = %s\n'
        'host = compute-test\n'
        '[database]\nconnection = sqlite:///%s\n'
        '[agent]\ndriver = simulated\nreport_interval = 0.5\n'
        'register_timeout = 2\nservice_public_key = %s\n'
        '[simulated]\ninstances = %d\nreferences_per_interval = 2000\n'
        '[service]\nperiodic_interval = 1\nsigning_key = %s\n%s' % (
            rabbit_url, exchange, tmp_path, db_path, public, VMS, private,
            extra_config))
    processes = {}

    def start(name):
        processes[name] = subprocess.Popen(
            [os.path.join(BIN, 'memcanal-%s' % name), '--config-file',
             str(config)], start_new_session=True,
            stdout=open(tmp_path / ('%s.log' % name), 'ab'),
            stderr=subprocess.STDOUT)

    def kill(name):
        process = processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    yield {'start': start, 'kill': kill, 'config': config,
           'tmp_path': tmp_path}
    for name in list(processes):
        kill(name)
    database.cleanUp()


def stored_host_reports():
    with db_api.context_manager.reader.using(
            memcanal_context.get_admin_context()) as session:
        return session.execute(sa.select(
            models.HostReport.id, models.HostReport.sequence)).all()


def test_agent_kill_and_restart_loses_and_duplicates_nothing(cloud):
    cloud['start']('service')
    cloud['start']('agent')
    services.wait_for(lambda: len(stored_host_reports()) >= 5,
                      what='five reports over RabbitMQ')
    cloud['kill']('agent')
    before = stored_host_reports()
    cloud['start']('agent')
    after = services.wait_for(
        lambda: (r := stored_host_reports()) and len(r) >= len(before) + 5
        and r, what='five more reports after the restart')
    # Nothing stored before the kill is gone or changed.
    assert set(before) <= set(after)
    sequences = [sequence for _id, sequence in after]
    assert len(sequences) == len(set(sequences))
    # The restarted agent numbered on, after everything it had sent.
    new = sorted(set(sequences) - {s for _i, s in before})
    assert min(new) > max(s for _i, s in before)
    counts = db_api.count_reports(memcanal_context.get_admin_context())
    assert counts['instance_reports'] == VMS * counts['host_reports']
    instances = db_api.list_instances(memcanal_context.get_admin_context())
    assert len(instances) == VMS


def test_service_restart_loses_no_queued_report(cloud):
    cloud['start']('service')
    cloud['start']('agent')
    services.wait_for(lambda: len(stored_host_reports()) >= 2, what='reports')
    cloud['kill']('service')
    time.sleep(2)  # about four reports queue up in RabbitMQ meanwhile
    cloud['kill']('agent')
    sent = int((cloud['tmp_path'] / 'agent-compute-test.sequence')
               .read_text())
    cloud['start']('service')

    def all_arrived():
        stored = {s for _i, s in stored_host_reports()}
        # The last number may have been taken by a report the kill
        # stopped before it was cast.
        return stored >= set(range(1, sent))
    services.wait_for(all_arrived,
                      what='queued reports after the service restart')


@pytest.fixture
def rabbit(cloud, conf):
    """ServiceAPI(host, key): clients as anyone holding the broker's
    credentials makes them (the processes' file: same RabbitMQ, same
    exchange)."""
    conf(['--config-file', str(cloud['config'])], project='memcanal',
         default_config_files=[])
    rpc.init(conf)
    yield service_api.ServiceAPI
    rpc.cleanup()


@pytest.fixture
def rabbit_client(rabbit):
    return rabbit('compute-direct', keys.Agent('compute-direct').key)


def register(client, memory_total_bytes=2 ** 34):
    """The host's registration, once the service answers: a call made
    before it listens is lost, so retry, as the agent does."""
    def answered():
        try:
            return client.register_host(
                memcanal_context.get_admin_context(), memory_total_bytes, 0,
                60.0, timeout=2)
        except messaging.MessagingTimeout:
            return None
    return services.wait_for(answered, what='the service to answer')


def test_redelivered_and_malformed_reports_over_rabbit(cloud, rabbit_client):
    cloud['start']('service')
    context = memcanal_context.get_admin_context()
    host = register(rabbit_client)
    report = test_reports.good_report()
    report['host_uuid'] = host['uuid']
    for _ in range(3):
        rabbit_client.report(context, report)
    bad = dict(report, sequence=report['sequence'] + 1)
    bad['instances'] = [dict(report['instances'][0], allocated_bytes=-1)]
    rabbit_client.report(context, bad)
    services.wait_for(
        lambda: db_api.count_rejections(context, host['uuid']) == 1,
        what='the rejection')
    assert [s for _i, s in stored_host_reports()] == [report['sequence']]
    again = register(rabbit_client)
    assert again == {'uuid': host['uuid'],
                     'last_sequence': report['sequence'],
                     'service_version': service_api.ServiceAPI.VERSION}


def victim():
    """compute-test, whose agent runs, once it reported its VMs: its
    record and its VMs'."""
    ctx = memcanal_context.get_admin_context()

    def reported():
        hosts = {h['name']: h for h in db_api.list_hosts(ctx)}
        vms = db_api.list_instances(ctx)
        return ('compute-test' in hosts and len(vms) == VMS
                and (hosts['compute-test'], vms))
    return services.wait_for(reported, what='compute-test to report')


def memory_server(host_name):
    """The memory server of ``host_name``, once registered."""
    ctx = memcanal_context.get_admin_context()
    [server] = services.wait_for(
        lambda: [s for s in pooling_db.list_memory_servers(ctx)
                 if s['host_name'] == host_name],
        what="%s's memory server" % host_name)
    return server


def forged_report(host_uuid, sequence, vms, project='attacker'):
    """A report of every VM ``vms`` names, as someone else's, and a 1 TiB
    memory server."""
    report = test_reports.good_report()
    sample = report['instances'][0]
    report.update(host_uuid=host_uuid, sequence=sequence, memserver={
        'address': '192.0.2.66:7400', 'capacity_bytes': TIB})
    report['instances'] = [dict(sample, uuid=vm['uuid'], project_id=project)
                           for vm in vms]
    return report


def refused(call):
    with pytest.raises(messaging.RemoteError) as error:
        call()
    assert error.value.exc_type == 'MessageRefused'


@pytest.mark.parametrize('extra_config', [
    '[simulated]\nmemserver_mb = 512\n'])
def test_the_broker_credentials_without_a_hosts_key_change_nothing(
        cloud, rabbit):
    cloud['start']('service')
    cloud['start']('agent')
    host, vms = victim()
    server = memory_server('compute-test')
    ctx = memcanal_context.get_admin_context()
    # Whoever holds the broker's credentials, with a key of their own.
    impostor = rabbit('compute-test', keys.Agent('x').key)
    refused(lambda: impostor.register_host(ctx, TIB, 0, 60.0, timeout=10))
    # Unsigned, as before RPC 1.5: learns nothing either.
    refused(lambda: impostor.client.prepare(version='1.2', timeout=10).call(
        ctx, 'register_host', name='compute-test', memory_total_bytes=TIB,
        memory_reserved_bytes=0, report_interval=60.0))
    refused(lambda: impostor.stored_reports(ctx, host['uuid'], [1],
                                            timeout=10))
    # Its own host, known by now from the reports it read off the broker.
    impostor.report(ctx, forged_report(host['uuid'], 10 ** 6, vms))
    services.wait_for(lambda: db_api.count_rejections(ctx, host['uuid'])
                      >= 4, what='the refusals')
    # A host of its own registers, and lends nothing; it may not take
    # another host's VMs, nor change their project.
    ghost = rabbit('ghost', keys.Agent('ghost').key)
    ghost_uuid = register(ghost, TIB)['uuid']
    ghost.report(ctx, forged_report(ghost_uuid, 1, vms))
    services.wait_for(lambda: db_api.get_host(ctx, ghost_uuid)[
        'last_sequence'] == 1, what="the ghost's report")
    after = db_api.get_host(ctx, host['uuid'])
    assert after['memory_total_bytes'] == host['memory_total_bytes']
    assert 10 ** 6 not in {s for _i, s in stored_host_reports()}
    servers = {s['host_name']: s for s in pooling_db.list_memory_servers(ctx)}
    assert (servers['compute-test']['address'],
            servers['compute-test']['capacity_bytes'],
            servers['compute-test']['enabled']) == (
        server['address'], 512 * 2 ** 20, False)
    assert (servers['ghost']['capacity_bytes'], servers['ghost']['enabled'],
            servers['ghost']['free_bytes']) == (TIB, False, 0)
    assert {(vm['uuid'], vm['host_uuid'], vm['project_id'])
            for vm in db_api.list_instances(ctx)} == {
        (vm['uuid'], host['uuid'], vm['project_id']) for vm in vms}


@pytest.mark.parametrize('extra_config', [
    '[simulated]\nhost_memory_mb = 4096\n'
    '[pooling]\nenabled = true\nmin_page_mb = 16\n'
    '[optimizer]\noptimize_interval = 1\n'
    '[api]\nauth_strategy = noauth2\n'])
def test_a_new_memory_server_lends_only_once_an_operator_enables_it(
        cloud, rabbit, conf):
    """compute-test's VMs hold more than its 2 GiB: pooling would page
    them out to the only other server, a fresh host's, and does once an
    operator enabled it and admitted its host through the API (1.10)."""
    cloud['start']('service')
    cloud['start']('agent')
    _host, vms = victim()
    ctx = memcanal_context.get_admin_context()
    # The borrower is one of the cloud's own: the operator admitted it.
    pooling_db.set_admitted(ctx, vms[0]['host_uuid'], True)
    ghost = rabbit('ghost', keys.Agent('ghost').key)
    ghost_uuid = register(ghost, TIB)['uuid']
    ghost.report(ctx, forged_report(ghost_uuid, 1, []))
    server = memory_server('ghost')
    log = cloud['tmp_path'] / 'service.log'

    def held():
        """The planner's runs that found compute-test no lender."""
        return log.read_text().count(
            'Host compute-test stays over the pooling threshold')

    def pooling():
        return [d for d in decisions_db.list_decisions(ctx)
                if d['kind'] == 'pooling']
    # Twice since the ghost's server registered, it lent nothing.
    since = held()
    services.wait_for(lambda: held() >= since + 2 or pooling(),
                      what='two pooling runs')
    assert pooling() == []
    headers = {'X-Auth-Token': 'admin',
               'OpenStack-API-Version': 'memcanal 1.10'}
    with test_api.serving(deploy.loadapp(conf)) as base:
        response = requests.patch(
            '%s/memory_servers/%s' % (base, server['uuid']),
            json={'enabled': True}, timeout=30, headers=headers)
        assert response.status_code == 200, response.text
        # Enabled, the server of a host nobody admitted still lends
        # nothing (issue 36).
        since = held()
        services.wait_for(lambda: held() >= since + 2 or pooling(),
                          what='two more pooling runs')
        assert pooling() == []
        response = requests.patch(
            '%s/hosts/%s' % (base, ghost_uuid),
            json={'pooling_admitted': True}, timeout=30, headers=headers)
    assert response.status_code == 200, response.text
    decided = services.wait_for(pooling, what='a pooling decision')
    assert {d['peer_host_uuid'] for d in decided} == {ghost_uuid}
    assert {d['host_uuid'] for d in decided} == {vms[0]['host_uuid']}
