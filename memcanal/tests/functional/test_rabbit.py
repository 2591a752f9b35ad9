"""The agent and the service as separate processes, over real RabbitMQ."""

import os
import signal
import subprocess
import sys
import time
import uuid

import oslo_messaging as messaging
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import models
from memcanal import rpc
from memcanal.rpc import service_api
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.unit.rpc import test_reports

BIN = os.path.dirname(sys.executable)
VMS = 3


@pytest.fixture
def cloud(rabbit_url, tmp_path):
    """Config for one service and one agent on a private exchange."""
    db_path = tmp_path / 'memcanal.sqlite'
    database = memcanal_fixtures.Database('sqlite:///%s' % db_path,
                                          migrate=True)
    database.setUp()
    exchange = 'memcanal-test-%s' % uuid.uuid4().hex[:8]
    config = tmp_path / 'memcanal.conf'
    config.write_text(
        '[DEFAULT]\n'
        'transport_url = %s\n'
        'control_exchange = %s\n'
        'state_path = %s\n'
        'host = compute-test\n'
        '[database]\nconnection = sqlite:///%s\n'
        '[agent]\ndriver = simulated\nreport_interval = 0.5\n'
        'register_timeout = 2\n'
        '[simulated]\ninstances = %d\nreferences_per_interval = 2000\n'
        '[service]\nperiodic_interval = 1\n' % (
            rabbit_url, exchange, tmp_path, db_path, VMS))
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
def rabbit_client(cloud, conf):
    # The same file as the processes: same RabbitMQ, same exchange.
    conf(['--config-file', str(cloud['config'])], project='memcanal',
         default_config_files=[])
    rpc.init(conf)
    yield service_api.ServiceAPI()
    rpc.cleanup()


def test_redelivered_and_malformed_reports_over_rabbit(cloud, rabbit_client):
    cloud['start']('service')
    context = memcanal_context.get_admin_context()

    def register():
        # A call made before the service listens is lost: retry, as the
        # agent does.
        try:
            return rabbit_client.register_host(
                context, 'compute-direct', 2 ** 34, 0, 60.0, timeout=2)
        except messaging.MessagingTimeout:
            return None
    host = services.wait_for(register, what='the service to answer')
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
    again = register()
    assert again == {'uuid': host['uuid'],
                     'last_sequence': report['sequence']}
