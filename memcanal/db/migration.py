"""Schema migrations with alembic: upgrade a database, read its version.

The migration scripts live in ``memcanal/db/migrations``; alembic is
configured here in code, so ``memcanal-manage db sync`` works from an
installed package with no alembic.ini to find. Developers add a revision
with ``alembic -c memcanal/db/alembic.ini revision --autogenerate -m ...``
against a database at head.
"""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
from oslo_db.sqlalchemy import engines

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), 'migrations')


def _config(connection=None):
    config = alembic_config.Config()
    config.set_main_option('script_location', MIGRATIONS_DIR)
    # env.py runs the migrations on this connection rather than opening
    # its own, so one engine (oslo.db's, with its MySQL sql_mode) is used.
    config.attributes['connection'] = connection
    return config


def upgrade(url, revision='head'):
    """Upgrade the database at ``url`` to ``revision`` (default: newest)."""
    engine = engines.create_engine(url, mysql_sql_mode='TRADITIONAL')
    try:
        with engine.begin() as connection:
            command.upgrade(_config(connection), revision)
    finally:
        engine.dispose()


def current_revision(url):
    """The revision the database at ``url`` is at; None before any."""
    engine = engines.create_engine(url, mysql_sql_mode='TRADITIONAL')
    try:
        with engine.connect() as connection:
            return alembic_migration.MigrationContext.configure(
                connection).get_current_revision()
    finally:
        engine.dispose()


def head_revision():
    """The newest revision this code knows."""
    return alembic_script.ScriptDirectory.from_config(
        _config()).get_current_head()


def revisions():
    """Every revision, oldest first."""
    scripts = alembic_script.ScriptDirectory.from_config(_config())
    return [s.revision for s in reversed(list(scripts.walk_revisions()))]
