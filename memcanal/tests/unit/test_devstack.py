"""The devstack plugin (devstack/plugin.sh), run phase by phase in bash
on devstack_stubs.sh: the stubs record the devstack calls the plugin
makes and really edit the INI files, so these tests read back
memcanal.conf and nova.conf as memcanal and nova would."""

import ast
import configparser
import getpass
import grp
import os
import pathlib
import subprocess
import sys
import tempfile

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
import pytest

from memcanal.conf import opts as memcanal_opts
from memcanal.nova import conf as nova_memcanal_conf
from memcanal import wsgi
from memcanal_tempest_plugin import config as tempest_config

HERE = pathlib.Path(__file__).parent
REPO = HERE.parents[2]
PLUGIN_DIR = REPO / 'devstack'
STUBS = HERE / 'devstack_stubs.sh'

STACK = ('stack:pre-install', 'stack:install', 'stack:post-config',
         'stack:extra', 'stack:test-config')
NOVA_FILTERS = ('ComputeFilter,ComputeCapabilitiesFilter,'
                'ImagePropertiesFilter,ServerGroupAntiAffinityFilter,'
                'ServerGroupAffinityFilter,SameHostFilter,'
                'DifferentHostFilter')
# What devstack's lib/nova writes before the plugin's post-config.
NOVA_CONF = """[DEFAULT]
transport_url = rabbit://stackrabbit:secret@127.0.0.1:5672/

[filter_scheduler]
enabled_filters = %s
track_instance_changes = False

[placement]
username = placement
""" % NOVA_FILTERS
KEYSTONE = 'http://192.0.2.10/identity'
API_URL = 'http://192.0.2.10:8793'
NOVA_FILTER = 'memcanal.nova.filters.MemCanalFilter'
NOVA_WEIGHER = 'memcanal.nova.weighers.MemCanalWeigher'

# Each phase's driver: devstack sources settings once, then plugin.sh
# with MODE and PHASE, all in one errexit shell.
DRIVER = """set -o errexit -o pipefail
source "$1"; shift
eval "$STUB_PRELUDE"
source "$PLUGIN_DIR/settings"
for phase in "$@"; do
    stub_record phase "$phase"
    source "$PLUGIN_DIR/plugin.sh" ${phase/:/ }
done
"""


class Stack:
    """One run of the plugin's phases in ``root``: its exit status, its
    recorded calls by phase and the paths of the files it wrote."""

    def __init__(self, root, phases, services='key,mysql,rabbit,n-api,'
                 'n-sch,n-cond,n-cpu,placement-api,tempest',
                 prelude='', nova_conf=NOVA_CONF, **variables):
        self.conf_dir = root / 'etc' / 'memcanal'
        self.conf = self.conf_dir / 'memcanal.conf'
        self.uwsgi_conf = self.conf_dir / 'memcanal-uwsgi.ini'
        self.nova_conf = root / 'nova.conf'
        self.nova_conf.write_text(nova_conf)
        self.tempest_conf = root / 'tempest.conf'
        self.bin_dir = root / 'bin'
        self.state_path = root / 'data' / 'memcanal'
        self.log = root / 'calls.log'
        self.systemd_dir = root / 'systemd'
        # The compute node's files the plugin installs or edits.
        self.lib_dir = root / 'lib' / 'memcanal'
        self.pager_binary = root / 'usr' / 'bin' / 'memcanal-pager'
        self.qemu_conf = root / 'qemu.conf'
        self.qemu_conf.write_text('#user = "root"\n')
        self.udev_dir = root / 'udev'
        self.udev_dir.mkdir()
        self.userfaultfd = root / 'userfaultfd'
        self.userfaultfd.touch()
        self._fake_commands()
        env = dict(
            PATH='%s:%s' % (self.bin_dir, os.environ['PATH']),
            STUB_LOG=str(self.log),
            STUB_BIN_DIR=str(self.bin_dir), STUB_PYTHON=sys.executable,
            STUB_INI=str(HERE / 'devstack_ini.py'), STUB_PRELUDE=prelude,
            PLUGIN_DIR=str(PLUGIN_DIR), ENABLED_SERVICES=services,
            DEST=str(root / 'opt'), DATA_DIR=str(root / 'data'),
            MEMCANAL_DIR=str(REPO), MEMCANAL_CONF_DIR=str(self.conf_dir),
            STACK_USER=getpass.getuser(),
            SERVICE_HOST='192.0.2.10', SERVICE_PROTOCOL='http',
            SERVICE_LISTEN_ADDRESS='0.0.0.0', API_WORKERS='2',
            SERVICE_TIMEOUT='60', REGION_NAME='RegionOne',
            KEYSTONE_SERVICE_URI=KEYSTONE, SERVICE_PASSWORD='secret',
            SERVICE_PROJECT_NAME='service', SERVICE_DOMAIN_NAME='Default',
            DATABASE_PASSWORD='dbsecret', RABBIT_PASSWORD='secret',
            ENABLE_DEBUG_LOG_LEVEL='True', NOVA_CONF=str(self.nova_conf),
            NOVA_FILTERS=NOVA_FILTERS, TEMPEST_CONFIG=str(self.tempest_conf),
            SYSTEMD_DIR=str(self.systemd_dir),
            SYSTEMCTL='stub_record systemctl',
            MEMCANAL_PAGER_BUILD=str(root / 'build'),
            MEMCANAL_LIB_DIR=str(self.lib_dir),
            MEMCANAL_PAGER_BINARY=str(self.pager_binary),
            MEMCANAL_QEMU_CONF=str(self.qemu_conf),
            MEMCANAL_UDEV_RULES_DIR=str(self.udev_dir),
            MEMCANAL_USERFAULTFD_DEVICE=str(self.userfaultfd))
        env.update(variables)
        self.result = subprocess.run(
            ['bash', '-c', DRIVER, 'driver', str(STUBS), *phases],
            env=env, capture_output=True, text=True)
        self.calls = self._calls_by_phase()

    def _fake_commands(self):
        """memcanal-manage, the one command the plugin runs itself,
        uwsgi, which it finds on PATH, and make, which "builds" the
        pager and the shim as empty files in its BUILD."""
        self.bin_dir.mkdir(parents=True)
        for name in ('memcanal-manage', 'uwsgi', 'make'):
            command = self.bin_dir / name
            command.write_text('#!/bin/bash\nIFS=$\'\\t\'\necho '
                               '"${0##*/}"$\'\\t\'"$*" >> "$STUB_LOG"\n')
            command.chmod(0o755)
        with open(self.bin_dir / 'make', 'a') as make:
            make.write('for arg; do [[ $arg == BUILD=* ]] && '
                       'build=${arg#BUILD=}; done\nmkdir -p "$build"\n'
                       'touch "$build/memcanal-pager" '
                       '"$build/libmemcanal-uffd.so"\n')

    def _calls_by_phase(self):
        calls = {}
        phase = None
        text = self.log.read_text() if self.log.exists() else ''
        for line in text.splitlines():
            name, *args = line.split('\t')
            if name == 'phase':
                phase = args[0]
                continue
            calls.setdefault(phase, []).append((name, *args))
        return calls

    def named(self, name, phase=None):
        """The argument tuples of the calls of ``name``."""
        phases = [phase] if phase else list(self.calls)
        return [call[1:] for p in phases for call in self.calls.get(p, [])
                if call[0] == name]


def oslo_ini_values(path):
    """An INI file's sections as oslo.config reads them: repeated options
    keep all their values."""
    sections = {}
    cfg.ConfigParser(str(path), sections).parse()
    return sections


def defines_class(dotted):
    """Whether memcanal's module file defines the class ``dotted`` names,
    read without importing nova."""
    module, _, name = dotted.rpartition('.')
    source = REPO.joinpath(*module.split('.')).with_suffix('.py')
    tree = ast.parse(source.read_text())
    return any(isinstance(node, ast.ClassDef) and node.name == name
               for node in tree.body)


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    """A one-node cloud's stack.sh: nova, keystone and tempest enabled,
    memcanal's services left to the plugin's settings."""
    # Workers differ from API_WORKERS: memcanal's own count must win.
    stacked = Stack(tmp_path_factory.mktemp('devstack'), STACK,
                    MEMCANAL_API_WORKERS='3')
    assert stacked.result.returncode == 0, stacked.result.stderr
    return stacked


@pytest.mark.parametrize('script', [PLUGIN_DIR / 'plugin.sh',
                                    PLUGIN_DIR / 'settings', STUBS])
def test_scripts_parse(script):
    subprocess.run(['bash', '-n', str(script)], check=True)


def test_settings_enable_every_service_when_none_is_named(stack):
    assert stack.named('run_process') == [
        ('memcanal-api', '%s/uwsgi --procname-prefix memcanal --ini %s' % (
            stack.bin_dir, stack.uwsgi_conf)),
        ('memcanal-service', '%s/memcanal-service --config-file %s' % (
            stack.bin_dir, stack.conf)),
        ('memcanal-agent', '%s/memcanal-agent --config-file %s' % (
            stack.bin_dir, stack.conf))]


def test_processes_start_in_extra_after_the_api_answers(stack):
    assert [call[:2] for call in stack.calls['stack:extra']
            if call[0] != 'echo_summary'] == [
        ('run_process', 'memcanal-api'), ('wait_for_service', '60'),
        ('run_process', 'memcanal-service'), ('sudo', 'mkdir'),
        ('run_process', 'memcanal-agent')]
    assert stack.named('wait_for_service') == [('60', API_URL)]


def test_install_develops_memcanal_with_libvirt_bindings(stack):
    assert stack.named('setup_develop') == [(str(REPO), 'libvirt')]
    assert stack.named('setup_develop', 'stack:install')
    # devstack's global venv is nova's too: nothing more to install.
    assert stack.named('pip_install') == []


def test_post_config_creates_and_syncs_the_database(stack):
    post_config = stack.calls['stack:post-config']
    assert ('recreate_database', 'memcanal') in post_config
    sync = ('memcanal-manage', '--config-file', str(stack.conf), 'db',
            'sync')
    assert sync in post_config
    assert (post_config.index(('recreate_database', 'memcanal'))
            < post_config.index(sync))


def test_the_service_signs_with_its_key_and_the_agent_checks_it(stack):
    create_key = ('memcanal-manage', 'service', 'create-key', '--private',
                  str(stack.conf_dir / 'service.key'), '--public',
                  str(stack.conf_dir / 'service.pub'))
    assert create_key in stack.calls['stack:post-config']
    raw = configparser.ConfigParser(interpolation=None)
    raw.read(stack.conf)
    assert (raw['service']['signing_key'],
            raw['agent']['service_public_key']) == (
        create_key[4], create_key[6])
    assert stack.named('warn') == []


def test_an_existing_service_key_is_kept(tmp_path):
    keyed = Stack(tmp_path, ['stack:post-config'],
                  prelude='mkdir -p "$MEMCANAL_CONF_DIR"; '
                          'touch "$MEMCANAL_CONF_DIR/service.key"')
    assert keyed.result.returncode == 0, keyed.result.stderr
    assert [call[2] for call in keyed.named('memcanal-manage')] == ['db']


def test_post_config_registers_the_service_and_its_endpoint(stack):
    assert stack.named('create_service_user', 'stack:post-config') == [
        ('memcanal', 'admin')]
    [(name, service_type, _)] = stack.named('get_or_create_service')
    assert (name, service_type) == ('memcanal',
                                    nova_memcanal_conf.SERVICE_TYPE)
    assert stack.named('get_or_create_endpoint') == [
        ('memcanal', 'RegionOne', API_URL)]


def test_uwsgi_serves_the_wsgi_module_with_memcanal_conf(stack):
    """devstack's write_uwsgi_config, with uwsgi answering HTTP on
    memcanal's own port, then memcanal's workers and config file."""
    [(path, wsgi_module, _, http, name)] = stack.named('write_uwsgi_config')
    assert (path, http, name) == (str(stack.uwsgi_conf), '0.0.0.0:8793',
                                  'memcanal-api')
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(stack.uwsgi_conf)
    uwsgi = parser['uwsgi']
    assert uwsgi['http'] == '0.0.0.0:8793'
    assert uwsgi['processes'] == '3'
    assert uwsgi['env'] == '%s=%s' % (wsgi.CONFIG_FILES_ENV, stack.conf)
    assert uwsgi['module'] == wsgi_module
    module, _, attribute = wsgi_module.partition(':')
    assert module == 'memcanal.wsgi.api'
    tree = ast.parse(REPO.joinpath('memcanal', 'wsgi', 'api.py').read_text())
    assert attribute in {target.id for node in tree.body
                         if isinstance(node, ast.Assign)
                         for target in node.targets}


def test_ipv6_listen_address_is_bracketed(tmp_path):
    ipv6 = Stack(tmp_path, ['stack:post-config'],
                 MEMCANAL_SERVICE_LISTEN_ADDRESS='::')
    assert ipv6.result.returncode == 0, ipv6.result.stderr
    [(_, _, _, http, _)] = ipv6.named('write_uwsgi_config')
    assert http == '[::]:8793'


def test_every_devstack_call_takes_devstack_arguments(stack):
    assert stack.named('wrong_arity') == []


def test_stub_stops_a_call_with_the_wrong_argument_count(tmp_path):
    """The guard the test above relies on."""
    log = tmp_path / 'calls.log'
    result = subprocess.run(
        ['bash', '-c', 'set -o errexit; source "$1"; '
         'iniset "$2" section option; echo reached',
         'driver', str(STUBS), str(tmp_path / 'x.ini')],
        env=dict(os.environ, STUB_LOG=str(log)),
        capture_output=True, text=True)
    assert result.returncode != 0
    assert 'reached' not in result.stdout
    assert log.read_text().startswith('wrong_arity\tiniset\t')


def test_memcanal_conf_reads_as_memcanal_options(stack):
    conf = cfg.ConfigOpts()
    # By group name: registering CONF's own OptGroup objects on another
    # ConfigOpts would add their options to the global CONF too.
    for group, group_opts in memcanal_opts.list_opts():
        name = getattr(group, 'name', group)
        conf.register_opts(group_opts,
                           group=None if name == 'DEFAULT' else name)
    conf(['--config-file', str(stack.conf)])
    assert conf.agent.driver == 'libvirt'
    assert conf.api.auth_strategy == 'keystone'
    assert conf.database.connection == (
        'mysql+pymysql://root:dbsecret@127.0.0.1/memcanal?charset=utf8')
    assert conf.state_path == str(stack.state_path)
    assert stack.state_path.is_dir()
    for group in (conf.nova, conf.placement):
        assert (group.auth_type, group.username, group.auth_url) == (
            'password', 'memcanal', KEYSTONE)
    raw = configparser.ConfigParser(interpolation=None)
    raw.read(stack.conf)
    assert raw['DEFAULT']['transport_url'].startswith('rabbit://')
    assert raw['keystone_authtoken']['username'] == 'memcanal'
    assert stack.named('iniset_rpc_backend') == [
        ('memcanal', str(stack.conf))]


def test_nova_scheduler_gets_the_filter_and_weigher(stack):
    scheduler = oslo_ini_values(stack.nova_conf)['filter_scheduler']
    assert scheduler['enabled_filters'] == [NOVA_FILTERS + ',MemCanalFilter']
    assert scheduler['available_filters'] == [
        'nova.scheduler.filters.all_filters', NOVA_FILTER]
    assert scheduler['weight_classes'] == [
        'nova.scheduler.weights.all_weighers', NOVA_WEIGHER]
    # What devstack wrote stays.
    assert scheduler['track_instance_changes'] == ['False']
    assert defines_class(NOVA_FILTER) and defines_class(NOVA_WEIGHER)


def test_nova_conf_waits_for_devstacks_background_nova_conf_edit(stack):
    assert stack.named('async_wait', 'stack:post-config') == [
        ('configure_neutron_nova',)]


def test_nova_reaches_memcanal_as_its_service_user(stack):
    conf = cfg.ConfigOpts()
    nova_memcanal_conf.register_opts(conf)
    conf(['--config-file', str(stack.nova_conf)])
    assert conf.memcanal.service_type == 'memcanal'
    ks_loading.load_auth_from_conf_options(conf, 'memcanal')
    assert (conf.memcanal.auth_url, conf.memcanal.username,
            conf.memcanal.project_name) == (KEYSTONE, 'nova', 'service')


def test_test_config_marks_memcanal_available_to_tempest(stack):
    tempest = configparser.ConfigParser()
    tempest.read(stack.tempest_conf)
    option = tempest_config.service_available.name
    assert tempest.getboolean('service_available', option)


def test_post_config_again_adds_to_nova_once(tmp_path):
    """A re-run keeps another plugin's filter and adds memcanal's once."""
    nova_conf = NOVA_CONF.replace(
        'track_instance_changes', 'available_filters = '
        'nova.scheduler.filters.all_filters\navailable_filters = '
        'other.Filter\ntrack_instance_changes')
    again = Stack(tmp_path, ['stack:post-config'] * 2, nova_conf=nova_conf)
    assert again.result.returncode == 0, again.result.stderr
    scheduler = oslo_ini_values(again.nova_conf)['filter_scheduler']
    assert scheduler['enabled_filters'] == [NOVA_FILTERS + ',MemCanalFilter']
    assert scheduler['available_filters'] == [
        'nova.scheduler.filters.all_filters', 'other.Filter', NOVA_FILTER]
    assert scheduler['weight_classes'] == [
        'nova.scheduler.weights.all_weighers', NOVA_WEIGHER]


def test_nova_scheduler_left_alone_when_told(tmp_path):
    untouched = Stack(tmp_path, ['stack:post-config'],
                      MEMCANAL_NOVA_SCHEDULER='False')
    assert untouched.result.returncode == 0, untouched.result.stderr
    assert untouched.nova_conf.read_text() == NOVA_CONF
    assert untouched.named('async_wait') == []
    assert untouched.conf.exists()


def test_compute_node_runs_only_the_agent(tmp_path):
    compute = Stack(tmp_path, STACK, services='n-cpu,memcanal-agent')
    assert compute.result.returncode == 0, compute.result.stderr
    assert compute.named('run_process') == [
        ('memcanal-agent', '%s/memcanal-agent --config-file %s' % (
            compute.bin_dir, compute.conf))]
    for controller_only in ('recreate_database', 'memcanal-manage',
                            'create_service_user', 'get_or_create_endpoint',
                            'wait_for_service'):
        assert compute.named(controller_only) == []
    assert compute.nova_conf.read_text() == NOVA_CONF
    assert compute.conf.exists() and not compute.uwsgi_conf.exists()
    assert 'database' not in oslo_ini_values(compute.conf)
    assert not compute.tempest_conf.exists()
    # The service's public key comes from the service's node.
    assert 'service' not in oslo_ini_values(compute.conf)
    assert oslo_ini_values(compute.conf)['agent']['service_public_key'] == [
        str(compute.conf_dir / 'service.pub')]
    [(_, warning)] = compute.named('warn')
    assert 'copy it from the memcanal-service node' in warning
    # Its unit leaves the pagers it started running when it stops.
    dropin = configparser.ConfigParser()
    dropin.read(compute.systemd_dir / 'devstack@memcanal-agent.service.d' /
                'memcanal.conf')
    assert dict(dropin['Service']) == {'killmode': 'process'}


def test_nova_venv_of_its_own_gets_memcanal_too(tmp_path):
    venv = Stack(tmp_path, ['stack:install'],
                 prelude='declare -A PROJECT_VENV=([nova]=/opt/nova.venv)')
    assert venv.result.returncode == 0, venv.result.stderr
    assert venv.named('pip_install') == [
        ('PIP_VIRTUAL_ENV=/opt/nova.venv', '-e', str(REPO))]


def test_unknown_agent_driver_stops_stack_before_install(tmp_path):
    bad = Stack(tmp_path, ['stack:pre-install', 'stack:install'],
                MEMCANAL_AGENT_DRIVER='kvm')
    assert bad.result.returncode != 0
    [(_, message)] = bad.named('die')
    assert 'MEMCANAL_AGENT_DRIVER=kvm' in message
    assert 'stack:install' not in bad.calls


def test_unstack_stops_and_clean_removes(tmp_path):
    cleaned = Stack(tmp_path, ['stack:post-config', 'unstack', 'clean'])
    assert cleaned.result.returncode == 0, cleaned.result.stderr
    assert cleaned.named('stop_process', 'unstack') == [
        ('memcanal-api',), ('memcanal-service',), ('memcanal-agent',)]
    assert not cleaned.conf_dir.exists()
    assert not cleaned.state_path.exists()


def test_the_agent_node_gets_the_pager_shim_and_qemu_wrapper(stack):
    """doc/deployment.md's files and settings, as the plugin writes
    them on a node whose agent drives libvirt."""
    assert stack.named('make', 'stack:install') == [
        ('-C', str(REPO / 'hypervisor-patches' / 'pager'),
         'BUILD=%s' % (stack.lib_dir.parents[1] / 'build'))]
    assert stack.pager_binary.stat().st_mode & 0o777 == 0o755
    shim = stack.lib_dir / 'libmemcanal-uffd.so'
    assert shim.stat().st_mode & 0o777 == 0o644
    wrapper = stack.lib_dir / 'qemu' / 'qemu-system-x86_64'
    assert wrapper.read_bytes() == (
        REPO / 'hypervisor-patches' / 'pager' / 'memcanal-qemu').read_bytes()
    assert (stack.lib_dir / 'qemu' / 'memcanal-qemu.conf').read_text() == (
        'QEMU=/usr/bin/qemu-system-x86_64\nSHIM=%s\n'
        'SOCKET_DIR=/run/memcanal/pagers\n' % shim)
    for unit in ('libvirtd', 'virtqemud'):
        dropin = configparser.ConfigParser(interpolation=None)
        dropin.optionxform = str
        dropin.read(stack.systemd_dir / ('%s.service.d' % unit)
                    / 'memcanal.conf')
        path = dropin['Service']['Environment']
        assert path.startswith('PATH=%s/qemu:' % stack.lib_dir)
    assert (stack.udev_dir / '60-memcanal-userfaultfd.rules').read_text() == (
        'KERNEL=="userfaultfd", GROUP="kvm", MODE="0660"\n')
    assert stack.userfaultfd.stat().st_mode & 0o777 == 0o660
    acl = [line for line in stack.qemu_conf.read_text().splitlines()
           if line.startswith('cgroup_device_acl')]
    assert len(acl) == 1 and '"/dev/userfaultfd"' in acl[0]
    assert ('daemon-reload',) in stack.named('systemctl', 'stack:post-config')
    assert stack.named('restart_service', 'stack:post-config') == [
        ('libvirtd',)]
    conf = oslo_ini_values(stack.conf)
    assert conf['libvirt']['pager_socket_dir'] == ['/run/memcanal/pagers']
    assert conf['libvirt']['reserved_host_memory_mb'] == ['512']
    assert conf['pager']['binary'] == [str(stack.pager_binary)]
    assert conf['sampling']['enabled'] == ['True']


def test_paging_left_alone_when_told(tmp_path):
    stacked = Stack(tmp_path, STACK, MEMCANAL_PAGING='False')
    assert stacked.result.returncode == 0, stacked.result.stderr
    assert stacked.named('make') == []
    assert stacked.named('restart_service') == []
    assert 'sampling' not in oslo_ini_values(stacked.conf)


def _opens(path, uid, groups):
    """Whether a process of ``uid`` in ``groups`` may open ``path`` for
    reading and writing (as QEMU opens /dev/userfaultfd)."""
    def drop():
        os.setgroups(groups)
        os.setgid(groups[0])
        os.setuid(uid)
    return subprocess.run(['/bin/sh', '-c', 'exec 3<>"$1"', 'sh', str(path)],
                          preexec_fn=drop, capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason='switches users: needs root')
def test_only_qemus_group_opens_the_userfaultfd_device(stack):
    """The owner and mode the plugin gives /dev/userfaultfd (here its
    stand-in file) let QEMU's group create userfaultfds, and no other
    user. Tried on a copy in a directory every user can enter (the
    stack's is root's alone), with the same group and mode."""
    kvm = grp.getgrnam('kvm').gr_gid
    nobody = 65534
    given = os.stat(stack.userfaultfd)
    assert given.st_gid == kvm
    with tempfile.TemporaryDirectory() as shared:
        os.chmod(shared, 0o711)
        device = pathlib.Path(shared) / 'userfaultfd'
        device.touch()
        os.chown(device, given.st_uid, given.st_gid)
        device.chmod(given.st_mode & 0o7777)
        assert _opens(device, nobody, [kvm])
        assert not _opens(device, nobody, [nobody])
