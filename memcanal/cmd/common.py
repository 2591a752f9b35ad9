"""Start-up shared by memcanal's console scripts."""

import sys

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


def run_service(create_service):
    """Parse arguments; run ``create_service(CONF)`` under oslo.service."""
    from oslo_service import service

    from memcanal import rpc

    parse_args(sys.argv)
    launcher = service.launch(CONF, create_service(CONF),
                              restart_method='mutate')
    try:
        launcher.wait()
    finally:
        rpc.cleanup()
