"""Migration 0010 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): hosts from before it have no hypervisor type
until their agent's next registration, and are taken as nova's."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration

T0 = datetime.datetime(2026, 11, 27)


def test_hosts_from_before_have_no_hypervisor_type(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0009')
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO hosts (id, uuid, name, created_at, "
                "memory_total_bytes, memory_reserved_bytes, last_sequence) "
                "VALUES (1, 'h1', 'h1', :t0, 1, 0, 0)"), {'t0': T0})
        migration.upgrade(url, '0010')
        assert migration.current_revision(url) == '0010'
        with engine.connect() as connection:
            types = connection.execute(sa.text(
                'SELECT hypervisor_type FROM hosts')).scalars().all()
    finally:
        engine.dispose()
    assert types == [None]
