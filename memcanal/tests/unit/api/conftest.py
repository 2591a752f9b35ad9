import pytest

from memcanal.api import deploy
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data


@pytest.fixture
def conf():
    """The global CONF, parsed from no files, with noauth2."""
    with data.using(memcanal_fixtures.ConfFixture('noauth2')) as fixture:
        yield fixture.conf


@pytest.fixture
def database():
    with data.using(memcanal_fixtures.Database()) as fixture:
        yield fixture


@pytest.fixture
def app(conf, database):
    return deploy.loadapp(conf)


@pytest.fixture
def hosts(database):
    """The seeded cloud (see data.py); {'host-a': uuid, 'host-b': uuid}."""
    return data.seed()


@pytest.fixture
def client(app):
    return base.Client(app)
