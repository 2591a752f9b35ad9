"""Running memcanal's REST API under a WSGI server.

``memcanal.wsgi.api`` is the module servers import; ``init_application``
here does the work, so it can be called (and tested) on its own.
"""

import os

from oslo_log import log as logging

from memcanal.api import deploy
from memcanal import conf as memcanal_conf
from memcanal import notifications

CONFIG_FILES_ENV = 'OS_MEMCANAL_CONFIG_FILES'
DEFAULT_CONFIG_FILE = '/etc/memcanal/memcanal.conf'

LOG = logging.getLogger(__name__)
# The versioned notifications' publisher id: memcanal-api:<host>.
SOURCE = 'memcanal-api'


def config_files(environ=None):
    """The config files to read: $OS_MEMCANAL_CONFIG_FILES, else the default.

    The variable holds paths separated by ';' (as nova's does). Without
    it, /etc/memcanal/memcanal.conf is read if it exists; a WSGI server
    passes no command line to take --config-file from.
    """
    environ = os.environ if environ is None else environ
    listed = environ.get(CONFIG_FILES_ENV, '').strip()
    if listed:
        return [path.strip() for path in listed.split(';') if path.strip()]
    if os.path.exists(DEFAULT_CONFIG_FILE):
        return [DEFAULT_CONFIG_FILE]
    return []


def init_application(conf=None, environ=None):
    """Parse the configuration, set up logging, build the API app.

    ``conf`` is the global CONF by default: memcanal registers every
    option there (oslo.messaging insists on it). A missing file named in
    the environment, or a bad value, raises here, so the WSGI server
    fails to start instead of answering 500s.
    """
    conf = memcanal_conf.CONF if conf is None else conf
    logging.register_options(conf)
    conf([], project='memcanal',
         default_config_files=config_files(environ))
    logging.setup(conf, 'memcanal')
    conf.log_opt_values(LOG, logging.DEBUG)
    # Operators approve, reject and roll back decisions here.
    notifications.init(conf, SOURCE)
    return deploy.loadapp(conf)
