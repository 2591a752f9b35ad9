"""Rows as an old schema revision held them, for the tests of the
migrations that move or change them: the models describe only the newest
schema, so rows go in through plain tables of the columns they name."""

import contextlib

from oslo_db.sqlalchemy import engines
import sqlalchemy as sa

from memcanal.db import migration


def table(name, *columns):
    return sa.table(name, *[sa.column(c) for c in columns])


def insert(connection, name, rows):
    """``rows``, dicts of the same columns, into table ``name``."""
    connection.execute(sa.insert(table(name, *rows[0])), rows)


@contextlib.contextmanager
def engine_at(url, revision):
    """An engine on the database at ``url``, migrated to ``revision``;
    disposed of after."""
    migration.upgrade(url, revision)
    engine = engines.create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()
