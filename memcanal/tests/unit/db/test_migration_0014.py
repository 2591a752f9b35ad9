"""Migration 0014 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): hosts from before have folded nothing,
registered unstamped and do not stamp, so their agents' messages are
taken as before; the columns default so that a service of the release
before, still running, inserts hosts."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration

T0 = datetime.datetime(2026, 12, 1)


def test_hosts_from_before_are_taken_as_before_no_replay_state(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0013')
    engine = sa.create_engine(url)
    insert = sa.text(
        "INSERT INTO hosts (id, uuid, name, memory_total_bytes, "
        "memory_reserved_bytes, last_sequence, created_at) "
        "VALUES (:id, :uuid, :name, 1024, 0, 7, :t0)")
    try:
        with engine.begin() as connection:
            connection.execute(insert, {'id': 1, 'uuid': 'h1',
                                        'name': 'compute-1', 't0': T0})
        migration.upgrade(url, '0014')
        assert migration.current_revision(url) == '0014'
        # An older service's insert, which names none of them.
        with engine.begin() as connection:
            connection.execute(insert, {'id': 2, 'uuid': 'h2',
                                        'name': 'compute-2', 't0': T0})
        with engine.connect() as connection:
            rows = connection.execute(sa.text(
                'SELECT folded_sequence, registered_sent_at, stamped '
                'FROM hosts ORDER BY id')).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [(0, None, 0), (0, None, 0)]
