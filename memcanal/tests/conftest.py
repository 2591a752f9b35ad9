"""pytest fixtures wrapping memcanal.tests.fixtures for every test."""

import pytest

from memcanal.tests import fixtures as memcanal_fixtures


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
