"""memcanal.db.api on migrated SQLite, MariaDB and PostgreSQL schemas.

What only a real database shows: concurrent writers racing to store the
same redelivered report, a failing report rolled back whole, and sizes
and curves surviving each database's types.
"""

import threading

import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_api as cases

WRITERS = 8


@pytest.fixture
def ctx(any_db_url):
    with data.using(memcanal_fixtures.Database(any_db_url, migrate=True)):
        yield memcanal_context.get_admin_context()


def test_racing_writers_store_a_report_once(ctx):
    host = cases.register(ctx)
    report = cases.report(host, 1, cases.sample(cases.VM_1, 1),
                          cases.sample(cases.VM_2, 1))
    barrier = threading.Barrier(WRITERS)
    results, errors = [], []

    def store():
        barrier.wait()
        try:
            results.append(db_api.store_report(
                memcanal_context.get_admin_context(), report))
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=store) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(results) == [False] * (WRITERS - 1) + [True]
    assert db_api.count_reports(ctx) == {'host_reports': 1,
                                         'instance_reports': 2}


def test_failing_report_is_rolled_back_whole(ctx):
    cases.check_failing_report_stores_nothing(ctx)


def test_sizes_and_curves_survive_the_database(ctx):
    host = cases.register(ctx)
    db_api.store_report(ctx, cases.report(host, 1))
    latest = db_api.get_instance(ctx, cases.VM_1)['latest_report']
    expected = cases.sample(cases.VM_1, 1)
    assert latest['allocated_bytes'] == expected['allocated_bytes']
    assert latest['wss'] == expected['wss']
    assert latest['mrc'] == expected['mrc']
    assert latest['guest_stats'] == expected['guest_stats']
