import pytest

from memcanal.tests.functional import services


@pytest.fixture
def mysql_url():
    yield from services.mysql_database()


@pytest.fixture
def postgres_url():
    yield from services.postgres_database()


@pytest.fixture(params=['sqlite', 'mysql', 'postgresql'])
def any_db_url(request, tmp_path):
    """Each real database in turn: SQLite file, MariaDB, PostgreSQL."""
    if request.param == 'sqlite':
        yield 'sqlite:///%s' % (tmp_path / 'memcanal.sqlite')
    elif request.param == 'mysql':
        yield from services.mysql_database()
    else:
        yield from services.postgres_database()


@pytest.fixture
def rabbit_url():
    return services.require_rabbit()
