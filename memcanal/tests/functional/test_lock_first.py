"""Two controllers deciding for the same VM at once, on MariaDB and
PostgreSQL: the second's transaction must see what the first committed
while it waited for the hosts' locks.

Under MariaDB's default REPEATABLE READ a transaction reads the database
as its first plain SELECT found it, however long it then waits for a
lock. A writer that reads before it locks the hosts would, once it holds
them, check "is a decision of this host in flight?" against the world
before the other controller committed. Each test holds the second
controller at ``lock_hosts`` (after whatever it reads first) while the
first records and commits an auto migration of the same VM; then lets
it go on. Exactly one decision may be acting.
"""

import threading

import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal import exception
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions as flow
from memcanal.tests.unit.db import test_pooling as pooled

GIB = flow.GIB
SECOND = 'second-controller'


@pytest.fixture(params=['mysql', 'postgresql'])
def ctx(request):
    urls = (services.mysql_database() if request.param == 'mysql'
            else services.postgres_database())
    url = next(urls)
    try:
        with data.using(memcanal_fixtures.Database(url, migrate=True)):
            yield memcanal_context.get_admin_context()
    finally:
        urls.close()


@pytest.fixture
def cloud(ctx):
    """host-1 with VM_1 and VM_2; host-2 lending memory; host-3."""
    source = stored.register(ctx)
    db_api.store_report(ctx, stored.report(
        source, 1, stored.sample(stored.VM_1, 1),
        stored.sample(stored.VM_2, 1)))
    lender = db_api.register_host(ctx, 'host-2', 64 * GIB, 0,
                                  60.0)['uuid']
    db_api.store_report(ctx, pooled.lender_report(lender, 1))
    pooled.enable_servers(ctx)
    third = db_api.register_host(ctx, 'host-3', 64 * GIB, 0, 60.0)['uuid']
    pooled.admit_hosts(ctx, source, lender, third)
    return {'source': source, 'lender': lender, 'third': third}


def held_at_lock(monkeypatch, second):
    """Run ``second`` in a thread held at lock_hosts until the caller
    has committed its own decision (the context manager's body); its
    result or exception."""
    reached, committed = threading.Event(), threading.Event()
    real_lock_hosts = decisions_db.lock_hosts

    def lock_hosts(session, host_ids):
        if threading.current_thread().name == SECOND:
            reached.set()
            committed.wait(60)
        return real_lock_hosts(session, host_ids)

    monkeypatch.setattr(decisions_db, 'lock_hosts', lock_hosts)
    outcome = []

    def run():
        try:
            outcome.append(second())
        except Exception as exc:  # asserted on by the test
            outcome.append(exc)

    thread = threading.Thread(target=run, name=SECOND)
    thread.start()
    assert reached.wait(60), 'the second controller never locked'
    return thread, committed, outcome


def migrate(ctx, destination, mode='auto'):
    return decisions_db.create_migration(
        memcanal_context.get_admin_context(), stored.VM_1, destination,
        'migration', mode, {}, {})


def race(ctx, monkeypatch, second, first):
    thread, committed, outcome = held_at_lock(monkeypatch, second)
    try:
        made = first()
        assert made['state'] == 'approved'
    finally:
        committed.set()
        thread.join(60)
    acting = [d for d in decisions_db.list_decisions(ctx)
              if d['state'] == 'approved']
    return acting, outcome


def test_a_second_auto_migration_of_the_vm_sees_the_first(ctx, cloud,
                                                          monkeypatch):
    acting, outcome = race(
        ctx, monkeypatch, lambda: migrate(ctx, cloud['third']),
        lambda: migrate(ctx, cloud['lender']))
    assert len(acting) == 1, (acting, outcome)
    assert isinstance(outcome[0], exception.HostBusy), outcome


def test_paging_the_vm_out_sees_its_migration(ctx, cloud, monkeypatch):
    acting, outcome = race(
        ctx, monkeypatch, lambda: decisions_db.create_pooling_decision(
            memcanal_context.get_admin_context(), stored.VM_1, 2 * GIB,
            cloud['lender'], 6 * GIB, 'pooling', 'auto', {}, {}),
        lambda: migrate(ctx, cloud['third']))
    assert len(acting) == 1, (acting, outcome)
    assert isinstance(outcome[0], exception.HostBusy), outcome


def test_an_approval_sees_the_migration_made_meanwhile(ctx, cloud,
                                                       monkeypatch):
    waiting = flow.decide(ctx, cloud['source'])
    acting, outcome = race(
        ctx, monkeypatch, lambda: transitions.request_transition(
            flow.operator(), waiting['uuid'], 'approve'),
        lambda: migrate(ctx, cloud['third']))
    assert len(acting) == 1, (acting, outcome)
    assert isinstance(outcome[0], exception.HostBusy), outcome
    assert decisions_db.get_decision(ctx, waiting['uuid'])['state'] == (
        'recommended')
