from keystoneauth1 import loading as ks_loading
import pytest

from memcanal.tests.functional import cloud
from memcanal.tests.functional import services

# The modules whose tests use the host's libvirtd: nova's compute node
# restarts it and takes every domain it finds for its own, so under
# pytest-xdist (tools/run-tests.sh) they run on one worker, one after
# another.
SHARE_LIBVIRTD = frozenset([
    'test_handoff_attacks', 'test_libvirt', 'test_libvirt_paging',
    'test_libvirt_sampling', 'test_nova_compute', 'test_paging_carriers'])
# The longest groups first (minutes in a serial run), so that neither
# worker is left with a long one at the end: xdist hands out the groups
# in this order with --no-loadscope-reorder.
LONGEST_FIRST = ('libvirtd', 'test_agent_paging', 'test_aio',
                 'test_memtrace', 'test_guest_paging', 'test_tempest',
                 'test_xen', 'test_faults', 'test_osc')


def xdist_group(item):
    """The worker group of a functional test: its module's, or
    ``libvirtd``."""
    module = item.module.__name__.rsplit('.', 1)[-1]
    return 'libvirtd' if module in SHARE_LIBVIRTD else module


def pytest_collection_modifyitems(config, items):
    """Each functional module is one xdist group (its module-scoped
    guests boot once), libvirtd's users one between them; the longest
    first, after any other tests."""
    def rank(item):
        if not item.module.__name__.startswith(__package__ + '.'):
            return -1
        group = xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(group))
        return (LONGEST_FIRST.index(group) if group in LONGEST_FIRST
                else len(LONGEST_FIRST))
    items.sort(key=rank)


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
