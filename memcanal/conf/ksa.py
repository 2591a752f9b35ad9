"""keystoneauth1's session, auth and adapter options for a group that
reaches another service, as nova's conf.utils registers them."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg


def adapter_opts(service_type):
    """The adapter options, ``service_type`` and internal-then-public
    endpoints by default."""
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(opts, service_type=service_type,
                     valid_interfaces=['internal', 'public'])
    return opts


def register_opts(conf, group, service_type):
    """Register the session, auth and adapter options on ``group``; the
    auth plugin's own options come when it is loaded."""
    ks_loading.register_session_conf_options(conf, group.name)
    ks_loading.register_auth_conf_options(conf, group.name)
    conf.register_opts(adapter_opts(service_type), group=group)


def list_opts(service_type):
    """The options for the sample config: the password plugin's stand
    for the auth plugin's."""
    return (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + adapter_opts(service_type))
