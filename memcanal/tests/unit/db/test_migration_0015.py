"""Migration 0015 on SQLite (the functional suite runs every migration on
MariaDB and PostgreSQL too): hosts already lending (an enabled memory
server) or borrowing (a lease) are admitted to pooling, the others not;
instances from before get their owner id; an older service's inserts
leave both null (not admitted, no owner id)."""

import datetime

import sqlalchemy as sa

from memcanal.db import migration
from memcanal import owners

T0 = datetime.datetime(2026, 12, 1)
VM_A = '10000000-0000-4000-8000-000000000001'
VM_B = '20000000-0000-4000-8000-000000000002'


def _host(connection, host_id, name):
    connection.execute(sa.text(
        "INSERT INTO hosts (id, uuid, name, memory_total_bytes, "
        "memory_reserved_bytes, last_sequence, created_at) "
        "VALUES (:id, :uuid, :name, 1024, 0, 7, :t0)"),
        {'id': host_id, 'uuid': 'h%d' % host_id, 'name': name, 't0': T0})


def _instance(connection, instance_id, uuid, host_id):
    connection.execute(sa.text(
        "INSERT INTO instances (id, uuid, host_id, project_id, "
        "allocated_bytes, opt_out, created_at) "
        "VALUES (:id, :uuid, :host, 'p', 1024, 0, :t0)"),
        {'id': instance_id, 'uuid': uuid, 'host': host_id, 't0': T0})


def test_hosts_in_pooling_stay_admitted_and_vms_get_owner_ids(tmp_path):
    url = 'sqlite:///%s' % (tmp_path / 'memcanal.db')
    migration.upgrade(url, '0014')
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for host_id, name in ((1, 'lender'), (2, 'borrower'),
                                  (3, 'disabled'), (4, 'idle')):
                _host(connection, host_id, name)
            _instance(connection, 1, VM_A, 2)
            _instance(connection, 2, VM_B, 4)
            for server_id, host_id, enabled in ((1, 1, 1), (2, 3, 0)):
                connection.execute(sa.text(
                    "INSERT INTO memory_servers (id, uuid, host_id, "
                    "address, enabled, capacity_bytes, used_bytes, "
                    "created_at) VALUES (:id, :uuid, :host, 'a:1', "
                    ":enabled, 1024, 0, :t0)"),
                    {'id': server_id, 'uuid': 's%d' % server_id,
                     'host': host_id, 'enabled': enabled, 't0': T0})
            connection.execute(sa.text(
                "INSERT INTO memory_leases (memory_server_id, "
                "borrower_host_id, instance_uuid, decision_uuid, lent_bytes, "
                "created_at) "
                "VALUES (1, 2, :vm, 'd1', 512, :t0)"), {'vm': VM_A, 't0': T0})
        migration.upgrade(url, '0015')
        assert migration.current_revision(url) == '0015'
        # An older service's inserts, which name neither column.
        with engine.begin() as connection:
            _host(connection, 5, 'new')
            _instance(connection, 3, '30000000-0000-4000-8000-000000000003',
                      5)
        with engine.connect() as connection:
            hosts = connection.execute(sa.text(
                'SELECT name, pooling_admitted FROM hosts ORDER BY id')).all()
            instances = connection.execute(sa.text(
                'SELECT uuid, owner_id FROM instances ORDER BY id')).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in hosts] == [
        ('lender', 1), ('borrower', 1), ('disabled', 0), ('idle', 0),
        ('new', None)]
    assert [tuple(row) for row in instances] == [
        (VM_A, owners.owner_of(VM_A)), (VM_B, owners.owner_of(VM_B)),
        ('30000000-0000-4000-8000-000000000003', None)]
