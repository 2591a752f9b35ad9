"""A nova compute node as devstack would make one, for
test_nova_compute.py: every piece real, from pip's and Debian's packages.

- nova 34 (tools/install-nova.sh's venv): nova-api under gunicorn,
  nova-conductor, nova-scheduler with memcanal's filter and weigher, and
  nova-compute with nova's own libvirt driver (``virt_type = qemu``)
  against the host's libvirtd; placement 16 under gunicorn; glance 33
  with a file store under gunicorn (tools/install-compute-node.sh's
  venv); MariaDB for every database, RabbitMQ for nova's and memcanal's
  messages;
- libvirtd restarted with memcanal's QEMU wrapper first on its PATH
  (hypervisor-patches/pager/memcanal-qemu, doc/deployment.md), so the
  guests nova boots get shared RAM and the shim, with no XML of ours;
- memcanal: the API (gunicorn), memcanal-service and memcanal-agent
  (libvirt driver, sampling on) as processes, configured as
  doc/deployment.md tells an operator.

What stands in, and why (doc/deployment.md says the same):
- no keystone: nova's API pipeline without ``authtoken`` (nova 34 has
  no noauth2; its context comes from ``X-User-Id``/``X-Project-Id``/
  ``X-Roles`` headers), placement and memcanal with ``noauth2``, glance
  with its unauthenticated pipeline;
- no neutron (``networks: none``): nova still asks it for ports and
  security groups, so a small HTTP stand-in answers empty lists;
- ``vm.unprivileged_userfaultfd = 1`` while the node runs, in place of
  ``/dev/userfaultfd`` in qemu.conf's ``cgroup_device_acl``, which would
  change this machine's libvirt for good.
"""

import contextlib
import http.server
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import requests

from memcanal.tests.functional import services

TOP = pathlib.Path(__file__).resolve().parents[3]
NOVA_VENV = pathlib.Path(os.environ.get('MEMCANAL_NOVA_VENV',
                                        TOP / '.venv-nova'))
GLANCE_VENV = pathlib.Path(os.environ.get('MEMCANAL_GLANCE_VENV',
                                          TOP / '.venv-glance'))
MEMCANAL_BIN = pathlib.Path(sys.executable).parent
WRAPPER = TOP / 'hypervisor-patches' / 'pager' / 'memcanal-qemu'
# nova's host and node name, memcanal's host name: the machine's.
HOST = socket.gethostname()
NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/'
# What keystone's middleware would give nova for an admin: nova writes a
# domain's owner (which memcanal reports as the VM's project) only with
# the names as well as the ids.
NOVA_HEADERS = {'X-Auth-Token': 'admin', 'X-User-Id': 'admin',
                'X-User-Name': 'admin', 'X-Project-Id': 'admin',
                'X-Project-Name': 'admin', 'X-Roles': 'admin,member,reader',
                'OpenStack-API-Version': 'compute 2.90',
                'X-OpenStack-Nova-API-Version': '2.90'}
ENABLED_FILTERS = ('ComputeFilter', 'ComputeCapabilitiesFilter',
                   'ImagePropertiesFilter', 'MemCanalFilter')


def write(path, text):
    path = pathlib.Path(path)
    path.write_text(text)
    return path


def run(command, log, **popen):
    """Run a setup command to its end; fail the test with its output."""
    done = subprocess.run([str(part) for part in command],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **popen)
    with open(log, 'a') as out:
        out.write('$ %s\n%s' % (' '.join(map(str, command)), done.stdout))
    if done.returncode:
        raise AssertionError('%s failed:\n%s' % (command[0], done.stdout))
    return done.stdout


class NeutronStandIn(http.server.BaseHTTPRequestHandler):
    """Neutron's API, with nothing in it: nova lists a server's ports and
    security groups even with ``networks: none``."""

    def do_GET(self):
        path = self.path.split('?')[0].rstrip('/')
        resource = path.rsplit('/', 1)[-1].replace('-', '_')
        if resource.endswith('.json'):
            resource = resource[:-len('.json')]
        body = json.dumps({resource: []}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def neutron_stand_in():
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                             NeutronStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % server.server_address[1]
    finally:
        server.shutdown()


@contextlib.contextmanager
def unprivileged_userfaultfd():
    path = '/proc/sys/vm/unprivileged_userfaultfd'
    previous = pathlib.Path(path).read_text().strip()
    write(path, '1')
    try:
        yield
    finally:
        write(path, previous)


def remove_nova_domains():
    """Destroy and undefine every domain nova made (its metadata says
    so): what a node that stopped leaves behind, which a new
    nova-compute on an empty database refuses to start beside."""
    import libvirt
    connection = libvirt.open('qemu:///system')
    try:
        for domain in connection.listAllDomains(0):
            if NOVA_NS not in domain.XMLDesc(0):
                continue
            if domain.isActive():
                domain.destroy()
            domain.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    finally:
        connection.close()


def _libvirtd(env):
    """(Re)start the system libvirtd with ``env``, as install-libvirt.sh
    starts it; wait for its socket."""
    subprocess.run(['pkill', '-x', 'libvirtd'])
    for _ in range(100):
        if subprocess.run(['pgrep', '-x', 'libvirtd'],
                          capture_output=True).returncode:
            break
        time.sleep(0.1)
    subprocess.run(['libvirtd', '-d'], env=env, check=True)
    services.wait_for(lambda: os.path.exists('/run/libvirt/libvirt-sock'),
                      30, 'libvirtd\'s socket')
    time.sleep(0.5)


@contextlib.contextmanager
def libvirtd_with_wrapper(directory, shim, socket_dir):
    """libvirtd running with memcanal's QEMU wrapper first on its PATH
    (what the devstack plugin's systemd drop-in gives it), configured
    with ``shim`` and ``socket_dir``; restarted as it was after."""
    wrapper_dir = pathlib.Path(directory) / 'qemu-wrapper'
    wrapper_dir.mkdir(mode=0o755)
    shutil.copy(WRAPPER, wrapper_dir / 'qemu-system-x86_64')
    os.chmod(wrapper_dir / 'qemu-system-x86_64', 0o755)
    write(wrapper_dir / 'memcanal-qemu.conf',
          'QEMU=%s\nSHIM=%s\nSOCKET_DIR=%s\n' % (
              shutil.which('qemu-system-x86_64'), shim, socket_dir))
    os.chmod(wrapper_dir / 'memcanal-qemu.conf', 0o644)
    env = dict(os.environ, PATH='%s:%s' % (wrapper_dir,
                                           os.environ['PATH']))
    _libvirtd(env)
    try:
        yield wrapper_dir
    finally:
        _libvirtd(dict(os.environ))


class Processes:
    """The node's long-running processes, each in its own session with
    its output in ``<directory>/<name>.log``; stopped in reverse."""

    def __init__(self, directory):
        self.directory = pathlib.Path(directory)
        self.running = {}

    def start(self, name, command, port=None, env=None, seconds=90):
        log = open(self.directory / ('%s.log' % name), 'ab')
        process = subprocess.Popen(
            [str(part) for part in command], stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, **(env or {})), cwd=self.directory)
        self.running[name] = process
        if port is not None:
            def listening():
                if process.poll() is not None:
                    raise AssertionError('%s exited:\n%s' % (
                        name, self.log(name)))
                # gunicorn listens before its worker has loaded the
                # application: the first answer may take a while.
                try:
                    requests.get('http://127.0.0.1:%d/' % port, timeout=60)
                    return True
                except requests.ConnectionError:
                    return False
            services.wait_for(listening, seconds, '%s to listen' % name)
        return process

    def log(self, name):
        return (self.directory / ('%s.log' % name)).read_text(
            errors='replace')

    def tails(self, lines=25):
        """The last lines of every process's log: why a node did not
        come up, or what a failed test saw."""
        return '\n'.join('--- %s\n%s' % (name, '\n'.join(
            self.log(name).splitlines()[-lines:])) for name in self.running)

    def stop_all(self, seconds=10):
        """SIGTERM to every process group at once; SIGKILL to those still
        there ``seconds`` later (the node is thrown away: nothing waits
        for a graceful end)."""
        for process in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + seconds
        for process in self.running.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.running.clear()


def databases(stack, names):
    """A fresh MariaDB database per name: {name: URL}."""
    return {name: stack.enter_context(contextlib.contextmanager(
        services.mysql_database)()) for name in names}


class Node:
    """What the running node offers a test: its endpoints, its processes
    and nova's API, as an admin without keystone."""

    def __init__(self, directory, processes, urls, memcanal_database):
        self.directory = pathlib.Path(directory)
        self.processes = processes
        self.urls = urls
        self.memcanal_database = memcanal_database

    def nova(self, method, path, **kwargs):
        response = requests.request(
            method, self.urls['nova'] + '/v2.1' + path,
            headers=NOVA_HEADERS, timeout=60, **kwargs)
        if response.status_code >= 400:
            raise AssertionError('nova %s %s: %d %s' % (
                method, path, response.status_code, response.text))
        return response.json() if response.content else None

    def glance(self, method, path, **kwargs):
        response = requests.request(method, self.urls['glance'] + path,
                                    timeout=60, **kwargs)
        if response.status_code >= 400:
            raise AssertionError('glance %s %s: %d %s' % (
                method, path, response.status_code, response.text))
        return response.json() if response.content else None

    def memcanal_request(self, method, path, **kwargs):
        """memcanal's API as its admin (noauth2), latest microversion:
        the response."""
        return requests.request(
            method, self.urls['memcanal'] + path, timeout=30,
            headers={'X-Auth-Token': 'admin',
                     'OpenStack-API-Version': 'memcanal 1.6'}, **kwargs)

    def memcanal(self, path):
        response = self.memcanal_request('GET', path)
        assert response.status_code == 200, response.text
        return response.json()

    def image(self, name, disk_format, data, **properties):
        """An image in glance of ``data`` (bytes): its id."""
        image = self.glance('POST', '/v2/images', json=dict(
            name=name, disk_format=disk_format,
            container_format=disk_format if disk_format in (
                'aki', 'ari', 'ami') else 'bare', **properties))
        self.glance('PUT', '/v2/images/%s/file' % image['id'], data=data,
                    headers={'Content-Type': 'application/octet-stream'})
        return image['id']

    def flavor(self, name, ram_mb):
        return self.nova('POST', '/flavors', json={'flavor': {
            'name': name, 'ram': ram_mb, 'vcpus': 1, 'disk': 0}})[
                'flavor']['id']

    def boot(self, name, image, flavor):
        """POST /servers, no network; the server as nova first answers."""
        return self.nova('POST', '/servers', json={'server': {
            'name': name, 'imageRef': image, 'flavorRef': flavor,
            'networks': 'none'}})['server']

    def server(self, server_id):
        return self.nova('GET', '/servers/%s' % server_id)['server']

    def wait_server(self, server_id, states, seconds=120):
        """The server once its status is one of ``states``."""
        def settled():
            server = self.server(server_id)
            return server['status'] in states and server
        return services.wait_for(settled, seconds, 'server %s to be %s' % (
            server_id, '/'.join(states)))

    def delete(self, server_id):
        self.nova('DELETE', '/servers/%s' % server_id)

        def gone():
            response = requests.get(
                self.urls['nova'] + '/v2.1/servers/%s' % server_id,
                headers=NOVA_HEADERS, timeout=30)
            return response.status_code == 404
        services.wait_for(gone, 60, 'server %s to be deleted' % server_id)

    def placement(self, method, path, **kwargs):
        response = requests.request(
            method, self.urls['placement'] + path, timeout=30,
            headers={'X-Auth-Token': 'admin',
                     'OpenStack-API-Version': 'placement 1.39'}, **kwargs)
        assert response.status_code < 400, response.text
        return response.json() if response.content else None

    def memory_inventory(self):
        [provider] = self.placement('GET', '/resource_providers')[
            'resource_providers']
        return self.placement('GET', '/resource_providers/%s/inventories/'
                              'MEMORY_MB' % provider['uuid'])

    def console_log(self, server_id):
        path = self.directory / 'instances' / server_id / 'console.log'
        return path.read_text(errors='replace') if path.exists() else ''


def admin_token(url):
    """keystoneauth's options of a client of the service at ``url`` that
    takes the token "admin" (noauth2, or the stand-in)."""
    return ('auth_type = admin_token\ntoken = admin\nendpoint = %s\n'
            'endpoint_override = %s\n' % (url, url))


def nova_conf(directory, dbs, urls, reserved_mb):
    """nova.conf of every nova process of the node (one node, so one
    file): the libvirt driver, the databases, placement, glance and
    neutron without keystone, memcanal's filter and weigher."""
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
[placement]
{admin_token(urls['placement'])}[glance]
endpoint_override = {urls['glance']}
[neutron]
{admin_token(urls['neutron'])}[scheduler]
discover_hosts_in_cells_interval = -1
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = memcanal.nova.filters.MemCanalFilter
enabled_filters = {','.join(ENABLED_FILTERS)}
weight_classes = nova.scheduler.weights.all_weighers
weight_classes = memcanal.nova.weighers.MemCanalWeigher
[memcanal]
{admin_token(urls['memcanal'])}cache_seconds = 0
[vnc]
enabled = false
{privsep}""")


def placement_conf(directory, dbs):
    placement_dir = directory / 'placement'
    placement_dir.mkdir()
    write(placement_dir / 'placement.conf', f"""[api]
auth_strategy = noauth2
[placement_database]
connection = {dbs['placement']}
""")
    return placement_dir


def glance_conf(directory, dbs):
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
flavor =
[oslo_policy]
# Its unauthenticated context is an admin without roles, which only
# the legacy policy defaults let add images.
enforce_new_defaults = false
enforce_scope = false
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = {glance_dir}/images
[os_glance_staging_store]
filesystem_store_datadir = {glance_dir}/staging
[os_glance_tasks_store]
filesystem_store_datadir = {glance_dir}/tasks
""")
    return glance_dir


def nova_paste(directory):
    """nova's api-paste.ini with no ``authtoken``: keystonecontext builds
    the request's context from the client's headers."""
    paste = (NOVA_VENV / 'etc' / 'nova' / 'api-paste.ini').read_text()
    lines = []
    for line in paste.splitlines():
        if line.startswith('keystone = ') and 'authtoken' in line:
            line = line.replace(' authtoken', '')
        lines.append(line)
    write(directory / 'api-paste.ini', '\n'.join(lines) + '\n')
    # nova-api reads gunicorn's command line as its own: it gets none.
    write(directory / 'nova_api_wsgi.py',
          'import sys\nsys.argv = ["nova-api"]\n'
          'from nova.wsgi.osapi_compute import application  # noqa\n')


@contextlib.contextmanager
def running_node(directory, reserved_mb, memcanal_conf):
    """The node's services started in ``directory`` (short, 0755: QEMU
    reads the shim there), nova's databases synced and its compute
    registered, memcanal's processes running with ``memcanal_conf(urls,
    memcanal_db)`` (the path of their config file): the Node."""
    directory = pathlib.Path(directory)
    log = directory / 'setup.log'
    remove_nova_domains()
    with contextlib.ExitStack() as stack:
        stack.callback(remove_nova_domains)
        dbs = databases(stack, ['placement', 'nova_api', 'nova_cell0',
                                'nova', 'glance', 'memcanal'])
        processes = Processes(directory)
        # Kept for a look after the run, when asked.
        keep = os.environ.get('MEMCANAL_NODE_LOGS')
        if keep:
            stack.callback(shutil.copytree, directory, keep,
                           ignore=shutil.ignore_patterns(
                               'build', 'glance', 'pagers', '*.sock',
                               '*.ctl', '*.key'), dirs_exist_ok=True)
        stack.callback(processes.stop_all)
        urls = {'neutron': stack.enter_context(neutron_stand_in())}
        for name in ('placement', 'glance', 'nova', 'memcanal'):
            urls[name] = 'http://127.0.0.1:%d' % services.free_port()
        port = {name: int(url.rsplit(':', 1)[1])
                for name, url in urls.items()}
        gunicorn = NOVA_VENV / 'bin' / 'gunicorn'

        placement_dir = placement_conf(directory, dbs)
        run([NOVA_VENV / 'bin' / 'placement-manage', '--config-file',
             placement_dir / 'placement.conf', 'db', 'sync'], log)
        processes.start('placement', [
            gunicorn, '-w', '1', '-b', '127.0.0.1:%d' % port['placement'],
            'placement.wsgi.api:application'], port['placement'],
            env={'OS_PLACEMENT_CONFIG_DIR': str(placement_dir)})

        glance_dir = glance_conf(directory, dbs)
        run([GLANCE_VENV / 'bin' / 'glance-manage', '--config-file',
             glance_dir / 'glance-api.conf', 'db_sync'], log)
        processes.start('glance', [
            GLANCE_VENV / 'bin' / 'gunicorn', '-w', '1', '-b',
            '127.0.0.1:%d' % port['glance'], 'glance.wsgi.api:application'],
            port['glance'], env={'OS_GLANCE_CONFIG_DIR': str(glance_dir)})

        for made in ('instances', 'nova-state', 'lock'):
            (directory / made).mkdir()
        conf = nova_conf(directory, dbs, urls, reserved_mb)
        nova_paste(directory)
        manage = [NOVA_VENV / 'bin' / 'nova-manage', '--config-file', conf]
        run(manage + ['api_db', 'sync'], log)
        run(manage + ['cell_v2', 'map_cell0', '--database_connection',
                      dbs['nova_cell0']], log)
        run(manage + ['db', 'sync'], log)
        run(manage + ['cell_v2', 'create_cell', '--name', 'cell1',
                      '--database_connection', dbs['nova'],
                      '--transport-url', services.RABBIT_URL], log)

        config = memcanal_conf(urls, dbs['memcanal'])
        run([MEMCANAL_BIN / 'memcanal-manage', '--config-file', config,
             'db', 'sync'], log)
        processes.start('memcanal-api', [
            gunicorn, '-w', '1', '-b', '127.0.0.1:%d' % port['memcanal'],
            'memcanal.wsgi.api:application'], port['memcanal'],
            env={'OS_MEMCANAL_CONFIG_FILES': str(config)})
        for name in ('service', 'agent'):
            processes.start('memcanal-' + name, [
                MEMCANAL_BIN / ('memcanal-' + name), '--config-file',
                config])

        nova_env = {'OS_NOVA_CONFIG_DIR': str(directory),
                    'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf'}
        processes.start('nova-api', [
            gunicorn, '-w', '1', '-b', '127.0.0.1:%d' % port['nova'],
            '--chdir', directory, 'nova_api_wsgi:application'],
            port['nova'], env=nova_env)
        for name in ('conductor', 'scheduler', 'compute'):
            processes.start('nova-' + name, [
                NOVA_VENV / 'bin' / ('nova-' + name), '--config-file',
                conf])

        def compute_up():
            if processes.running['nova-compute'].poll() is not None:
                raise AssertionError('nova-compute exited')
            services_list = Node(directory, processes, urls, None).nova(
                'GET', '/os-services?binary=nova-compute')['services']
            return any(service['state'] == 'up'
                       for service in services_list)
        try:
            services.wait_for(compute_up, 90, 'nova-compute to report up')
        except BaseException:
            print(processes.tails())
            raise
        run(manage + ['cell_v2', 'discover_hosts', '--verbose'], log)
        yield Node(directory, processes, urls, dbs['memcanal'])
