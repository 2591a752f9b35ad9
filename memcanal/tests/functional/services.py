"""Where the real services for functional tests are, and how to get them.

tools/run-tests.sh starts RabbitMQ, MariaDB and PostgreSQL and sets
MEMCANAL_REQUIRE_SERVICES=1, so in CI a missing service fails the test.
Run bare, without that variable, a missing service skips the test with
the reason, so unit work stays possible on a laptop.
"""

import os
import socket
import uuid

import pytest
import sqlalchemy as sa

RABBIT_URL = os.environ.get('MEMCANAL_TEST_RABBIT_URL',
                            'rabbit://guest:guest@127.0.0.1:5672/')
MYSQL_ADMIN_URL = os.environ.get('MEMCANAL_TEST_MYSQL_URL',
                                 'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRES_ADMIN_URL = os.environ.get(
    'MEMCANAL_TEST_POSTGRES_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres')


def require(host, port, what):
    """Skip (or, under MEMCANAL_REQUIRE_SERVICES, fail) if nothing listens."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as err:
        message = '%s is not reachable on %s:%d: %s' % (what, host, port,
                                                        err)
        if os.environ.get('MEMCANAL_REQUIRE_SERVICES'):
            pytest.fail(message)
        pytest.skip(message)


def require_rabbit():
    require('127.0.0.1', 5672, 'RabbitMQ')
    return RABBIT_URL


def _scratch_database(admin_url, port, what, quote):
    """Create a uniquely named empty database; yield its URL; drop it."""
    require('127.0.0.1', port, what)
    name = 'memcanal_test_%s' % uuid.uuid4().hex[:12]
    admin = sa.create_engine(admin_url, isolation_level='AUTOCOMMIT')
    with admin.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE %s' % quote(name)))
    url = sa.engine.make_url(admin_url).set(database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text('DROP DATABASE IF EXISTS %s' % quote(name)))
        admin.dispose()


def mysql_database():
    yield from _scratch_database(MYSQL_ADMIN_URL, 3306, 'MariaDB',
                                 lambda name: '`%s`' % name)


def postgres_database():
    yield from _scratch_database(POSTGRES_ADMIN_URL, 5432, 'PostgreSQL',
                                 lambda name: '"%s"' % name)
