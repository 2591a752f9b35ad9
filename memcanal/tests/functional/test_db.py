"""memcanal.db.api on migrated SQLite, MariaDB and PostgreSQL schemas.

What only a real database shows: concurrent writers racing to store the
same redelivered report, a failing report rolled back whole, and sizes
and curves surviving each database's types.
"""

import pytest

from memcanal import context as memcanal_context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal import exception
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_api as cases
from memcanal.tests.unit.db import test_decisions as decision_cases

WRITERS = 8


@pytest.fixture
def ctx(any_db_url):
    with data.using(memcanal_fixtures.Database(any_db_url, migrate=True)):
        yield memcanal_context.get_admin_context()


def test_racing_writers_store_a_report_once(ctx):
    host = cases.register(ctx)
    report = cases.report(host, 1, cases.sample(cases.VM_1, 1),
                          cases.sample(cases.VM_2, 1))
    results = services.race(*[lambda: db_api.store_report(
        memcanal_context.get_admin_context(), report)] * WRITERS)
    assert sorted(results) == [False] * (WRITERS - 1) + [True], results
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


def test_text_past_the_basic_multilingual_plane_is_stored(ctx):
    project = 'p\U0001F600'
    host = cases.register(ctx)
    db_api.store_report(ctx, cases.report(
        host, 1, cases.sample(cases.VM_1, 1, project)))
    assert db_api.get_instance(ctx, cases.VM_1)['project_id'] == project


def test_an_approval_racing_the_optimizer_leaves_one_decision_acting(ctx):
    """Under the host's row lock, an operator approving a recommended
    decision and an optimizer recording an auto one cannot both act."""
    host = cases.register(ctx)
    db_api.store_report(ctx, cases.report(host, 1, cases.sample(
        cases.VM_1, 1), cases.sample(cases.VM_2, 1)))
    for round_ in range(3):
        recommended = decision_cases.decide(
            ctx, host, targets=(1024 + round_, 2048))
        outcomes = services.race(
            lambda: transitions.request_transition(
                decision_cases.operator(), recommended['uuid'], 'approve'),
            lambda: decision_cases.decide(ctx, host, mode='auto',
                                          targets=(512 + round_, 4096)))
        acting = [d for d in decisions_db.list_decisions(ctx)
                  if d['state'] == 'approved']
        assert len(acting) == 1, outcomes
        assert all(isinstance(o, (dict, exception.HostBusy,
                                  exception.DecisionStateConflict))
                   for o in outcomes), outcomes
        [flying] = acting
        action_delivery.record_results(ctx, flying['uuid'], [
            {'uuid': a['uuid'], 'state': 'applied', 'error': None,
             'result': None}
            for a in decisions_db.get_decision(ctx,
                                               flying['uuid'])['actions']])
