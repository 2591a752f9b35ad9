"""memcanal-status upgrade check's SQL on SQLite, MariaDB and PostgreSQL:
the checks read tables by name, with times compared in SQL, so each
dialect must answer them alike."""

from oslo_upgradecheck import upgradecheck
import sqlalchemy as sa

from memcanal.db import migration
from memcanal.db import models
from memcanal.tests.unit import test_status_cli as cases

Code = upgradecheck.Code


def test_checks_read_every_database_alike(conf, any_db_url):
    migration.upgrade(any_db_url)
    conf.set_override('connection', any_db_url, 'database')
    conf.set_override('enabled', True, 'pooling')
    conf.set_override('action_timeout', 60, 'optimizer')
    engine = sa.create_engine(any_db_url)
    try:
        with engine.begin() as connection:
            cases.add_host(connection, 'host-down', silent_seconds=3600)
            lender = cases.add_host(connection, 'lender')
            # An operator admitted it to pooling (API 1.10).
            connection.execute(sa.update(models.Host).where(
                models.Host.id == lender).values(pooling_admitted=True))
            connection.execute(sa.insert(models.MemoryServer).values(
                uuid='5e7ed0c4-0000-4000-8000-00000000a001',
                host_id=lender, address='10.0.0.1:7001',
                capacity_bytes=2 ** 30, enabled=True))
            cases.add_decision(connection, 'approved', age_seconds=120)
            cases.add_decision(connection, 'rolling_back', age_seconds=30)
            cases.add_decision(connection, 'applied', age_seconds=3600)
    finally:
        engine.dispose()
    results = {name: cases.check(name) for name in (
        'Database schema', 'Pooling memory servers', 'Compute hosts up',
        'Decisions in flight')}
    assert {name: result.code for name, result in results.items()} == {
        'Database schema': Code.SUCCESS,
        'Pooling memory servers': Code.SUCCESS,
        'Compute hosts up': Code.WARNING,
        'Decisions in flight': Code.WARNING,
    }
    assert results['Compute hosts up'].details.startswith(
        '1 of 5 hosts are down')
    assert results['Decisions in flight'].details.startswith(
        '1 decisions have been approved')
