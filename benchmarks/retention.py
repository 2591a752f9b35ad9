"""Database size per VM per day, before and after retention.

Fills a database with ``--hours`` (24) of reports every ``--interval``
(60 s) from ``--vms`` (8) VMs on one host, shaped as the agent builds
them: a simulated-driver agent runs ``--distinct`` (60) intervals and its
reports are replayed in turn with new sequences and times, validated and
stored through memcanal.db.api.store_report with the clock at each
report's time. Every ``--optimize-interval`` (300 s) the service's
optimizer runs (recommend mode, ``--policy``) and records a decision
with every VM's curve, as the service does; the simulated VMs being at
ease, it is made to shrink one VM a little each run, so every run makes
a decision superseding the last: the most decisions there can be.
``--curve-points N`` stretches every curve to N points (256 is the most
``[service] max_mrc_points`` lets through): the simulated VMs' curves
are short beside a real guest's.

It prints the size of every table, with the reports and decisions per
VM per day; then folds the reports as [retention] does once they are
``full_reports_days`` old, prints the history's size per VM per day, the
steady state per VM under the [retention] defaults, and how fast
folding went against storing in the same run. Sizes are SQLite's pages
after VACUUM (dbstat), MariaDB's data and index length after OPTIMIZE
TABLE, PostgreSQL's pg_total_relation_size after VACUUM FULL.

    python benchmarks/retention.py [--vms 8] [--hours 24] [--curve-points N]
        [--db-url mysql+pymysql://root@127.0.0.1/ |
                  postgresql+psycopg2://postgres@127.0.0.1/postgres]

A server --db-url gets a scratch database, dropped at the end; without
one, a SQLite file in a temporary directory.
"""

import argparse
import copy
import datetime
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from unittest import mock
import uuid

import numpy as np
from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.agent import driver
from memcanal.agent import manager as agent_manager
from memcanal.cmd import common
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import migration
from memcanal.db import retention
from memcanal.rpc import reports as rpc_reports
from memcanal.service import optimizer

CONF = common.CONF
MB = 1e6
GROUPS = {
    'reports': ('host_reports', 'instance_reports'),
    'decisions': ('decisions', 'actions', 'decision_events'),
    'history': ('instance_report_history',),
}
START = datetime.datetime(2026, 11, 1)


def stretched(points, count):
    """The curve ``points`` as ``count`` points, evenly spaced in size."""
    sizes = np.array([size for size, _ in points], dtype=float)
    ratios = np.array([ratio for _, ratio in points])
    new_sizes = np.unique(np.linspace(sizes.min(), sizes.max(), count)
                          .astype(np.int64) // 4096 * 4096)
    return [[int(size), float(ratio)] for size, ratio in zip(
        new_sizes, np.interp(new_sizes, sizes, ratios))]


def agent_reports(vms, distinct, curve_points, host_uuid, state_dir):
    """``distinct`` successive reports of a simulated agent's ``vms``."""
    CONF.set_override('instances', vms, 'simulated')
    # As memcanal-aio: the third VM's files are twice its memory, so the
    # policies have something to decide.
    CONF.set_override('file_server_memory_ratio', 2.0, 'simulated')
    CONF.set_override('state_path', state_dir)
    agent = agent_manager.AgentManager(
        CONF, 'bench-host', driver.load('simulated', CONF, 'bench-host'))
    agent.host_uuid = host_uuid
    built = [agent.build_report() for _ in range(distinct)]
    if curve_points:
        for report in built:
            for instance in report['instances']:
                instance['mrc'] = {
                    method: stretched(points, curve_points)
                    for method, points in instance['mrc'].items()}
    return built


class Database:
    """A scratch database at ``url`` (a server) or a SQLite file."""

    def __init__(self, url, state_dir):
        self.server = url
        if url is None:
            self.path = os.path.join(state_dir, 'bench.sqlite')
            self.url = 'sqlite:///%s' % self.path
            return
        self.name = 'memcanal_bench_%s' % uuid.uuid4().hex[:8]
        self.admin = sa.create_engine(url, isolation_level='AUTOCOMMIT')
        with self.admin.connect() as connection:
            connection.exec_driver_sql('CREATE DATABASE %s' % self.name)
        self.url = sa.engine.make_url(url).set(
            database=self.name).render_as_string(hide_password=False)
        self.engine = sa.create_engine(self.url,
                                       isolation_level='AUTOCOMMIT')

    def sizes(self):
        """Bytes by table, compacted first."""
        if self.server is None:
            connection = sqlite3.connect(self.path)
            connection.execute('VACUUM')
            sizes = dict(connection.execute(
                'SELECT s.tbl_name, sum(d.pgsize) FROM dbstat d '
                'JOIN sqlite_schema s ON d.name = s.name '
                'GROUP BY s.tbl_name'))
            connection.close()
            return sizes
        with self.engine.connect() as connection:
            if self.engine.dialect.name == 'mysql':
                tables = connection.exec_driver_sql(
                    'SHOW TABLES').scalars().all()
                for table in tables:
                    connection.exec_driver_sql('OPTIMIZE TABLE %s' % table)
                return dict(connection.exec_driver_sql(
                    'SELECT table_name, data_length + index_length FROM '
                    'information_schema.tables '
                    'WHERE table_schema = DATABASE()').all())
            connection.exec_driver_sql('VACUUM FULL')
            return dict(connection.exec_driver_sql(
                'SELECT relname, pg_total_relation_size(relid) '
                'FROM pg_stat_user_tables').all())

    def drop(self):
        if self.server is None:
            return
        self.engine.dispose()
        with self.admin.connect() as connection:
            connection.exec_driver_sql('DROP DATABASE %s' % self.name)
        self.admin.dispose()


class RestlessOptimizer(optimizer.Optimizer):
    """The service's optimizer, but the policy's answer takes 32 MiB from
    one VM after the other: every run decides."""

    runs = 0

    def _allocate(self, policy, participants, free_bytes):
        allocation = super()._allocate(policy, participants, free_bytes)
        names = sorted(allocation.targets)
        name = names[self.runs % len(names)]
        allocation.targets[name] -= 32 * 2 ** 20
        self.runs += 1
        return allocation


def fill(context, host_uuid, built, count, interval, optimize_interval):
    """Store ``count`` reports; run the optimizer every
    ``optimize_interval`` seconds of them. Returns the seconds spent
    storing."""
    service_optimizer = RestlessOptimizer(CONF)
    storing = 0.0
    next_optimize = optimize_interval
    with mock.patch.object(timeutils, 'utcnow') as utcnow:
        for number in range(count):
            moment = START + datetime.timedelta(seconds=number * interval)
            utcnow.return_value = moment
            report = copy.deepcopy(built[number % len(built)])
            report['sequence'] = number + 1
            report['collected_at'] = moment.isoformat() + 'Z'
            started = time.perf_counter()
            db_api.store_report(context, rpc_reports.validate_report(
                report, max_mrc_points=256, max_instances=1024))
            storing += time.perf_counter() - started
            if (number + 1) * interval >= next_optimize:
                service_optimizer.run(context)
                next_optimize += optimize_interval
    return storing


def used(sizes, empty):
    return {table: size - empty.get(table, 0)
            for table, size in sizes.items()}


def group_bytes(sizes, group):
    return sum(sizes.get(table, 0) for table in GROUPS[group])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--vms', type=int, default=8)
    parser.add_argument('--hours', type=float, default=24.0)
    parser.add_argument('--interval', type=int, default=60)
    parser.add_argument('--distinct', type=int, default=60)
    parser.add_argument('--curve-points', type=int, default=0)
    parser.add_argument('--optimize-interval', type=int, default=300)
    parser.add_argument('--policy', default='isolated_sharing',
                        choices=('isolated_sharing', 'esx', 'utube'))
    parser.add_argument('--db-url', default=None)
    args = parser.parse_args()

    state_dir = tempfile.mkdtemp(prefix='memcanal-bench-')
    database = Database(args.db_url, state_dir)
    try:
        return run(args, database, state_dir)
    finally:
        # memcanal's own connections first: PostgreSQL drops no database
        # in use.
        db_api.context_manager.dispose_pool()
        database.drop()
        shutil.rmtree(state_dir)


def run(args, database, state_dir):
    common.parse_args([sys.argv[0]], default_config_files=[])
    # One line per decision would drown the results.
    logging.getLogger('memcanal').setLevel(logging.WARNING)
    CONF.set_override('connection', database.url, 'database')
    CONF.set_override('policy', args.policy, 'optimizer')
    migration.upgrade(database.url)
    # What the empty schema takes (a page or so a table and index) is
    # left out of every size.
    empty = database.sizes()
    context = memcanal_context.get_admin_context()
    host_uuid = db_api.register_host(context, 'bench-host', 2 ** 40, 0,
                                     report_interval=args.interval)['uuid']
    built = agent_reports(args.vms, args.distinct, args.curve_points,
                          host_uuid, state_dir)
    count = int(args.hours * 3600 / args.interval)
    days = count * args.interval / 86400
    points = [len(points) for report in built
              for instance in report['instances']
              for points in instance['mrc'].values()]
    print('%d reports of %d VMs every %d s (%.2f days; curves of %d to %d '
          'points, mean %.0f), optimizer every %d s, on %s' % (
              count, args.vms, args.interval, days, min(points),
              max(points), np.mean(points), args.optimize_interval,
              database.url.split(':')[0]), flush=True)
    storing = fill(context, host_uuid, built, count, args.interval,
                   args.optimize_interval)
    before = used(database.sizes(), empty)

    # Every report stored, as retention folds them full_reports_days on.
    options = CONF.retention
    started = time.perf_counter()
    folded = retention.fold_reports(
        context, START + datetime.timedelta(days=days, seconds=args.interval),
        options.history_interval, options.batch_size)
    folding = time.perf_counter() - started
    after = used(database.sizes(), empty)

    print('\n%-26s %12s %12s' % ('table', 'before, MB', 'after, MB'))
    for table in sorted(table for table in set(before) | set(after)
                        if before.get(table) or after.get(table)):
        print('%-26s %12.3f %12.3f' % (table, before.get(table, 0) / MB,
                                       after.get(table, 0) / MB))
    print('%-26s %12.3f %12.3f' % ('total', sum(before.values()) / MB,
                                   sum(after.values()) / MB))

    def per_vm_day(sizes, group):
        return group_bytes(sizes, group) / args.vms / days / MB

    reports_day = per_vm_day(before, 'reports')
    decisions_day = per_vm_day(before, 'decisions')
    history_day = per_vm_day(after, 'history')
    print('\nper VM per day, before retention (kept forever):')
    print('  reports   %8.3f MB' % reports_day)
    print('  decisions %8.3f MB  (%d decisions)' % (
        decisions_day, db_count(context, 'decisions')))
    print('after folding %d instance reports into %d history rows '
          '(one per VM and %d s):' % (
              folded.get('instance_reports', 0),
              folded.get('history_created', 0), options.history_interval))
    print('  history   %8.3f MB  (%.1f%% of the reports)' % (
        history_day, 100 * history_day / reports_day))
    # History covers what is older than the full reports, until it is
    # history_days old. Every decision here but the last is superseded,
    # so archived after superseded_decisions_days; archived rows leave
    # the disk once purged.
    history_span = max(0, options.history_days - options.full_reports_days)
    decisions_span = (options.superseded_decisions_days
                      or options.decisions_days)
    steady = (options.full_reports_days * reports_day
              + history_span * history_day
              + decisions_span * decisions_day)
    print('\nsteady state per VM with the [retention] defaults: %d d x '
          'reports + %d d x history + %d d x decisions = %.1f MB '
          '(without retention: %.1f MB after a year, and growing)' % (
              options.full_reports_days, history_span, decisions_span,
              steady, 365 * (reports_day + decisions_day)))
    rate_store = count * args.vms / storing
    rate_fold = folded.get('instance_reports', 0) / folding
    print('\nstoring: %.0f instance reports/s; folding: %.0f instance '
          'reports/s (ratio fold / store %.2f)' % (
              rate_store, rate_fold, rate_fold / rate_store))
    return 0


def db_count(context, table):
    with db_api.context_manager.reader.using(context):
        return context.session.execute(sa.text(
            'SELECT count(*) FROM %s' % table)).scalar_one()


if __name__ == '__main__':
    sys.exit(main())
