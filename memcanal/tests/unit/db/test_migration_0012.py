"""Migration 0012 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): VMs from before it have no reached size, and
are counted at their target; their archive gets the column too."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration

T0 = datetime.datetime(2026, 12, 1)


def test_instances_from_before_have_no_reached_size(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0011')
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO instances (id, uuid, project_id, created_at, "
                "allocated_bytes, target_bytes, opt_out) "
                "VALUES (1, 'vm1', 'p', :t0, 1024, 512, 0)"), {'t0': T0})
        migration.upgrade(url, '0012')
        assert migration.current_revision(url) == '0012'
        with engine.connect() as connection:
            reached = connection.execute(sa.text(
                'SELECT target_bytes, reached_bytes FROM instances')).all()
            shadow = [column['name'] for column in sa.inspect(
                connection).get_columns('shadow_instances')]
    finally:
        engine.dispose()
    assert [tuple(row) for row in reached] == [(512, None)]
    assert 'reached_bytes' in shadow
