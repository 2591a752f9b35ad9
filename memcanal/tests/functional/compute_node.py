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

- keystone (tools/keystone.sh) in front of every API, each service
  reaching the others as its user of the ``service`` project, found in
  keystone's catalog, as devstack sets them up (compute_node_conf.py).

What stands in, and why (doc/deployment.md says the same):
- no neutron (``networks: none``): nova still asks it for ports and
  security groups, so a small HTTP stand-in answers empty lists;
- ``vm.unprivileged_userfaultfd = 1`` while the node runs, in place of
  ``/dev/userfaultfd`` in qemu.conf's ``cgroup_device_acl``, which would
  change this machine's libvirt for good.
"""

import concurrent.futures
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

from memcanal.tests.functional import compute_node_conf as node_conf
from memcanal.tests.functional import services

NOVA_VENV = node_conf.NOVA_VENV
GLANCE_VENV = node_conf.GLANCE_VENV
MEMCANAL_BIN = pathlib.Path(sys.executable).parent
WRAPPER = node_conf.TOP / 'hypervisor-patches' / 'pager' / 'memcanal-qemu'
# nova's host and node name, memcanal's host name: the machine's.
HOST = socket.gethostname()
NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/'
NOVA_MICROVERSION = {'OpenStack-API-Version': 'compute 2.90',
                     'X-OpenStack-Nova-API-Version': '2.90'}
write = node_conf.write


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


def run_at_once(log, chains):
    """Run each chain of setup commands in its order, the chains side by
    side; fail the test with the output of the first that fails."""
    with concurrent.futures.ThreadPoolExecutor(len(chains)) as pool:
        for done in [pool.submit(lambda chain=chain: [
                run(command, log) for command in chain])
                for chain in chains]:
            done.result()


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
        """Start ``command`` as ``name``; with a ``port``, wait until it
        answers HTTP there."""
        log = open(self.directory / ('%s.log' % name), 'ab')
        process = subprocess.Popen(
            [str(part) for part in command], stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, **(env or {})), cwd=self.directory)
        self.running[name] = process
        if port is not None:
            self.wait_listening(name, port, seconds)
        return process

    def wait_listening(self, name, port, seconds=90):
        process = self.running[name]

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
    and its APIs, as keystone's admin (``session``: keystoneauth's)."""

    def __init__(self, directory, processes, urls, memcanal_database,
                 session):
        self.directory = pathlib.Path(directory)
        self.processes = processes
        self.urls = urls
        self.memcanal_database = memcanal_database
        self.session = session

    def request(self, service, method, path, headers=(), **kwargs):
        """``method`` on the node's ``service`` with the admin's token:
        the response."""
        return requests.request(
            method, self.urls[service] + path, timeout=60,
            headers=dict(headers, **{
                'X-Auth-Token': self.session.get_token()}), **kwargs)

    def _json(self, service, method, path, **kwargs):
        response = self.request(service, method, path, **kwargs)
        if response.status_code >= 400:
            raise AssertionError('%s %s %s: %d %s' % (
                service, method, path, response.status_code, response.text))
        return response.json() if response.content else None

    def nova(self, method, path, **kwargs):
        return self._json('nova', method, '/v2.1' + path,
                          headers=NOVA_MICROVERSION, **kwargs)

    def glance(self, method, path, **kwargs):
        return self._json('glance', method, path, **kwargs)

    def placement(self, method, path, **kwargs):
        return self._json('placement', method, path, headers={
            'OpenStack-API-Version': 'placement 1.39'}, **kwargs)

    def memcanal_request(self, method, path, **kwargs):
        """memcanal's API, latest microversion: the response."""
        return self.request('memcanal', method, path, headers={
            'OpenStack-API-Version': 'memcanal 1.10'}, **kwargs)

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
            return self.request('nova', 'GET', '/v2.1/servers/%s' % (
                server_id), headers=NOVA_MICROVERSION).status_code == 404
        services.wait_for(gone, 60, 'server %s to be deleted' % server_id)

    def memory_inventory(self):
        [provider] = self.placement('GET', '/resource_providers')[
            'resource_providers']
        return self.placement('GET', '/resource_providers/%s/inventories/'
                              'MEMORY_MB' % provider['uuid'])

    def console_log(self, server_id):
        path = self.directory / 'instances' / server_id / 'console.log'
        return path.read_text(errors='replace') if path.exists() else ''


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
        dbs = databases(stack, ['keystone', 'placement', 'nova_api',
                                'nova_cell0', 'nova', 'glance', 'memcanal'])
        processes = Processes(directory)
        # Kept for a look after the run, when asked.
        keep = os.environ.get('MEMCANAL_NODE_LOGS')
        if keep:
            stack.callback(shutil.copytree, directory, keep,
                           ignore=shutil.ignore_patterns(
                               'build', 'glance', 'pagers', '*.sock',
                               '*.ctl', '*.key', 'fernet-keys',
                               'credential-keys'), dirs_exist_ok=True)
        stack.callback(processes.stop_all)
        urls = {'neutron': stack.enter_context(neutron_stand_in())}
        for name in ('keystone', 'placement', 'glance', 'nova', 'memcanal'):
            urls[name] = 'http://127.0.0.1:%d' % services.free_port()
        port = {name: int(url.rsplit(':', 1)[1])
                for name, url in urls.items()}
        gunicorn = NOVA_VENV / 'bin' / 'gunicorn'
        # keystone sets itself up (database, keys, bootstrap) while the
        # others' databases are made.
        processes.start('keystone', [
            'bash', services.KEYSTONE_SCRIPT, 'serve',
            directory / 'keystone', port['keystone'], dbs['keystone']], env={
                'KEYSTONE_VENV': services.KEYSTONE_VENV,
                'KEYSTONE_ADMIN_PASSWORD': services.KEYSTONE_ADMIN_PASSWORD})
        urls['keystone'] += '/v3'

        placement_dir = node_conf.placement_conf(directory, dbs,
                                                 urls['keystone'])
        glance_dir = node_conf.glance_conf(directory, dbs, urls['keystone'])
        for made in ('instances', 'nova-state', 'lock'):
            (directory / made).mkdir()
        conf = node_conf.nova_conf(directory, dbs, urls, reserved_mb)
        node_conf.nova_api_files(directory)
        config = memcanal_conf(urls, dbs['memcanal'])
        manage = [NOVA_VENV / 'bin' / 'nova-manage', '--config-file', conf]
        # Every service's schema at once, nova's steps in their order.
        run_at_once(log, [
            [[NOVA_VENV / 'bin' / 'placement-manage', '--config-file',
              placement_dir / 'placement.conf', 'db', 'sync']],
            [[GLANCE_VENV / 'bin' / 'glance-manage', '--config-file',
              glance_dir / 'glance-api.conf', 'db_sync']],
            [[MEMCANAL_BIN / 'memcanal-manage', '--config-file', config,
              'db', 'sync']],
            [manage + ['api_db', 'sync'],
             manage + ['cell_v2', 'map_cell0', '--database_connection',
                       dbs['nova_cell0']],
             manage + ['db', 'sync'],
             manage + ['cell_v2', 'create_cell', '--name', 'cell1',
                       '--database_connection', dbs['nova'],
                       '--transport-url', services.RABBIT_URL]]])
        processes.wait_listening('keystone', port['keystone'], 120)
        session = node_conf.register(urls['keystone'], urls)

        # The APIs load at once; nova's services start once placement
        # answers (nova-compute makes its resource provider as it starts).
        nova_env = {'OS_NOVA_CONFIG_DIR': str(directory),
                    'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf'}
        apis = {
            'placement': ([gunicorn, 'placement.wsgi.api:application'],
                          {'OS_PLACEMENT_CONFIG_DIR': str(placement_dir)}),
            'glance': ([GLANCE_VENV / 'bin' / 'gunicorn',
                        'glance.wsgi.api:application'],
                       {'OS_GLANCE_CONFIG_DIR': str(glance_dir)}),
            'memcanal': ([gunicorn, 'memcanal.wsgi.api:application'],
                         {'OS_MEMCANAL_CONFIG_FILES': str(config)}),
            'nova': ([gunicorn, '--chdir', directory,
                      'nova_api_wsgi:application'], nova_env)}
        for name, (command, env) in apis.items():
            processes.start(name + '-api', command[:1] + [
                '-w', '1', '-b', '127.0.0.1:%d' % port[name]] + command[1:],
                env=env)
        for name in apis:
            processes.wait_listening(name + '-api', port[name])
        for name in ('service', 'agent'):
            processes.start('memcanal-' + name, [
                MEMCANAL_BIN / ('memcanal-' + name), '--config-file',
                config])
        for name in ('conductor', 'scheduler', 'compute'):
            processes.start('nova-' + name, [
                NOVA_VENV / 'bin' / ('nova-' + name), '--config-file',
                conf])

        node = Node(directory, processes, urls, dbs['memcanal'], session)

        def compute_up():
            if processes.running['nova-compute'].poll() is not None:
                raise AssertionError('nova-compute exited')
            services_list = node.nova(
                'GET', '/os-services?binary=nova-compute')['services']
            return any(service['state'] == 'up'
                       for service in services_list)
        try:
            services.wait_for(compute_up, 90, 'nova-compute to report up')
        except BaseException:
            print(processes.tails())
            raise
        run(manage + ['cell_v2', 'discover_hosts', '--verbose'], log)

        # MemCanalFilter refuses a host memcanal knows no capacity of yet:
        # boots wait for the agent's reports, as on a node in service.
        def memcanal_knows_the_node():
            return any(host['name'] == HOST and host['state'] == 'up'
                       and host['capacity_bytes']
                       for host in node.memcanal('/hosts')['hosts'])
        services.wait_for(memcanal_knows_the_node, 60,
                          'memcanal to measure the node')
        yield node
