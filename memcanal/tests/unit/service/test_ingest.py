"""The service's group commit: reports stored together by whichever
thread writes, each caller answered with its own outcome."""

import gc
import threading
from unittest import mock

from oslo_db import exception as db_exc
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal import exception
from memcanal.service import ingest
from memcanal.service import manager
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests import keys
from memcanal.tests.unit.rpc import test_reports


def report(sequence):
    return {'host_uuid': 'h', 'sequence': sequence}


class HeldDatabase:
    """db_api's store functions, answering True for each report (404: its
    host is unknown) and refusing the batches holding a sequence in
    ``fail``; the first transaction is held open until ``release`` is
    set. Records every batch, and the reports stored alone."""

    def __init__(self, fail=()):
        self.batches = []
        self.singles = []
        self.fail = fail
        self.release = threading.Event()

    def store_reports(self, context, batch):
        self.batches.append([r['sequence'] for r in batch])
        if len(self.batches) == 1:
            assert self.release.wait(10)
        if any(r['sequence'] in self.fail for r in batch):
            raise db_exc.DBError('refused')
        return [r['sequence'] != 404 or exception.HostNotFound(host='h')
                for r in batch]

    def store_report(self, context, report):
        self.singles.append(report['sequence'])
        outcome, = self.store_reports(context, [report])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def store_concurrently(writer, database, sequences):
    """Store report 1, then the others while its transaction is held;
    each sequence's outcome (a value or the exception raised)."""
    outcomes = {}

    def store(sequence):
        try:
            outcomes[sequence] = writer.store(report(sequence))
        except Exception as err:  # the outcome under test
            outcomes[sequence] = err

    threads = [threading.Thread(target=store, args=(s,)) for s in sequences]
    with mock.patch.object(db_api, 'store_reports', database.store_reports), \
            mock.patch.object(db_api, 'store_report', database.store_report):
        threads[0].start()
        while not database.batches:
            threading.Event().wait(0.001)
        for thread in threads[1:]:
            thread.start()
        while len(writer._pending) < len(sequences) - 1:
            threading.Event().wait(0.001)
        database.release.set()
        for thread in threads:
            thread.join(10)
    return outcomes


def test_reports_arriving_during_a_transaction_go_in_the_next_batches():
    database = HeldDatabase()
    writer = ingest.ReportWriter(batch_size=3)
    outcomes = store_concurrently(writer, database, range(1, 9))
    assert outcomes == {s: True for s in range(1, 9)}
    # The first alone; the seven that waited, three at a time. A batch of
    # one is store_report's.
    assert [len(b) for b in database.batches] == [1, 3, 3, 1]
    assert sorted(sum(database.batches[1:], [])) == list(range(2, 9))
    assert database.singles == [1, database.batches[-1][0]]


def test_a_batch_the_database_refuses_is_stored_one_by_one():
    database = HeldDatabase(fail={3})
    writer = ingest.ReportWriter(batch_size=10)
    outcomes = store_concurrently(writer, database, [1, 2, 3, 4, 404])
    assert isinstance(outcomes.pop(3), db_exc.DBError)
    assert isinstance(outcomes.pop(404), exception.HostNotFound)
    assert outcomes == {1: True, 2: True, 4: True}
    assert database.batches[1] == [2, 3, 4, 404]
    assert sorted(database.singles) == [1, 2, 3, 4, 404]


def test_a_lone_report_is_stored_at_once_by_its_own_thread():
    database = HeldDatabase()
    database.release.set()
    writer = ingest.ReportWriter(batch_size=10)
    with mock.patch.object(db_api, 'store_report', database.store_report):
        assert writer.store(report(7)) is True
    assert database.singles == [7]
    assert not writer._writing


@pytest.fixture
def service_manager(conf, tmp_path):
    # A file: threads of an in-memory database would share one connection.
    fixture = memcanal_fixtures.Database(
        'sqlite:///%s' % (tmp_path / 'memcanal.sqlite'))
    fixture.setUp()
    yield manager.ServiceManager(conf)
    fixture.cleanUp()


def test_concurrent_reports_are_counted_as_stored_duplicate_or_rejected(
        service_manager):
    ctx = memcanal_context.get_admin_context()
    agent = keys.Agent('compute-1')
    host = agent.register(service_manager, ctx)
    good = []
    for sequence in range(1, 13):
        sent = test_reports.good_report()
        sent.update(host_uuid=host['uuid'], sequence=sequence)
        good.append(sent)
    bad = dict(good[0], sequence=13, instances='none')
    sent = good + good[:4] + [bad]
    barrier = threading.Barrier(len(sent))

    def send(one):
        barrier.wait()
        agent.report(service_manager, memcanal_context.get_admin_context(),
                     one)

    threads = [threading.Thread(target=send, args=(one,)) for one in sent]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert service_manager.counters == {
        'stored': 12, 'duplicate': 4, 'rejected': 1, 'failed': 0,
        'refused': 0, 'left_out': 0}
    assert db_api.count_reports(ctx)['host_reports'] == 12
    assert db_api.get_host(ctx, host['uuid'])['last_sequence'] == 12


def test_collect_less_freezes_start_up_objects_and_collects_rarely():
    thresholds = gc.get_threshold()
    try:
        ingest.collect_less()
        assert gc.get_threshold() == ingest.GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
