"""WSGI entry point of the REST API: ``memcanal.wsgi.api:application``.

For uwsgi (``--module memcanal.wsgi.api:application``), gunicorn
(``gunicorn memcanal.wsgi.api:application``) or mod_wsgi (a script doing
``from memcanal.wsgi.api import application``). The application is built
when this module is first imported, reading the config files from
$OS_MEMCANAL_CONFIG_FILES or /etc/memcanal/memcanal.conf.
"""

from memcanal import wsgi

# Python's import lock runs this once even when a server imports the
# module from several threads at the same time.
application = wsgi.init_application()
