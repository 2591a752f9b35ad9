"""Migration 0007 moves every stored estimate and curve into its report's
row, on SQLite, MariaDB and PostgreSQL: nothing stored before is lost."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration
from memcanal.tests.functional import old_schema

T0 = datetime.datetime(2026, 11, 20)


def test_estimates_and_curves_move_into_their_reports(any_db_url):
    with old_schema.engine_at(any_db_url, '0006') as engine:
        with engine.begin() as connection:
            old_schema.insert(connection, 'hosts', [
                {'id': 1, 'uuid': 'h', 'name': 'h', 'created_at': T0,
                 'memory_total_bytes': 1, 'memory_reserved_bytes': 0,
                 'last_sequence': 1}])
            old_schema.insert(connection, 'instances', [
                {'id': n, 'uuid': 'i%d' % n, 'host_id': 1, 'project_id': 'p',
                 'allocated_bytes': 1, 'opt_out': False, 'created_at': T0}
                for n in range(1, 6)])
            old_schema.insert(connection, 'host_reports', [
                {'id': 1, 'host_id': 1, 'sequence': 1, 'collected_at': T0,
                 'received_at': T0}])
            old_schema.insert(connection, 'instance_reports', [
                {'id': n, 'host_report_id': 1, 'instance_id': n,
                 'sequence': 1, 'collected_at': T0, 'allocated_bytes': 1,
                 'guest_stats': '{}'} for n in range(1, 6)])
            # Report 5 has neither: it keeps NULLs.
            old_schema.insert(connection, 'wss_estimates', [
                {'instance_report_id': n, 'estimator': name,
                 'wss_bytes': n * 1000 + index}
                for n in range(1, 5)
                for index, name in enumerate(('prl', 'pml'))])
            old_schema.insert(connection, 'mrc_curves', [
                {'instance_report_id': n, 'method': 'exact',
                 'points': '[[4096, 0.5], [%d, 0.25]]' % (8192 * n)}
                for n in (1, 3, 4)])
        migration.upgrade(any_db_url, '0007')
        reports = sa.table('instance_reports', sa.column('id'),
                           sa.column('wss', sa.JSON),
                           sa.column('mrc', sa.JSON))
        with engine.connect() as connection:
            rows = connection.execute(
                sa.select(reports).order_by(reports.c.id)).all()
            tables = sa.inspect(connection).get_table_names()
    assert [tuple(row) for row in rows] == [
        (1, {'prl': 1000, 'pml': 1001},
         {'exact': [[4096, 0.5], [8192, 0.25]]}),
        (2, {'prl': 2000, 'pml': 2001}, None),
        (3, {'prl': 3000, 'pml': 3001},
         {'exact': [[4096, 0.5], [24576, 0.25]]}),
        (4, {'prl': 4000, 'pml': 4001},
         {'exact': [[4096, 0.5], [32768, 0.25]]}),
        (5, None, None)]
    assert 'wss_estimates' not in tables and 'mrc_curves' not in tables
