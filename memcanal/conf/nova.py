"""Options of nova: how the service reaches nova's API to live-migrate
VMs (memcanal.service.nova_migration). keystoneauth1's session, auth and
adapter options, as nova's own [placement] group has them; openstacksdk
reads the adapter options of this group, named after nova, itself."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

SERVICE_TYPE = 'compute'

nova_group = cfg.OptGroup(
    'nova', title='nova options',
    help='How the service reaches nova\'s API to live-migrate the VMs its '
         'decisions move.')

def _adapter_opts():
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(opts, service_type=SERVICE_TYPE,
                     valid_interfaces=['internal', 'public'])
    return opts


def register_opts(conf):
    conf.register_group(nova_group)
    ks_loading.register_session_conf_options(conf, nova_group.name)
    ks_loading.register_auth_conf_options(conf, nova_group.name)
    conf.register_opts(_adapter_opts(), group=nova_group)


def list_opts():
    return {nova_group: (
        ks_loading.get_session_conf_options()
        + ks_loading.get_auth_common_conf_options()
        + ks_loading.get_auth_plugin_conf_options('password')
        + _adapter_opts())}
