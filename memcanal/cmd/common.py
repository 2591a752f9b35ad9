"""Start-up shared by memcanal's console scripts."""

import os
import sys

from oslo_config import cfg
from oslo_log import log as logging

from memcanal import conf as memcanal_conf

CONF = memcanal_conf.CONF


def parse_args(argv, default_config_files=None):
    """Parse the command line and config files into CONF; set up logging."""
    logging.register_options(CONF)
    # alembic narrates every connection at INFO; memcanal-manage and
    # memcanal-aio say what the migrations did themselves, and
    # memcanal-manage's stdout stays parseable.
    logging.set_defaults(default_log_levels=(
        logging.get_default_log_levels() + ['alembic=WARN']))
    CONF(argv[1:], project='memcanal',
         default_config_files=default_config_files)
    logging.setup(CONF, 'memcanal')


def configured(create_service, *args, **kwargs):
    """``create_service(*args, **kwargs)``, or exit with the configuration
    error that stops it (a misspelled policy name, say) in one line."""
    try:
        return create_service(*args, **kwargs)
    except (cfg.ConfigFileValueError, cfg.ConfigFileParseError) as error:
        sys.exit('%s: configuration error: %s' % (
            os.path.basename(sys.argv[0]), error))


def run_service(create_service):
    """Parse arguments; run ``create_service(CONF)`` under oslo.service."""
    from oslo_service import service

    from memcanal import rpc

    parse_args(sys.argv)
    launcher = service.launch(CONF, configured(create_service, CONF),
                              restart_method='mutate')
    try:
        launcher.wait()
    finally:
        rpc.cleanup()
