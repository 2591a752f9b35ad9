"""Faults: the broker, the database, the service and the agent stopped in
the middle of a run lose no report and apply no action twice.

Each scenario runs the agent and the service as separate processes on a
RabbitMQ node and a MariaDB server of this module's own (other tests
share the machine's, which must not stop), started once for the module.
At the end it counts, in the database: every sequence the agent numbered
is stored exactly once; and, in the simulated hypervisor's own resize
log, every action resized its VM at most once.
"""

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid

from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import orm
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import migration
from memcanal.rpc import signing
from memcanal.tests.functional import services

BIN = os.path.dirname(sys.executable)
RABBITMQ_BIN = '/usr/lib/rabbitmq/bin'
"""RabbitMQ's own scripts: Debian's /usr/sbin wrappers would run the node
as the rabbitmq user, which cannot write this module's directories."""
SBIN_PATH = os.environ.get('PATH', '') + ':/usr/sbin:/usr/bin'
HOST = 'compute-faults'
MIB = 2 ** 20


def listening(port):
    try:
        socket.create_connection(('127.0.0.1', port), 1).close()
        return True
    except OSError:
        return False


class PrivateRabbit:
    """A RabbitMQ node of our own on free ports, its state in ``base``."""

    def __init__(self, base):
        if not os.path.exists(os.path.join(RABBITMQ_BIN, 'rabbitmq-server')):
            services.missing('rabbitmq-server is not installed '
                             '(tools/start-services.sh installs it)')
        self.port = services.free_port()
        self.node = 'memcanal-faults-%d@localhost' % os.getpid()
        self.log_path = os.path.join(base, 'rabbit.out')
        with open(os.path.join(base, 'enabled_plugins'), 'w') as f:
            f.write('[].\n')
        open(os.path.join(base, 'rabbitmq-env.conf'), 'w').close()
        self.env = dict(
            os.environ, HOME=base, RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(services.free_port()),
            RABBITMQ_MNESIA_BASE=os.path.join(base, 'mnesia'),
            RABBITMQ_LOG_BASE=os.path.join(base, 'log'),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(base,
                                                       'enabled_plugins'),
            RABBITMQ_CONFIG_FILE=os.path.join(base, 'rabbitmq'),
            RABBITMQ_CONF_ENV_FILE=os.path.join(base, 'rabbitmq-env.conf'),
            RABBITMQ_PID_FILE=os.path.join(base, 'rabbit.pid'))
        self.url = 'rabbit://guest:guest@127.0.0.1:%d/' % self.port
        self.process = None

    def start(self):
        self.launch()
        self.wait_listening()

    def launch(self):
        self.process = subprocess.Popen(
            [os.path.join(RABBITMQ_BIN, 'rabbitmq-server')], env=self.env,
            stdout=open(self.log_path, 'ab'), stderr=subprocess.STDOUT,
            start_new_session=True)

    def wait_listening(self):
        services.wait_for(
            lambda: listening(self.port) or self.process.poll(), 60,
            'RabbitMQ to listen')
        assert self.process.poll() is None, open(self.log_path).read()

    def stop(self):
        if self.process.poll() is None:
            subprocess.run([os.path.join(RABBITMQ_BIN, 'rabbitmqctl'), '-n',
                            self.node, 'shutdown'], env=self.env, check=True,
                           stdout=subprocess.DEVNULL, timeout=60)
        self.process.wait(60)


class PrivateMariaDB:
    """A MariaDB server of our own on a free port, its data in ``base``."""

    def __init__(self, base):
        self.mariadbd = shutil.which('mariadbd', path=SBIN_PATH)
        install = shutil.which('mariadb-install-db', path=SBIN_PATH)
        if self.mariadbd is None or install is None:
            services.missing('mariadb-server is not installed '
                             '(tools/start-services.sh installs it)')
        self.base = base
        self.port = services.free_port()
        self.user = ['--user=root'] if os.geteuid() == 0 else []
        self.log_path = os.path.join(base, 'mariadb.out')
        subprocess.run(
            [install, '--no-defaults', '--datadir=%s' % os.path.join(
                base, 'data'), '--auth-root-authentication-method=normal',
             '--skip-test-db'] + self.user, check=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=120)
        self.url = 'mysql+pymysql://root@127.0.0.1:%d/' % self.port
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            [self.mariadbd, '--no-defaults',
             '--datadir=%s' % os.path.join(self.base, 'data'),
             '--socket=%s' % os.path.join(self.base, 'mariadb.sock'),
             '--pid-file=%s' % os.path.join(self.base, 'mariadb.pid'),
             '--port=%d' % self.port, '--bind-address=127.0.0.1',
             '--skip-log-bin'] + self.user,
            stdout=open(self.log_path, 'ab'), stderr=subprocess.STDOUT,
            start_new_session=True)
        services.wait_for(
            lambda: listening(self.port) or self.process.poll(), 60,
            'MariaDB to listen')
        assert self.process.poll() is None, open(self.log_path).read()

    def stop(self):
        self.process.terminate()
        self.process.wait(60)


@pytest.fixture(scope='module')
def private_services(tmp_path_factory):
    """This module's RabbitMQ node and MariaDB server, started once.
    The node boots (10-15 s) while MariaDB's data directory is made and
    the server started."""
    rabbit = PrivateRabbit(str(tmp_path_factory.mktemp('rabbit')))
    rabbit.launch()
    try:
        mariadb = PrivateMariaDB(str(tmp_path_factory.mktemp('mariadb')))
        mariadb.start()
        try:
            rabbit.wait_listening()
            yield {'rabbit': rabbit, 'mariadb': mariadb}
        finally:
            mariadb.stop()
    finally:
        rabbit.stop()


class Cloud:
    """A service and an agent on a fresh database and exchange."""

    def __init__(self, services_, path, extra='', vms=2):
        self.services = services_
        self.vms = vms
        self.path = path
        self.name = 'memcanal_faults_%s' % uuid.uuid4().hex[:12]
        admin = sa.create_engine(services_['mariadb'].url,
                                 isolation_level='AUTOCOMMIT')
        with admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE %s' % self.name))
        admin.dispose()
        self.db_url = services_['mariadb'].url + self.name
        migration.upgrade(self.db_url)
        self.engine = sa.create_engine(self.db_url, pool_pre_ping=True)
        self.config = path / 'memcanal.conf'
        self.resize_log = path / 'resizes.log'
        # The service's key pair: agents apply only actions it signed.
        private, public = str(path / 'service.key'), str(path / 'service.pub')
        signing.create_key_pair(private, public)
        self.config.write_text(
            '[DEFAULT]\n'
            'transport_url = %s\n'
            'control_exchange = memcanal-faults-%s\n'
            'state_path = %s\n'
            'host = %s\n'
            '[oslo_messaging_rabbit]\n'
            # Reconnect within a second or two of the broker's return
            # (the default backs off to 30 s).
            'rabbit_retry_interval = 1\nrabbit_retry_backoff = 1\n'
            'rabbit_interval_max = 2\nkombu_reconnect_delay = 0.5\n'
            '[database]\nconnection = %s\n'
            '[agent]\ndriver = simulated\nreport_interval = 0.25\n'
            'register_timeout = 2\nreport_confirm_delay = 1\n'
            'service_public_key = %s\n'
            '[simulated]\ninstances = %d\nreferences_per_interval = 2000\n'
            'resize_log = %s\n'
            '[service]\nperiodic_interval = 1\nsigning_key = %s\n%s' % (
                services_['rabbit'].url, self.name, path, HOST,
                self.db_url, public, vms, self.resize_log, private, extra))
        self.processes = {}

    def start(self, name):
        self.processes[name] = subprocess.Popen(
            [os.path.join(BIN, 'memcanal-%s' % name), '--config-file',
             str(self.config)], start_new_session=True,
            stdout=open(self.path / ('%s.log' % name), 'ab'),
            stderr=subprocess.STDOUT)

    def kill(self, name):
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def close(self):
        for name in list(self.processes):
            self.kill(name)
        self.engine.dispose()
        admin = sa.create_engine(self.services['mariadb'].url,
                                 isolation_level='AUTOCOMMIT')
        with admin.connect() as connection:
            connection.execute(sa.text('DROP DATABASE IF EXISTS %s'
                                       % self.name))
        admin.dispose()

    # -- what happened -------------------------------------------------

    def stored(self):
        """Stored report sequences of the agent's host, with repeats."""
        with self.engine.connect() as connection:
            return [row[0] for row in connection.execute(sa.text(
                'SELECT r.sequence FROM host_reports r JOIN hosts h '
                'ON r.host_id = h.id WHERE h.name = :name'), {'name': HOST})]

    def numbered(self):
        """The last sequence the agent numbered (its sequence file)."""
        path = self.path / ('agent-%s.sequence' % HOST)
        return int(path.read_text()) if path.exists() else 0

    def outboxed(self):
        directory = self.path / ('agent-%s.outbox' % HOST)
        return {int(name.split('.')[0]) for name in os.listdir(directory)
                if name.endswith('.json')}

    def journal(self):
        directory = self.path / ('agent-%s.actions' % HOST)
        return [json.loads((directory / name).read_text())
                for name in os.listdir(directory) if name.endswith('.json')]

    def resizes(self):
        """(instance, target_bytes) of every resize the simulated
        hypervisor did, in order."""
        if not self.resize_log.exists():
            return []
        return [(done['instance'], done['target_bytes']) for done in map(
            json.loads, self.resize_log.read_text().splitlines())]

    def actions(self):
        """Every action: dicts of uuid, state, decision (its uuid and
        state), instance and target_bytes."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.text(
                'SELECT a.uuid, a.state, d.uuid, d.state, i.uuid, a.params '
                'FROM actions a JOIN decisions d ON a.decision_id = d.id '
                'JOIN instances i ON a.instance_id = i.id')).all()
        return [{'uuid': row[0], 'state': row[1], 'decision': row[2],
                 'decision_state': row[3], 'instance': row[4],
                 'target_bytes': json.loads(row[5])['target_bytes']}
                for row in rows]

    def log(self, name):
        return (self.path / ('%s.log' % name)).read_text()


@pytest.fixture
def cloud(private_services, tmp_path):
    # A scenario that failed with a service stopped leaves it stopped.
    for service in private_services.values():
        if service.process.poll() is not None:
            service.start()
    made = []

    def make(extra='', vms=2):
        made.append(Cloud(private_services, tmp_path, extra, vms))
        return made[-1]
    yield make
    for each in made:
        each.close()


def assert_all_stored_once(cloud, up_to, never_built=()):
    """Every sequence the agent numbered up to ``up_to`` is stored, once
    (``never_built``: numbers a killed agent took but never made a report
    of, so never sent)."""
    wanted = set(range(1, up_to + 1)) - set(never_built)
    services.wait_for(lambda: wanted <= set(cloud.stored()), 60,
                      'reports 1-%d to be stored' % up_to)
    # One query, so a report stored meanwhile is counted on both sides.
    with cloud.engine.connect() as connection:
        per_report = connection.execute(sa.text(
            'SELECT r.sequence, COUNT(i.id) FROM host_reports r '
            'JOIN hosts h ON r.host_id = h.id '
            'LEFT JOIN instance_reports i ON i.host_report_id = r.id '
            'WHERE h.name = :name GROUP BY r.id, r.sequence'),
            {'name': HOST}).all()
        rejected = connection.execute(sa.text(
            'SELECT code, detail FROM report_rejections')).all()
    counts = collections.Counter(sequence for sequence, _ in per_report)
    assert [s for s, n in counts.items() if n > 1] == []
    # Each stored whole; none sent again was refused.
    assert [s for s, vms in per_report if vms != cloud.vms] == []
    assert len(rejected) == 0, rejected


def run_until(cloud, count):
    """Start the service and the agent; wait for ``count`` reports."""
    cloud.start('service')
    cloud.start('agent')
    services.wait_for(lambda: len(cloud.stored()) >= count, 60,
                      '%d reports' % count)


def through_outage(run, stop, start, what, reports):
    """Run until 4 reports are stored, stop ``what`` while the agent
    numbers ``reports`` more, start it again: every report is stored,
    once."""
    run_until(run, 4)
    stop()
    before = run.numbered()
    services.wait_for(lambda: run.numbered() >= before + reports, 30,
                      'reports numbered while %s is down' % what)
    start()
    assert_all_stored_once(run, run.numbered())


def test_rabbitmq_restarted_mid_run(cloud, private_services):
    run = cloud()
    rabbit = private_services['rabbit']
    # Reports go on being numbered, and kept, while the broker is down.
    through_outage(run, rabbit.stop, rabbit.start, 'RabbitMQ', 2)
    assert 'it stays in the outbox' in run.log('agent')


def test_mariadb_restarted_mid_run(cloud, private_services):
    run = cloud()
    mariadb = private_services['mariadb']
    through_outage(run, mariadb.stop, mariadb.start, 'MariaDB', 3)
    # Reports that reached the service while its database was down were
    # lost there and sent again from the outbox.
    assert 'is not stored; sending it again' in run.log('agent')
    # The service lived through it.
    assert run.processes['service'].poll() is None


def test_service_killed_while_storing(cloud):
    run = cloud()
    through_outage(run, lambda: run.kill('service'),
                   lambda: run.start('service'), 'the service', 3)


def decide(run, targets_mb):
    """Record an approved decision giving the host's VMs (in uuid order)
    ``targets_mb``, as the optimizer does in auto mode; the service's
    dispatcher sends it to the agent."""
    engine = engines.create_engine(run.db_url)
    restore = db_api.context_manager.patch_factory(
        enginefacade._TestTransactionFactory(
            engine, orm.get_maker(engine=engine), apply_global=False))
    try:
        context = memcanal_context.get_admin_context()
        [host] = db_api.list_hosts(context)
        vms = db_api.list_instances(context, host_uuid=host['uuid'])
        return decisions_db.create_decision(
            context, host['uuid'], 'memory_targets', 'test', 'auto', {}, {},
            [{'instance_uuid': vm['uuid'], 'target_bytes': mb * MIB,
              'previous_bytes': vm['allocated_bytes'],
              'mechanism': 'hotplug'} for vm, mb in zip(vms, targets_mb)])
    finally:
        restore()
        engine.dispose()


def test_agent_killed_while_applying(cloud):
    """Killed after resizing a VM, before recording it: the decision is
    sent again, the agent answers from its journal and the VM's size,
    the decision ends applied, each VM resized once."""
    run = cloud('[simulated]\nresize_delay = 2\n'
                '[optimizer]\noptimize_interval = 0\n'
                'action_resend_interval = 2\naction_timeout = 120\n')
    run_until(run, 2)
    decision = decide(run, [960, 1088])
    # The driver has resized the first VM (the shrink goes first) and
    # waits out resize_delay before it returns to the agent: kill it.
    services.wait_for(run.resizes, 60, 'the first resize')
    run.kill('agent')
    [first] = run.resizes()
    [interrupted] = [entry for entry in run.journal()
                     if entry['result'] is None]
    assert (interrupted['action']['instance_uuid'],
            interrupted['action']['target_bytes']) == first
    numbered, outboxed = run.numbered(), run.outboxed()
    never_built = {numbered} - outboxed - set(run.stored())
    run.start('agent')
    services.wait_for(lambda: {a['decision_state'] for a in run.actions()} == {
        'applied'}, 60, 'the decision to be applied')
    actions = run.actions()
    assert {a['decision'] for a in actions} == {decision['uuid']}
    assert {a['state'] for a in actions} == {'applied'}
    # Each action resized its VM exactly once: the interrupted one was
    # not resized again.
    assert sorted(run.resizes()) == sorted(
        (a['instance'], a['target_bytes']) for a in actions)
    assert 'was being applied when the agent stopped' in run.log('agent')
    assert_all_stored_once(run, run.numbered(), never_built)
