"""A live lease outlives its first token (issue #36), against the real
memcanal-pager and memory server on loopback: the service renews a
lease's token before it expires, and the pager says HELLO with the
renewal at once, so that its memory server does not take an idle
pager's pages for an orphan's once the first token expired."""

import base64
import os
import time

import pytest

from memcanal.tests.functional import memservers
from memcanal.tests.functional import pagers
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

build = pagers.build
vms = pagers.vms
LIFETIME = 20
GRACE = 1


@pytest.fixture
def lender(short_tmp_path):
    """A memory server that closes idle clients after a second and
    gives orphans' pages back a second after their token expired."""
    directory = os.path.join(short_tmp_path, 'lender')
    os.mkdir(directory)
    server = memservers.Memserver(directory, 4096, '--idle-timeout', '1',
                                  '--orphan-grace', str(GRACE))
    yield server
    server.stop()


def held(lender):
    with lender.admin() as admin:
        return admin.stat()[0]


@pytest.mark.parametrize('renewed', [True, False])
def test_a_renewed_lease_keeps_an_idle_pagers_pages_past_the_first_expiry(
        build, lender, vms, short_tmp_path, renewed):
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    issued_at = int(time.time())
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'vm'), lender, key,
                   order=('lender',), guest_mb=4, lifetime=LIFETIME)
    vms.append(vm)
    vm.swap_out()
    assert held(lender) == vm.pages
    if renewed:
        token = lender.token(vm.owner, quota_pages=vm.pages, lease=vm.lease)
        spec = 'tls:%s' % lender.name
        assert vm.process.command('store %s %s' % (
            spec, base64.b64encode(token).decode()))['renewed']
    # The pager asks nothing meanwhile: its connections go idle, then
    # its first token expires, then the grace period passes.
    while time.time() < issued_at + LIFETIME + GRACE + 3:
        time.sleep(1)
    if renewed:
        assert held(lender) == vm.pages
        assert vm.check() == 0
    else:
        # Its pages went as an orphan's: what a renewal prevents.
        assert held(lender) == 0
