"""Options of nova: how the service reaches nova's API to live-migrate
VMs (memcanal.service.nova_migration). keystoneauth1's session, auth and
adapter options, as nova's own [placement] group has them; openstacksdk
reads the adapter options of this group, named after nova, itself."""

from oslo_config import cfg

from memcanal.conf import ksa

SERVICE_TYPE = 'compute'

nova_group = cfg.OptGroup(
    'nova', title='nova options',
    help='How the service reaches nova\'s API to live-migrate the VMs its '
         'decisions move.')


def register_opts(conf):
    conf.register_group(nova_group)
    ksa.register_opts(conf, nova_group, SERVICE_TYPE)


def list_opts():
    return {nova_group: ksa.list_opts(SERVICE_TYPE)}
