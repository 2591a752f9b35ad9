"""Migration 0016 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): a new table, which a service of the release
before never reads; the hosts it names stay as they were."""

import sqlalchemy as sa

from memcanal.db import migration


def test_lease_revocations_are_a_new_table_nothing_revoked(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0015')
    migration.upgrade(url, '0016')
    assert migration.current_revision(url) == '0016'
    engine = sa.create_engine(url)
    try:
        columns = {c['name'] for c in sa.inspect(engine).get_columns(
            'lease_revocations')}
        with engine.connect() as connection:
            count = connection.execute(sa.text(
                'SELECT COUNT(*) FROM lease_revocations')).scalar_one()
    finally:
        engine.dispose()
    assert columns == {'id', 'lender_host_id', 'instance_uuid',
                       'revoked_at'}
    assert count == 0
