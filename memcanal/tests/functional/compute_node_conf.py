"""The configuration of compute_node.py's node, as devstack writes it:
every service authenticates with keystone (``authtoken`` in front of
each API, keystoneauth's password options for each service reaching
another, as a user of the ``service`` project with the admin role) and
finds the others in keystone's catalog.
"""

import os
import pathlib
import shutil

from keystoneclient.v3 import client as ks_client

from memcanal.api import microversion
from memcanal.tests.functional import cloud
from memcanal.tests.functional import services

TOP = pathlib.Path(__file__).resolve().parents[3]
NOVA_VENV = pathlib.Path(os.environ.get('MEMCANAL_NOVA_VENV',
                                        TOP / '.venv-nova'))
GLANCE_VENV = pathlib.Path(os.environ.get('MEMCANAL_GLANCE_VENV',
                                          TOP / '.venv-glance'))
ENABLED_FILTERS = ('ComputeFilter', 'ComputeCapabilitiesFilter',
                   'ImagePropertiesFilter', 'MemCanalFilter')
# devstack's SERVICE_PROJECT_NAME and one password for its service users.
SERVICE_PROJECT = 'service'
SERVICE_PASSWORD = 'memcanal-node'
# The catalog's service types, by the node's name for the service.
CATALOG = {'nova': 'compute', 'placement': 'placement', 'glance': 'image',
           'neutron': 'network', 'memcanal': microversion.SERVICE_TYPE}


def write(path, text):
    path = pathlib.Path(path)
    path.write_text(text)
    return path


def catalog_url(name, url):
    """The endpoint keystone's catalog gives for the node's service."""
    return url + '/v2.1' if name == 'nova' else url


def register(keystone_url, urls):
    """What devstack's ``create_service_user`` and
    ``get_or_create_endpoint`` make: the service project, a user with the
    admin role there for each service, each service's public and internal
    endpoints. The admin's keystoneauth session."""
    session = cloud.admin_session(keystone_url)
    keystone = ks_client.Client(session=session)
    project = keystone.projects.create(SERVICE_PROJECT, 'default')
    [admin_role] = keystone.roles.list(name='admin')
    for name in CATALOG:
        user = keystone.users.create(name, domain='default',
                                     password=SERVICE_PASSWORD)
        keystone.roles.grant(admin_role, user=user, project=project)
    for name, service_type in CATALOG.items():
        service = keystone.services.create(name, service_type)
        for interface in ('public', 'internal'):
            keystone.endpoints.create(service, catalog_url(name, urls[name]),
                                      interface=interface)
    return session


def password_auth(keystone_url, username):
    """keystoneauth's options of a service reaching another as
    ``username`` (devstack's plugin: memcanal_set_auth)."""
    return (f'auth_type = password\nauth_url = {keystone_url}\n'
            f'username = {username}\npassword = {SERVICE_PASSWORD}\n'
            f'user_domain_name = Default\nproject_name = {SERVICE_PROJECT}\n'
            'project_domain_name = Default\n')


def authtoken(keystone_url, username):
    """The ``[keystone_authtoken]`` section of a service's API."""
    return ('[keystone_authtoken]\nwww_authenticate_uri = %s\n%s' % (
        keystone_url, password_auth(keystone_url, username)))


def nova_conf(directory, dbs, urls, reserved_mb):
    """nova.conf of every nova process of the node (one node, so one
    file): the libvirt driver, the databases, keystone, placement and
    glance from its catalog, the neutron stand-in, memcanal's filter and
    weigher."""
    keystone = urls['keystone']
    helper = '%s --config-file %s/nova.conf' % (
        NOVA_VENV / 'bin' / 'privsep-helper', directory)
    privsep = ''.join('[%s]\nhelper_command = %s\n' % (section, helper)
                      for section in ('nova_sys_admin', 'privsep_osbrick',
                                      'vif_plug_ovs',
                                      'vif_plug_linux_bridge'))
    return write(directory / 'nova.conf', f"""[DEFAULT]
my_ip = 127.0.0.1
transport_url = {services.RABBIT_URL}
compute_driver = libvirt.LibvirtDriver
instances_path = {directory}/instances
state_path = {directory}/nova-state
log_dir =
graceful_shutdown_timeout = 5
debug = true
# Flavor size is all placement admits at first; memcanal's overcommit
# decision raises the ratio (nova never rewrites an unset one).
initial_ram_allocation_ratio = 1.0
reserved_host_memory_mb = {reserved_mb}
heal_instance_info_cache_interval = -1
[api_database]
connection = {dbs['nova_api']}
[database]
connection = {dbs['nova']}
[wsgi]
api_paste_config = {directory}/api-paste.ini
[oslo_concurrency]
lock_path = {directory}/lock
[oslo_messaging_notifications]
driver = noop
[libvirt]
virt_type = qemu
connection_uri = qemu:///system
{authtoken(keystone, 'nova')}[placement]
{password_auth(keystone, 'placement')}[neutron]
{password_auth(keystone, 'neutron')}[scheduler]
discover_hosts_in_cells_interval = -1
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = memcanal.nova.filters.MemCanalFilter
enabled_filters = {','.join(ENABLED_FILTERS)}
weight_classes = nova.scheduler.weights.all_weighers
weight_classes = memcanal.nova.weighers.MemCanalWeigher
[memcanal]
{password_auth(keystone, 'nova')}cache_seconds = 0
[vnc]
enabled = false
{privsep}""")


def placement_conf(directory, dbs, keystone_url):
    placement_dir = directory / 'placement'
    placement_dir.mkdir()
    write(placement_dir / 'placement.conf', f"""[api]
auth_strategy = keystone
{authtoken(keystone_url, 'placement')}[placement_database]
connection = {dbs['placement']}
""")
    return placement_dir


def glance_conf(directory, dbs, keystone_url):
    glance_dir = directory / 'glance'
    for store in ('images', 'staging', 'tasks'):
        (glance_dir / store).mkdir(parents=True)
    shutil.copy(GLANCE_VENV / 'etc' / 'glance' / 'glance-api-paste.ini',
                glance_dir)
    write(glance_dir / 'glance-api.conf', f"""[DEFAULT]
enabled_backends = fs:file
[database]
connection = {dbs['glance']}
[paste_deploy]
flavor = keystone
{authtoken(keystone_url, 'glance')}[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = {glance_dir}/images
[os_glance_staging_store]
filesystem_store_datadir = {glance_dir}/staging
[os_glance_tasks_store]
filesystem_store_datadir = {glance_dir}/tasks
""")
    return glance_dir


def nova_api_files(directory):
    """nova's api-paste.ini, as nova ships it, and the module gunicorn
    serves nova-api from."""
    shutil.copy(NOVA_VENV / 'etc' / 'nova' / 'api-paste.ini', directory)
    # nova-api reads gunicorn's command line as its own: it gets none.
    write(directory / 'nova_api_wsgi.py',
          'import sys\nsys.argv = ["nova-api"]\n'
          'from nova.wsgi.osapi_compute import application  # noqa\n')
