"""alembic's environment: run migrations on memcanal's models' metadata.

``memcanal.db.migration`` passes an open connection in
``config.attributes['connection']``; the alembic command line instead
gives a URL with ``-x url=...``.
"""

from alembic import context
from oslo_db.sqlalchemy import engines

from memcanal.db import models

target_metadata = models.Base.metadata


def _run(connection):
    context.configure(
        connection=connection, target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode copies the table.
        render_as_batch=connection.dialect.name == 'sqlite',
        compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    connection = context.config.attributes.get('connection')
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get('url')
    if not url:
        raise SystemExit('Give the database: alembic -x url=... <command>')
    engine = engines.create_engine(url)
    try:
        with engine.begin() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit('Offline (--sql) migrations are not supported.')
run_migrations_online()
