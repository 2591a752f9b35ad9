"""Reports stored per second by 1, 2 and 4 service processes, per
database, and the hosts they hold at a report interval.

    .venv/bin/python benchmarks/ingest.py [--reports 2000] [--hosts 16]
        [--vms 8] [--processes 1 2 4] [--databases sqlite,mysql,postgresql]
        [--report-interval 60] [--backend-url redis://127.0.0.1:6379]
        [--transport-url rabbit://guest:guest@127.0.0.1:5672/]
        [--mysql-url mysql+pymysql://root@127.0.0.1:3306/]
        [--postgresql-url postgresql+psycopg2://postgres@127.0.0.1/postgres]
        [--redeliver] [--reduced]

This process plays the agents: it casts ``--reports`` reports of
``--hosts`` hosts (``--vms`` VMs each, with an exact miss-ratio curve, as
the real agent builds and packs them, each signed by its host's own key:
RPC 1.5), the hosts' reports
interleaved, as fast as one oslo.messaging client casts them over
RabbitMQ. On the other side, N processes (``--processes``) consume the
topic, each with its own RPC server, as N ``memcanal-service`` processes
would:

- raw: an endpoint that only counts the reports: what messaging delivers;
- memcanal, per database (a fresh SQLite file; a scratch database created
  on MariaDB and PostgreSQL from the admin URLs, dropped afterwards):
  memcanal's ServiceManager, validating and storing each report, with its
  periodic jobs running.

Each rate is reports over the time from the first cast to the last one
counted or stored; "stored" is counted in the database's rows
(host_reports of the benchmark's hosts), not taken from anybody's word.
Prints a table of both rates and their ratio per database and process
count, the CPU time the consuming processes took per report (raw and
memcanal: what one process holds does not depend on how busy the machine
is), and the services' own counters; then, at ``--report-interval``
(an agent's report every 60 s by default), the hosts of ``--vms`` VMs
the processes held: all of them together (the rate stored times the
interval, on this machine as loaded), per process, and per core a
process would have to itself (the interval over a process's CPU per
report). ``--backend-url`` gives the service processes a tooz backend
([coordination] backend_url), as several would run: the periodic jobs
led by one, the per-host ones split over them. Exits 1 if a database is missing
rows, holds one twice, or a service counted a report failed or rejected.

Everything shares the machine: this process casting takes about a core,
RabbitMQ and the database servers take their share, so the rates say what
this machine holds and the CPU per report what one service process costs.

``--redeliver`` casts every report twice, so that service processes race
each other to store the same (host, sequence); the duplicates must all be
recognised. ``--reduced`` (200 reports, 1 and 2 processes) is for CI.

The service processes are multiprocessing children (spawned: no connection
crosses a fork) serving a private topic on a private exchange, so no other
memcanal on the same RabbitMQ takes the benchmark's casts; their logs and
the SQLite files go to a temporary directory removed at the end.
"""

import argparse
import contextlib
import copy
import multiprocessing
import os
import sys
import tempfile
import time
import uuid

# memcanal first: importing it selects oslo.service's threading backend,
# before oslo.messaging would ask for one (memcanal/threading_backend.py).
import memcanal  # noqa: F401  (isort: skip)
from cryptography.hazmat.primitives.asymmetric import ed25519
import oslo_messaging as messaging
import sqlalchemy as sa

from memcanal.agent import driver
from memcanal.agent import manager as agent_manager
from memcanal.cmd import common
from memcanal import context as memcanal_context
from memcanal.db import migration
from memcanal.db import models
from memcanal.estimation import packed_curve
from memcanal import rpc
from memcanal.rpc import service as rpc_service
from memcanal.rpc import service_api
from memcanal.service import ingest
from memcanal.service import manager as service_manager

CONF = common.CONF
# Seconds without a new row (or count) before a run is given up.
STALL_SECONDS = 30
REDELIVERY_SETTLE_SECONDS = 3
CONFIG = """[DEFAULT]
transport_url = {transport_url}
control_exchange = {exchange}
log_file = {log_file}
[database]
connection = {db_url}
[coordination]
{backend}
"""


class CountingEndpoint:
    """The baseline: receive each report and count it, nothing else."""

    # The version the agent casts reports at: its curves packed.
    target = service_manager.ServiceManager.target

    def __init__(self, counter):
        self.counter = counter

    @messaging.expose
    def report(self, context, report, host, signature, sent_at=None,
               nonce=None):
        # sent_at and nonce: what makes the message fresh (service RPC
        # 1.10); the baseline reads none of it.
        with self.counter.get_lock():
            self.counter.value += 1


def serve(kind, config_file, topic, server, counter, ready, stop, results):

    """A child process: serve ``topic`` until ``stop``; put the service's
    counters and the CPU time it took on ``results``.

    Both kinds run as memcanal-service does (memcanal.cmd.service), with
    its garbage-collector settings, so the baseline is a consumer the same
    process settings serve, doing nothing with what it receives.
    """
    ingest.collect_less()
    common.parse_args([sys.argv[0], '--config-file', config_file],
                      default_config_files=[])
    # Each process is its own member of the coordination group.
    CONF.set_override('host', server)
    if kind == 'raw':
        endpoint, timers = CountingEndpoint(counter), ()
    else:
        endpoint = service_manager.ServiceManager(CONF)
        timers = endpoint.timers()
    service = rpc_service.RPCService(
        topic, server, [endpoint], timers=timers, conf=CONF,
        lifecycle=[endpoint.leases] if kind != 'raw' else ())
    service.start()
    started = time.process_time()
    ready.set()
    stop.wait()
    service.stop()
    results.put(dict(getattr(endpoint, 'counters', {}),
                     cpu=time.process_time() - started))
    rpc.cleanup()


@contextlib.contextmanager
def services(kind, count, config_file, topic, counter=None):
    """``count`` child processes serving ``topic``; yields their servers'
    names and, once they stopped, their counters in a list."""
    spawn = multiprocessing.get_context('spawn')
    stop, results = spawn.Event(), spawn.Queue()
    servers = ['%s-%d' % (topic, i) for i in range(count)]
    readies = [spawn.Event() for _ in servers]
    children = [spawn.Process(target=serve, args=(
        kind, config_file, topic, server, counter, ready, stop, results))
        for server, ready in zip(servers, readies)]
    counters = []
    try:
        for child in children:
            child.start()
        for ready, child in zip(readies, children):
            while not ready.wait(0.2):
                if not child.is_alive():
                    raise RuntimeError('a %s service died at start; see '
                                       'its log' % kind)
        # Let every consumer subscribe before the first cast.
        time.sleep(0.5)
        yield servers, counters
    finally:
        stop.set()
        for child in children:
            if child.is_alive() or child.exitcode == 0:
                try:
                    counters.append(results.get(timeout=30))
                except Exception:  # a child that died; reported below
                    pass
        for child in children:
            if child.pid is None:  # never started
                continue
            child.join(30)
            if child.is_alive():
                child.kill()
                child.join()


def agent_reports(vms, state_dir):
    """A function of (host index, host uuid, sequence): a report as the
    real agent builds them, of ``vms`` VMs, the host's own."""
    CONF.set_override('instances', vms, 'simulated')
    CONF.set_override('references_per_interval', 20000, 'simulated')
    CONF.set_override('mrc_methods', ['exact'], 'estimation')
    CONF.set_override('state_path', state_dir)
    agent = agent_manager.AgentManager(
        CONF, 'bench-host', driver.load('simulated', CONF, 'bench-host'))
    agent.host_uuid = str(uuid.UUID(int=0))
    template = agent.build_report()

    def report(host_index, host_uuid, sequence):
        built = copy.deepcopy(template)
        built.update(host_uuid=host_uuid, sequence=sequence)
        for vm, sample in enumerate(built['instances']):
            sample['uuid'] = str(uuid.UUID(int=(host_index + 1) << 32 | vm))
        return built
    return report


def agent_client(topic, name):
    """The ServiceAPI of the agent of host ``name``, with a key of its
    own, on ``topic``."""
    client = service_api.ServiceAPI(name,
                                    ed25519.Ed25519PrivateKey.generate())
    client.client = client.client.prepare(topic=topic)
    return client


def cast_all(reports, copies, clients):
    """Cast ``reports``, each by its host's client (``clients``, by host
    uuid)."""
    context = memcanal_context.get_admin_context()
    for report in reports:
        for _ in range(copies):
            clients[report['host_uuid']].report(context, report)


def wait_for(count, expected):
    """Wait until ``count()`` reaches ``expected`` or stops moving; the
    last count."""
    last, moved = -1, time.monotonic()
    while True:
        now = count()
        if now >= expected:
            return now
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > STALL_SECONDS:
            return now
        time.sleep(0.02)


def register_hosts(topic, servers, names):
    """Register the hosts through the services, as agents do (each server
    answers some: all of them are listening); their clients, by the uuid
    each was registered as."""
    context = memcanal_context.get_admin_context()
    clients = {}
    for index, name in enumerate(names):
        client = agent_client(topic, name)
        casting = client.client
        client.client = casting.prepare(server=servers[index % len(servers)])
        host = client.register_host(context, 2 ** 36, 0, 60.0, timeout=60)
        client.client = casting
        clients[host['uuid']] = client
    return clients


@contextlib.contextmanager
def database(kind, args, state_dir):
    """A fresh database of ``kind`` at head; yields its URL."""
    if kind == 'sqlite':
        yield 'sqlite:///%s' % os.path.join(
            state_dir, 'bench-%s.sqlite' % uuid.uuid4().hex[:8])
        return
    admin_url = args.mysql_url if kind == 'mysql' else args.postgresql_url
    quote = '`%s`' if kind == 'mysql' else '"%s"'
    name = 'memcanal_bench_%s' % uuid.uuid4().hex[:12]
    admin = sa.create_engine(admin_url, isolation_level='AUTOCOMMIT')
    try:
        with admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE ' + quote % name))
        try:
            yield sa.engine.make_url(admin_url).set(
                database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(sa.text(
                    'DROP DATABASE IF EXISTS ' + quote % name))
    finally:
        admin.dispose()


def stored_counter(db_url, host_uuids):
    """count(): rows of host_reports of these hosts; and a check that no
    (host, sequence) is there twice."""
    engine = sa.create_engine(db_url)
    host_reports, hosts = (models.HostReport.__table__,
                           models.Host.__table__)
    mine = sa.select(hosts.c.id).where(hosts.c.uuid.in_(host_uuids))

    def count():
        with engine.connect() as connection:
            return connection.execute(
                sa.select(sa.func.count()).select_from(host_reports)
                .where(host_reports.c.host_id.in_(mine))).scalar_one()

    def distinct():
        with engine.connect() as connection:
            return connection.execute(sa.select(sa.func.count()).select_from(
                sa.select(host_reports.c.host_id, host_reports.c.sequence)
                .where(host_reports.c.host_id.in_(mine)).distinct()
                .subquery())).scalar_one()
    return count, distinct, engine


class Bench:
    def __init__(self, args, state_dir):
        self.args = args
        self.state_dir = state_dir
        self.exchange = 'memcanal-bench-%s' % uuid.uuid4().hex[:8]
        self.build = agent_reports(args.vms, state_dir)
        self.runs = 0

    def config(self, db_url):
        self.runs += 1
        path = os.path.join(self.state_dir, 'run-%d.conf' % self.runs)
        with open(path, 'w') as config:
            config.write(CONFIG.format(
                transport_url=self.args.transport_url,
                exchange=self.exchange, db_url=db_url,
                log_file=os.path.join(self.state_dir,
                                      'run-%d.log' % self.runs),
                backend=self.backend()))
        return path, 'memcanal-bench-%d' % self.runs

    def backend(self):
        """[coordination] backend_url, a namespace of its own per run on
        Redis; none without --backend-url."""
        url = self.args.backend_url
        if not url:
            return ''
        if url.startswith('redis'):
            url += '%snamespace=memcanal-bench-%d-%s' % (
                '&' if '?' in url else '?', self.runs, self.exchange)
        return 'backend_url = %s' % url

    def reports(self, host_uuids):
        per_host = self.args.reports // len(host_uuids)
        return [self.build(index, host_uuid, sequence)
                for sequence in range(1, per_host + 1)
                for index, host_uuid in enumerate(host_uuids)]

    def raw(self, processes):
        config, topic = self.config('sqlite://')
        clients = {str(uuid.uuid4()): agent_client(topic, 'host-%d' % i)
                   for i in range(self.args.hosts)}
        reports = self.reports(list(clients))
        expected = len(reports) * self.copies
        counter = multiprocessing.get_context('spawn').Value('i', 0)
        with services('raw', processes, config, topic,
                      counter) as (_servers, counters):
            started = time.perf_counter()
            cast_all(reports, self.copies, clients)
            received = wait_for(lambda: counter.value, expected)
            elapsed = time.perf_counter() - started
        cpu = sum(c['cpu'] for c in counters) / max(received, 1)
        return received / elapsed, received == expected, cpu

    def memcanal(self, kind, processes):
        """(reports stored per second, problems, the services' counters
        and their CPU seconds per report); with --redeliver, reports
        stored or recognised as duplicates per second."""
        with database(kind, self.args, self.state_dir) as db_url:
            migration.upgrade(db_url)
            config, topic = self.config(db_url)
            with services('memcanal', processes, config,
                          topic) as (servers, counters):
                clients = register_hosts(
                    topic, servers, ['%s-host-%d' % (topic, i)
                                     for i in range(self.args.hosts)])
                reports = self.reports(list(clients))
                count, distinct, engine = stored_counter(db_url,
                                                         list(clients))
                try:
                    started = time.perf_counter()
                    cast_all(reports, self.copies, clients)
                    stored = wait_for(count, len(reports))
                    elapsed = time.perf_counter() - started
                    unique = distinct()
                    if self.copies > 1:
                        # The last reports' second copies may still be
                        # on their way once every row is stored: they
                        # are counted only if a service gets them before
                        # it stops (CI: 9 of 192 not counted).
                        time.sleep(REDELIVERY_SETTLE_SECONDS)
                finally:
                    engine.dispose()
            totals = {key: sum(c.get(key, 0) for c in counters)
                      for key in ('stored', 'duplicate', 'rejected',
                                  'refused', 'failed', 'cpu')}
            totals['cpu'] /= max(stored * self.copies, 1)
            problems = []
            if stored != len(reports) or unique != stored:
                problems.append('%d rows for %d reports (%d distinct)' % (
                    stored, len(reports), unique))
            if len(counters) != processes:
                problems.append('%d of %d services reported' % (
                    len(counters), processes))
            elif (totals['stored'] != stored or totals['failed']
                  or totals['rejected'] or totals['refused']
                  or totals['duplicate']
                  != len(reports) * (self.copies - 1)):
                problems.append('counters disagree with the rows')
            return stored * self.copies / elapsed, problems, totals

    @property
    def copies(self):
        return 2 if self.args.redeliver else 1


def print_held(held, args):
    """Hosts of --vms VMs held at --report-interval: (database, process
    count, reports stored per second, CPU seconds per report of all the
    processes)."""
    print('\nHosts of %d VMs held at a report every %g s' % (
        args.vms, args.report_interval))
    print('%-11s %5s %12s %12s %16s' % (
        'database', 'procs', 'hosts (all)', 'per process',
        'per process-core'))
    for kind, count, rate, cpu in held:
        print('%-11s %5d %12d %12d %16d' % (
            kind, count, rate * args.report_interval,
            rate * args.report_interval / count,
            args.report_interval / cpu if cpu else 0), flush=True)


def print_log_problems(state_dir):
    """The services' warnings and errors, before their logs go."""
    for name in sorted(os.listdir(state_dir)):
        if name.endswith('.log'):
            with open(os.path.join(state_dir, name)) as log:
                for line in log:
                    if ' ERROR ' in line or ' WARNING ' in line:
                        print('%s: %s' % (name, line.rstrip()),
                              file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reports', type=int)
    parser.add_argument('--hosts', type=int, default=16)
    parser.add_argument('--vms', type=int, default=8)
    parser.add_argument('--processes', nargs='+',
                        help='process counts, e.g. 1 2 3 (or 1,2,3)')
    parser.add_argument('--report-interval', type=float, default=60.0)
    parser.add_argument('--backend-url')
    parser.add_argument('--databases', default='sqlite,mysql,postgresql')
    parser.add_argument('--transport-url',
                        default='rabbit://guest:guest@127.0.0.1:5672/')
    parser.add_argument('--mysql-url',
                        default='mysql+pymysql://root@127.0.0.1:3306/')
    parser.add_argument(
        '--postgresql-url',
        default='postgresql+psycopg2://postgres@127.0.0.1/postgres')
    parser.add_argument('--redeliver', action='store_true')
    parser.add_argument('--reduced', action='store_true')
    args = parser.parse_args()
    args.reports = args.reports or (200 if args.reduced else 2000)
    args.processes = args.processes or (['1,2'] if args.reduced
                                        else ['1,2,4'])
    processes = [int(p) for group in args.processes
                 for p in group.split(',')]
    databases = args.databases.split(',')

    with tempfile.TemporaryDirectory(prefix='memcanal-bench-') as state_dir:
        common.parse_args([sys.argv[0]], default_config_files=[])
        bench = Bench(args, state_dir)
        messaging.set_transport_defaults(control_exchange=bench.exchange)
        rpc.init(CONF, url=args.transport_url)
        sample = bench.build(0, str(uuid.uuid4()), 1)
        per_host = args.reports // args.hosts
        print('%d reports (%d hosts x %d) of %d VMs each, MRC of %d points'
              '%s, over %s; %d cores for everything (this process, '
              'RabbitMQ, the databases, the services)' % (
                  per_host * args.hosts, args.hosts, per_host, args.vms,
                  len(packed_curve.unpack(
                      sample['instances'][0]['mrc']['exact'])),
                  ', each cast twice (rates count both)'
                  if args.redeliver else '',
                  args.transport_url.split('@')[-1], os.cpu_count()),
              flush=True)
        print('CPU: milliseconds per report of all the consuming processes '
              'together', flush=True)
        print('%-11s %5s %10s %9s %6s %8s %8s  %s' % (
            'database', 'procs', 'raw msgs/s', 'stored/s', 'ratio',
            'raw CPU', 'CPU', 'service counters'), flush=True)
        failed = False
        held = []
        try:
            for count in processes:
                raw_rate, complete, raw_cpu = bench.raw(count)
                if not complete:
                    failed = True
                    print('raw run with %d processes lost messages' % count)
                for kind in databases:
                    rate, problems, totals = bench.memcanal(kind, count)
                    failed = failed or bool(problems)
                    cpu = totals.pop('cpu')
                    print('%-11s %5d %10.1f %9.1f %6.2f %8.2f %8.2f  %s%s'
                          % (kind, count, raw_rate, rate, rate / raw_rate,
                             raw_cpu * 1e3, cpu * 1e3,
                             ' '.join('%s=%d' % item
                                      for item in totals.items()),
                             ''.join('  FAILED: %s' % p for p in problems)),
                          flush=True)
                    held.append((kind, count, rate / bench.copies, cpu))
            print_held(held, args)
        except BaseException:
            failed = True
            raise
        finally:
            rpc.cleanup()
            if failed:
                print_log_problems(state_dir)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
