"""Alembic migrations on SQLite, MariaDB and PostgreSQL.

Every revision is applied one at a time from an empty database, the
result must match the models exactly (so tests that build the schema
from the models test what production runs), and ``memcanal-manage``
does the same from the command line.
"""

import os
import subprocess
import sys

from alembic import autogenerate
from alembic import migration as alembic_migration
from oslo_db.sqlalchemy import engines

from memcanal.db import migration
from memcanal.db import models

BIN = os.path.dirname(sys.executable)


def schema_differences(url):
    engine = engines.create_engine(url)
    try:
        with engine.connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection, opts={'compare_type': True,
                                  'compare_server_default': True})
            return autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
    finally:
        engine.dispose()


def test_walk_every_revision_then_match_models(any_db_url):
    assert migration.current_revision(any_db_url) is None
    for revision in migration.revisions():
        migration.upgrade(any_db_url, revision)
        assert migration.current_revision(any_db_url) == revision
    assert revision == migration.head_revision()
    assert schema_differences(any_db_url) == []
    # Upgrading a database at head changes nothing.
    migration.upgrade(any_db_url)
    assert migration.current_revision(any_db_url) == revision


def manage(config, *args):
    return subprocess.run(
        [os.path.join(BIN, 'memcanal-manage'), '--config-file',
         str(config), *args], capture_output=True, text=True, timeout=120)


def test_manage_db_sync_and_version(any_db_url, tmp_path):
    config = tmp_path / 'memcanal.conf'
    config.write_text('[database]\nconnection = %s\n' % any_db_url)
    before = manage(config, 'db', 'version')
    assert (before.returncode, before.stdout) == (0, 'None\n')
    synced = manage(config, 'db', 'sync')
    assert synced.returncode == 0, synced.stderr
    assert 'to %s' % migration.head_revision() in synced.stdout
    after = manage(config, 'db', 'version')
    assert after.stdout == '%s\n' % migration.head_revision()
    assert schema_differences(any_db_url) == []


def test_manage_reports_errors_with_exit_status(tmp_path):
    config = tmp_path / 'memcanal.conf'
    config.write_text('[database]\nconnection = sqlite:///%s\n'
                      % (tmp_path / 'm.sqlite'))
    unknown = manage(config, 'db', 'sync', '--revision', 'nonesuch')
    assert unknown.returncode == 1
    assert 'nonesuch' in unknown.stderr
    assert manage(config, 'db').returncode == 2
    config.write_text('[database]\nconnection = '
                      'postgresql+psycopg2://nobody@127.0.0.1:1/none\n')
    refused = manage(config, 'db', 'version')
    assert refused.returncode == 1
    assert 'database error' in refused.stderr
