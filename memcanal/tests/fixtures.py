"""Test fixtures shared by unit and functional tests."""

import fixtures
from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import orm

from memcanal.db import api as db_api
from memcanal.db import models


class Database(fixtures.Fixture):
    """A fresh schema on ``url`` (default: private in-memory SQLite).

    Points memcanal.db.api at it for the test's duration and drops
    everything afterwards.
    """

    def __init__(self, url='sqlite://'):
        super().__init__()
        self.url = url

    def _setUp(self):
        # oslo.db's engine, so its exception filters (DBDuplicateEntry...)
        # apply as they do in production.
        self.engine = engines.create_engine(self.url)
        models.Base.metadata.create_all(self.engine)
        self.addCleanup(self.engine.dispose)
        self.addCleanup(models.Base.metadata.drop_all, self.engine)
        factory = enginefacade._TestTransactionFactory(
            self.engine, orm.get_maker(engine=self.engine),
            apply_global=False)
        self.addCleanup(db_api.context_manager.patch_factory(factory))


class ConfFixture(fixtures.Fixture):
    """Parses no files into the global CONF and resets it afterwards."""

    def _setUp(self):
        import memcanal.conf  # noqa: F401  (registers every option)
        self.conf = cfg.CONF
        self.conf([], project='memcanal', default_config_files=[])
        self.addCleanup(self.conf.reset)
