"""Database options: oslo.db's, with an embedded SQLite default."""

from oslo_db import options as oslo_db_options

DEFAULT_CONNECTION = 'sqlite:////var/lib/memcanal/memcanal.sqlite'


def register_opts(conf):
    oslo_db_options.set_defaults(conf, connection=DEFAULT_CONNECTION)


def list_opts():
    return {'database': oslo_db_options.database_opts}
