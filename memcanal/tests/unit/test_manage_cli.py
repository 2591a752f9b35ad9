"""memcanal-manage db retention, archive and purge, in process on the
in-memory SQLite of the ``database`` fixture."""

import datetime

import pytest

from memcanal.cmd import manage
from memcanal.db import models
from memcanal.tests.unit.db import test_retention as cases
from memcanal.tests.unit.db.test_retention import ctx  # noqa: F401

CONF = manage.CONF


@pytest.fixture
def run(ctx, capsys):  # noqa: F811
    """``run(*args)``: memcanal-manage's exit status, stdout and stderr."""
    def run(*args):
        CONF.reset()    # main() registers its command before parsing
        try:
            code = manage.main(['memcanal-manage', *args])
        except SystemExit as exit:     # argparse's usage errors
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err
    yield run
    CONF.reset()
    CONF.unregister_opt(manage.COMMAND_OPT)


def decisions(ctx, count, changed_at=cases.OLD, state='superseded'):
    host = cases.register(ctx)
    cases.store(ctx, host, 0)
    for _ in range(count):
        cases.add_decision(ctx, host, state, changed_at, [cases.VM_1])


def test_archive_prints_novas_table_and_then_nothing(ctx, run):
    decisions(ctx, 2)
    code, out, _ = run('db', 'archive', '--verbose')
    assert code == 0
    assert out.splitlines() == [
        'Archived 8 rows.',
        '+-----------------+-------------------------+',
        '| Table           | Number of Rows Archived |',
        '+-----------------+-------------------------+',
        '| actions         |                       2 |',
        '| decision_events |                       4 |',
        '| decisions       |                       2 |',
        '+-----------------+-------------------------+']
    assert run('db', 'archive')[:2] == (0, 'Nothing was archived.\n')


def test_archive_before_a_date_instead_of_the_options(ctx, run):
    decisions(ctx, 1, changed_at=cases.NOW - datetime.timedelta(days=10),
              state='rejected')
    # Younger than [retention] decisions_days (90).
    assert run('db', 'archive')[1] == 'Nothing was archived.\n'
    assert run('db', 'archive', '--before', '2026-11-09')[1] == \
        'Nothing was archived.\n'
    assert run('db', 'archive', '--before',
               '2026-11-11T00:00:00+02:00')[1] == 'Archived 4 rows.\n'


def test_archive_max_rows_per_run_or_batch(ctx, run):
    decisions(ctx, 3)
    assert run('db', 'archive', '--max-rows', '4')[1] == \
        'Archived 4 rows.\n'
    assert run('db', 'archive', '--max-rows', '4', '--until-complete')[1] \
        == 'Archived 8 rows.\n'


def test_purge_before_or_all(ctx, run):
    decisions(ctx, 2)
    run('db', 'archive')
    assert run('db', 'purge')[0] == 2
    assert run('db', 'purge', '--before', '2026-08-01')[1] == \
        'Nothing was purged.\n'
    code, out, _ = run('db', 'purge', '--all', '--verbose')
    assert (code, out.splitlines()[0]) == (0, 'Purged 8 rows.')
    assert '| shadow_decisions       |                     2 |' in out
    assert cases.count(ctx, models.SHADOW_TABLES['decisions']) == 0


@pytest.mark.parametrize('args', [
    ('archive', '--before', 'yesterday'),
    ('archive', '--max-rows', '0'),
    ('purge', '--before', '2026-11-01', '--all'),
])
def test_usage_errors_exit_2(run, args):
    code, _, err = run('db', *args)
    assert code == 2
    assert err


def test_retention_folds_reports_now(ctx, run):
    host = cases.register(ctx)
    for minute in range(3):
        cases.store(ctx, host, minute)
    code, out, _ = run('db', 'retention', '--verbose')
    assert code == 0
    assert out.splitlines()[0] == 'Folded, deleted or archived 5 rows.'
    assert '| instance_reports |    2 |' in out
    assert cases.count(ctx, cases.TABLES['instance_reports']) == 1
