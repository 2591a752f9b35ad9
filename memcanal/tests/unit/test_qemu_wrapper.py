"""hypervisor-patches/pager/memcanal-qemu, the QEMU wrapper libvirt runs
for nova's guests: run with a stand-in QEMU that prints its arguments
and the environment the wrapper gave it."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

WRAPPER = (pathlib.Path(__file__).resolve().parents[3]
           / 'hypervisor-patches' / 'pager' / 'memcanal-qemu')
UUID = '6f1c2b4e-3d5a-4c7b-9e8f-0a1b2c3d4e5f'
# What libvirt 9 gives QEMU 7.2 for a domain without NUMA cells.
RAM = '{"qom-type":"memory-backend-ram","id":"pc.ram","size":268435456}'
SHARED = ('{"qom-type":"memory-backend-memfd","share":true,"id":"pc.ram",'
          '"size":268435456}')
FAKE_QEMU = '''#!%s
import json, os, sys
print(json.dumps({"args": sys.argv[1:], "env": {
    k: v for k, v in os.environ.items() if k in (
        "LD_PRELOAD", "MEMCANAL_PAGER_SOCKET")}}))
''' % sys.executable


@pytest.fixture
def wrapper(tmp_path):
    """The wrapper installed as qemu-system-x86_64 in a directory of its
    own, with the stand-in QEMU; ``configure`` writes its conf."""
    directory = tmp_path / 'qemu'
    directory.mkdir()
    shutil.copy(WRAPPER, directory / 'qemu-system-x86_64')
    qemu = tmp_path / 'real-qemu'
    qemu.write_text(FAKE_QEMU)
    qemu.chmod(0o755)

    def run(*args, conf=None):
        if conf is not None:
            (directory / 'memcanal-qemu.conf').write_text(
                'QEMU=%s\n%s' % (qemu, conf))
        done = subprocess.run(
            [str(directory / 'qemu-system-x86_64'), *args],
            capture_output=True, text=True, check=True,
            env={'PATH': os.environ['PATH']})
        return json.loads(done.stdout)
    return run


CONF = 'SHIM=/lib/memcanal/libmemcanal-uffd.so\nSOCKET_DIR=/run/pagers\n'


def test_a_guest_gets_shared_ram_and_the_shim(wrapper):
    seen = wrapper('-name', 'guest=instance-00000001', '-object', RAM,
                   '-uuid', UUID, '-m', '256', conf=CONF)
    assert seen['args'] == ['-name', 'guest=instance-00000001', '-object',
                            SHARED, '-uuid', UUID, '-m', '256']
    assert seen['env'] == {
        'LD_PRELOAD': '/lib/memcanal/libmemcanal-uffd.so',
        'MEMCANAL_PAGER_SOCKET': '/run/pagers/%s.sock' % UUID}


def test_the_key_value_form_is_shared_too(wrapper):
    seen = wrapper('-object', 'memory-backend-ram,id=ram-node0,size=128M',
                   '-uuid', UUID, conf=CONF)
    assert seen['args'][1] == (
        'memory-backend-memfd,share=on,id=ram-node0,size=128M')


def test_memory_already_shared_is_left_alone(wrapper):
    shared = '{"qom-type":"memory-backend-ram","id":"m","share":false}'
    seen = wrapper('-object', shared, '-uuid', UUID, conf=CONF)
    assert seen['args'] == ['-object', shared, '-uuid', UUID]


def test_capability_probes_run_qemu_unchanged(wrapper):
    """libvirt probes QEMU with no -uuid: no shim, nothing rewritten."""
    seen = wrapper('-S', '-no-user-config', '-machine', 'none', conf=CONF)
    assert seen == {'args': ['-S', '-no-user-config', '-machine', 'none'],
                    'env': {}}


def test_unconfigured_it_only_runs_qemu(wrapper):
    seen = wrapper('-object', RAM, '-uuid', UUID, conf='')
    assert seen == {'args': ['-object', RAM, '-uuid', UUID], 'env': {}}


def test_a_uuid_that_is_no_uuid_gets_no_socket(wrapper):
    seen = wrapper('-uuid', '../../etc/x', conf=CONF)
    assert seen['env'] == {}
