"""Migration 0011 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): reports and instances from before it have
no intervals, and their working sets are read as exact."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration

T0 = datetime.datetime(2026, 12, 1)


def test_reports_and_instances_from_before_have_no_intervals(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0010')
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO hosts (id, uuid, name, created_at, "
                "memory_total_bytes, memory_reserved_bytes, last_sequence) "
                "VALUES (1, 'h1', 'h1', :t0, 1, 0, 1)"), {'t0': T0})
            connection.execute(sa.text(
                "INSERT INTO instances (id, uuid, host_id, project_id, "
                "allocated_bytes, opt_out, created_at, wss_bytes) "
                "VALUES (1, 'i1', 1, 'p', 4096, 0, :t0, 2048)"), {'t0': T0})
        migration.upgrade(url, '0011')
        assert migration.current_revision(url) == '0011'
        with engine.connect() as connection:
            instance = connection.execute(sa.text(
                'SELECT wss_bytes, wss_low_bytes, wss_high_bytes '
                'FROM instances')).one()
            report_columns = {column['name'] for column in sa.inspect(
                connection).get_columns('instance_reports')}
            shadow_columns = {column['name'] for column in sa.inspect(
                connection).get_columns('shadow_instances')}
    finally:
        engine.dispose()
    assert tuple(instance) == (2048, None, None)
    assert {'wss_bounds', 'mrc_bands'} <= report_columns
    assert {'wss_low_bytes', 'wss_high_bytes'} <= shadow_columns
