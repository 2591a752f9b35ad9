"""Test fixtures shared by unit and functional tests."""

import fixtures
from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import orm
import sqlalchemy as sa

from memcanal.api import policy
from memcanal.db import api as db_api
from memcanal.db import migration
from memcanal.db import models


class Database(fixtures.Fixture):
    """A fresh schema on ``url`` (default: private in-memory SQLite).

    Points memcanal.db.api at it for the test's duration and drops
    everything afterwards. ``migrate`` builds the schema with the alembic
    migrations, as ``memcanal-manage db sync`` does, instead of from the
    models (which an in-memory database needs: migrations open their own
    connection).
    """

    def __init__(self, url='sqlite://', migrate=False):
        super().__init__()
        self.url = url
        self.migrate = migrate

    def _setUp(self):
        # oslo.db's engine, so its exception filters (DBDuplicateEntry...)
        # apply as they do in production.
        self.engine = engines.create_engine(self.url,
                                            mysql_sql_mode='TRADITIONAL')
        self.addCleanup(self.engine.dispose)
        if self.migrate:
            migration.upgrade(self.url)
            self.addCleanup(self._drop_alembic_version)
        else:
            models.Base.metadata.create_all(self.engine)
        self.addCleanup(models.Base.metadata.drop_all, self.engine)
        factory = enginefacade._TestTransactionFactory(
            self.engine, orm.get_maker(engine=self.engine),
            apply_global=False)
        self.addCleanup(db_api.context_manager.patch_factory(factory))

    def _drop_alembic_version(self):
        with self.engine.begin() as connection:
            connection.execute(sa.text('DROP TABLE alembic_version'))


class ConfFixture(fixtures.Fixture):
    """Parses no files into the global CONF and resets it afterwards.

    ``auth_strategy`` overrides ``[api] auth_strategy``; the API's policy
    enforcer, built on this CONF, is forgotten afterwards too.
    """

    def __init__(self, auth_strategy=None):
        super().__init__()
        self.auth_strategy = auth_strategy

    def _setUp(self):
        import memcanal.conf  # noqa: F401  (registers every option)
        self.conf = cfg.CONF
        self.conf([], project='memcanal', default_config_files=[])
        self.addCleanup(self.conf.reset)
        self.addCleanup(policy.reset)
        if self.auth_strategy is not None:
            self.conf.set_override('auth_strategy', self.auth_strategy,
                                   'api')
