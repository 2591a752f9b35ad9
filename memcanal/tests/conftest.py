"""pytest fixtures wrapping memcanal.tests.fixtures for every test."""

import tempfile

import pytest

from memcanal.tests import fixtures as memcanal_fixtures

# nova's own process runs these (tools/run-tests.sh, in .venv-nova): nova
# must be imported before memcanal there.
collect_ignore = ['nova_functional']


def use_fixture(fixture):
    fixture.setUp()
    try:
        yield fixture
    finally:
        fixture.cleanUp()


@pytest.fixture
def conf():
    """The global CONF, parsed from no files, reset after the test."""
    yield from (f.conf for f in use_fixture(memcanal_fixtures.ConfFixture()))


@pytest.fixture
def database():
    """memcanal.db.api on a private in-memory SQLite schema."""
    yield from use_fixture(memcanal_fixtures.Database())


@pytest.fixture
def short_tmp_path():
    """A temporary directory with a short path: Unix socket paths have at
    most 107 bytes, and pytest's tmp_path can be longer."""
    with tempfile.TemporaryDirectory(prefix='mc-') as path:
        yield path
