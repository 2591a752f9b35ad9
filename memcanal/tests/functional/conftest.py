from keystoneauth1 import loading as ks_loading
import pytest

from memcanal.tests.functional import cloud
from memcanal.tests.functional import services


@pytest.fixture
def mysql_url():
    yield from services.mysql_database()


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


@pytest.fixture(scope='session')
def keystone_url(tmp_path_factory):
    """A real keystone, one for the session (starting one takes 15-30 s);
    its v3 URL. Modules share it: each makes what it needs under names
    of its own, and removes what the next would trip on (cloud.py's
    catalog entries)."""
    yield from services.keystone(tmp_path_factory.mktemp('keystone'))


@pytest.fixture
def keystone_conf(conf, tmp_path):
    """``configure(url)`` points CONF's API at keystone ``url``.

    memcanal authenticates to keystone as the bootstrap admin with the
    password plugin. Loading that plugin registers its options, auth_url
    among them, required, on the global CONF; they are unregistered
    afterwards, or every later test parsing CONF without them would fail.
    """
    def configure(url, admin_password):
        conf.clear_override('auth_strategy', 'api')
        cloud.configure_keystone_auth(conf, tmp_path, url, admin_password)
        return conf
    yield configure
    conf.reset()
    conf.unregister_opts(
        ks_loading.get_auth_plugin_conf_options('password'),
        group='keystone_authtoken')
