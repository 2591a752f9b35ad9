"""memcanal.db.retention on migrated SQLite, MariaDB and PostgreSQL.

What only a real database shows: the locking SELECTs, INSERT ... SELECT
into the shadow tables and the deletes with their subqueries accepted by
each database, rows (JSON, times) coming back from the shadow tables as
they went in, and two retention runs at once folding each report once.
"""

from unittest import mock

from oslo_utils import timeutils
import pytest

from memcanal import context as memcanal_context
from memcanal.db import models
from memcanal.db import retention
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_retention as cases

RUNNERS = 3


@pytest.fixture
def ctx(any_db_url):
    with data.using(memcanal_fixtures.Database(any_db_url, migrate=True)), \
            mock.patch.object(timeutils, 'utcnow', return_value=cases.NOW):
        yield memcanal_context.get_admin_context()


def test_retention_archive_and_purge(ctx, conf):
    host = cases.register(ctx)
    for minute in range(0, 180, 10):
        cases.store(ctx, host, minute, cases.VM_1, cases.VM_2)
    cases.add_decision(ctx, host, 'superseded', cases.OLD, [cases.VM_2])
    cases.add_decision(ctx, host, 'applied', cases.OLD, [cases.VM_1])
    cases.mark_deleted(ctx, cases.VM_2, cases.OLD)
    decisions = cases.rows(ctx, cases.TABLES['decisions'])
    instances = cases.rows(ctx, cases.TABLES['instances'])
    conf.set_override('batch_size', 5, 'retention')
    assert retention.run(ctx, conf.retention) == {
        'instance_reports': 34, 'host_reports': 17, 'history_created': 6,
        'decisions': 1, 'actions': 1, 'decision_events': 2,
        retention.FOLDED: 1, 'instances': 1}
    history = retention.list_history(ctx, cases.VM_1)
    assert [h['report_count'] for h in history] == [5, 6, 6]
    assert history[0]['wss']['prl']['mean'] == pytest.approx(
        (100 + 140) * cases.MIB)
    assert history[0]['mrc'] == cases.sample(cases.VM_1, 160)['mrc']
    assert [h['report_count'] for h in retention.list_history(
        ctx, cases.VM_2)] == [6, 6, 6]
    # The shadow rows are the production rows, JSON and times included.
    assert cases.rows(ctx, models.SHADOW_TABLES['decisions']) == \
        decisions[:1]
    assert cases.rows(ctx, models.SHADOW_TABLES['instances']) == \
        instances[1:]
    assert retention.run(ctx, conf.retention) == {}
    assert retention.purge(ctx, None, batch_size=1) == {
        'shadow_decisions': 1, 'shadow_actions': 1,
        'shadow_decision_events': 2, 'shadow_instances': 1}


def test_runs_at_once_fold_each_report_once(ctx):
    host = cases.register(ctx)
    for minute in range(120):
        cases.store(ctx, host, minute, cases.VM_1, cases.VM_2)
    outcomes = services.race(*[lambda: retention.fold_reports(
        memcanal_context.get_admin_context(), cases.NOW, 1800,
        batch_size=10)] * RUNNERS)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    for vm in (cases.VM_1, cases.VM_2):
        history = retention.list_history(ctx, vm)
        assert [h['report_count'] for h in history] == [29, 30, 30, 30]
        assert [h['wss']['prl']['count'] for h in history] == [
            29, 30, 30, 30]
