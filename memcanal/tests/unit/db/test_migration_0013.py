"""Migration 0013 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): hosts from before have no agent version
(taken as the oldest under [upgrade_levels] agent = auto), and service
processes get a table to record theirs in."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration

T0 = datetime.datetime(2026, 12, 1)


def test_hosts_from_before_have_no_agent_version(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0012')
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO hosts (id, uuid, name, memory_total_bytes, "
                "memory_reserved_bytes, last_sequence, created_at) "
                "VALUES (1, 'h1', 'compute-1', 1024, 0, 0, :t0)"),
                {'t0': T0})
        migration.upgrade(url, '0013')
        assert migration.current_revision(url) == '0013'
        with engine.connect() as connection:
            versions = connection.execute(sa.text(
                'SELECT agent_version FROM hosts')).all()
            services = connection.execute(sa.text(
                'SELECT COUNT(*) FROM services')).scalar()
    finally:
        engine.dispose()
    assert [tuple(row) for row in versions] == [(None,)]
    assert services == 0
