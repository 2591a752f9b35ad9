"""Migration 0009 on SQLite, MariaDB and PostgreSQL: the memory servers
registered before it get a uuid each and are disabled (anyone with the
broker's credentials could register one then); hosts have no key yet,
so each pins one at its next registration."""

import datetime

from oslo_utils import uuidutils
import sqlalchemy as sa

from memcanal.db import migration
from memcanal.tests.functional import old_schema

T0 = datetime.datetime(2026, 11, 25)


def test_servers_from_before_get_a_uuid_and_lend_nothing(any_db_url):
    with old_schema.engine_at(any_db_url, '0008') as engine:
        with engine.begin() as connection:
            old_schema.insert(connection, 'hosts', [
                {'id': n, 'uuid': 'h%d' % n, 'name': 'h%d' % n,
                 'created_at': T0, 'memory_total_bytes': 1,
                 'memory_reserved_bytes': 0, 'last_sequence': 0}
                for n in (1, 2)])
            old_schema.insert(connection, 'memory_servers', [
                {'host_id': n, 'address': '10.0.0.%d:7400' % n,
                 'capacity_bytes': 2 ** 40, 'used_bytes': 0,
                 'created_at': T0} for n in (1, 2)])
        migration.upgrade(any_db_url, '0009')
        with engine.connect() as connection:
            servers = connection.execute(sa.select(old_schema.table(
                'memory_servers', 'host_id', 'uuid', 'enabled')).order_by(
                    sa.column('host_id'))).all()
            keys = connection.execute(sa.select(
                old_schema.table('hosts', 'public_key'))).scalars().all()
    assert [(host, bool(enabled)) for host, _uuid, enabled in servers] == [
        (1, False), (2, False)]
    uuids = [uuid for _host, uuid, _enabled in servers]
    assert all(uuidutils.is_uuid_like(uuid) for uuid in uuids)
    assert len(set(uuids)) == 2
    assert keys == [None, None]
