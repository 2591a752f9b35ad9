"""db_api.store_reports: several reports in one transaction, each with the
outcome store_report would give it alone."""

from oslo_db import exception as db_exc
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.db import report_rows
from memcanal import exception
from memcanal.rpc import reports
from memcanal.tests.unit.db import test_api as cases

GIB = cases.GIB


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


def stored_sequences(ctx):
    with db_api.context_manager.reader.using(ctx):
        return sorted(ctx.session.execute(sa.select(
            models.Host.name, models.HostReport.sequence).join(
                models.Host,
                models.Host.id == models.HostReport.host_id)).all())


def test_each_report_of_a_batch_gets_its_own_outcome(ctx):
    one, two = cases.register(ctx, 'one'), cases.register(ctx, 'two')
    db_api.store_report(ctx, cases.report(one, 1))
    outcomes = db_api.store_reports(ctx, [
        cases.report(one, 1),            # stored before
        cases.report(one, 3),
        cases.report(two, 1, cases.sample(cases.VM_2, 1)),
        cases.report(one, 3),            # redelivered within the batch
        cases.report(cases.VM_1, 1),     # a host that never registered
        cases.report(one, 2),            # late: the host keeps 3
    ])
    assert outcomes[:4] + outcomes[5:] == [False, True, True, False, True]
    assert isinstance(outcomes[4], exception.HostNotFound)
    assert stored_sequences(ctx) == [('one', 1), ('one', 2), ('one', 3),
                                     ('two', 1)]
    assert db_api.get_host(ctx, one)['last_sequence'] == 3
    assert db_api.get_host(ctx, two)['last_sequence'] == 1
    assert db_api.count_reports(ctx) == {'host_reports': 4,
                                         'instance_reports': 4}
    # Each report's rows went to its own host report.
    history = db_api.list_instance_reports(ctx, cases.VM_1)
    assert sorted(r['sequence'] for r in history) == [1, 2, 3]
    assert all(r['wss']['distinct'] == r['sequence'] * 2 ** 20
               and r['mrc'] == cases.sample(cases.VM_1, 1)['mrc']
               for r in history)


def test_an_instance_in_several_reports_of_a_batch_ends_as_the_last_says(
        ctx):
    host = cases.register(ctx)
    db_api.store_report(ctx, cases.report(host, 1))
    with db_api.context_manager.writer.using(ctx):
        ctx.session.execute(sa.update(models.Instance).values(
            target_bytes=4 * GIB, deleted_at=sa.func.now()))
    first = dict(cases.sample(cases.VM_1, 2), observed_bytes=5 * GIB)
    last = dict(cases.sample(cases.VM_1, 3), observed_bytes=6 * GIB,
                allocated_bytes=16 * GIB)
    assert db_api.store_reports(ctx, [cases.report(host, 2, first),
                                      cases.report(host, 3, last)]) == [
        True, True]
    instance = db_api.get_instance(ctx, cases.VM_1)
    assert (instance['observed_bytes'], instance['allocated_bytes'],
            instance['target_bytes'], instance['deleted_at']) == (
        6 * GIB, 16 * GIB, 4 * GIB, None)


def test_a_failing_report_stores_none_of_its_batch(ctx):
    host = cases.register(ctx)
    bad = cases.report(host, 2, cases.sample(cases.VM_1, 2))
    bad['instances'][0]['guest_stats'] = None  # NOT NULL
    with pytest.raises(db_exc.DBError):
        db_api.store_reports(ctx, [cases.report(host, 1), bad])
    assert db_api.count_reports(ctx)['host_reports'] == 0
    assert db_api.get_host(ctx, host)['last_sequence'] == 0
    assert db_api.list_instances(ctx) == []


def test_a_host_without_vms_reports_too(ctx):
    host = cases.register(ctx)
    empty = reports.validate_report({
        'host_uuid': host, 'sequence': 1,
        'collected_at': '2026-11-22T09:00:00Z', 'instances': []},
        max_mrc_points=256, max_instances=10)
    assert db_api.store_reports(ctx, [empty]) == [True]
    assert db_api.get_host(ctx, host)['last_sequence'] == 1
    assert db_api.count_reports(ctx) == {'host_reports': 1,
                                         'instance_reports': 0}


# MySQL's escape sequences in a quoted string (any other backslashed
# character is itself).
MYSQL_ESCAPES = {'0': '\0', "'": "'", '"': '"', 'b': '\b', 'n': '\n',
                 'r': '\r', 't': '\t', 'Z': '\x1a', '\\': '\\'}


def mysql_unquote(literal):
    assert literal[0] == literal[-1] == "'"
    text, chars = [], iter(literal[1:-1])
    for char in chars:
        if char == '\\':
            char = next(chars)
            text.append(MYSQL_ESCAPES.get(char, char))
        else:
            assert char != "'"  # a quote ends the string unless escaped
            text.append(char)
    return ''.join(text)


@pytest.mark.parametrize('document', [
    {'exact': [[4096, 0.5], [8192, 0.25]]},
    {"it's": 'a "quoted" \\ back\\slash', 'ctl': '\x00\n\r\x1a\t',
     'wide': '\u00e9\U0001F600', '\\': "'\\'", "\\'": '\\\\'},
    []])
def test_json_text_is_quoted_for_mysql_to_read_back(document):
    text = report_rows._dumps(document)
    assert mysql_unquote(
        report_rows._quote_json_text(report_rows._JSONText(text))) == text
