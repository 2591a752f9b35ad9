"""A pager's memory server (its lender) as an attacker would make it or
take it down (issue #25), against the real memcanal-pager and memory
server (TLS, lease tokens) on loopback.

The pager trusts a lender on its CA's certificate alone, with a lease
token for its own VM's owner; a store, or a newer lease, added through
its control socket is checked the same. Its memory server down as it
starts or takes over (a crash, or an attacker) costs the copies there,
not the guest: the pager serves from its file and uses the server again
once it is back; and a newer lease reaches a running pager.
"""

import base64
import json
import os
import subprocess
import uuid

from cryptography.hazmat.primitives.asymmetric import ed25519
import numpy as np
import pytest

from memcanal.agent import paging
from memcanal.tests.functional import memservers
from memcanal.tests.functional import pagers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

# The pager, the lender and the VMs as pagers.py makes them.
build = pagers.build
lender = pagers.lender
vms = pagers.vms


def other_ca(directory):
    """The CA file of a CA that signed nothing the lender has."""
    other = os.path.join(directory, 'other-ca')
    os.mkdir(other)
    return memservers.make_pki(other)[0]


@pytest.mark.parametrize('case', [
    'no CA', 'no token', 'another owner\'s token', 'another CA',
    'a token the service did not sign', 'a token for a tcp: store'])
def test_a_tls_store_the_pager_cannot_trust_is_refused(build, lender,
                                                       short_tmp_path, case):
    """The pager checks the lender's certificate against --tls-ca and
    presents the lease token given after the store; anything wrong and
    it refuses to start, saying why."""
    owner = paging.owner_of(str(uuid.uuid4()))
    token = lender.token(owner)
    ca = ['--tls-ca', lender.ca]
    store = ['--store', 'tls:%s' % lender.name]
    why = {
        'no CA': 'a tls: store needs --tls-ca',
        'no token': 'a tls: store needs its lease token',
        'another owner\'s token': 'the lease token is for owner %d, not '
                                  '%d' % (owner + 1, owner),
        'another CA': 'TLS failed (a certificate the CA did not sign',
        'a token the service did not sign': 'the server refused the lease '
                                            'token',
        'a token for a tcp: store': 'only tls: stores take a token',
    }[case]
    if case == 'no CA':
        ca = []
    elif case == 'another owner\'s token':
        token = lender.token(owner + 1)
    elif case == 'another CA':
        ca = ['--tls-ca', other_ca(short_tmp_path)]
    elif case == 'a token the service did not sign':
        token = lender.token(owner,
                             key=ed25519.Ed25519PrivateKey.generate())
    elif case == 'a token for a tcp: store':
        store = ['--store', 'tcp:%s' % lender.name]
    if case != 'no token':
        store += ['--store-token-file', pager_tests.token_file(
            base64.b64encode(token).decode())]
    status, err = pagers.run_pager(build, short_tmp_path, '--owner',
                                   str(owner), *ca, *store)
    assert status == 1, err
    assert why in err, err


def test_a_tls_store_added_by_the_control_socket(build, lender,
                                                 short_tmp_path):
    """`store tls:HOST:PORT TOKEN` adds the lender as the agent adds it
    when it first pages; a token for another owner is refused there
    too, and the pager goes on."""
    owner = paging.owner_of(str(uuid.uuid4()))
    control = os.path.join(short_tmp_path, 'control')
    pager = subprocess.Popen(
        [str(build / 'memcanal-pager'), '--socket',
         os.path.join(short_tmp_path, 'pager.sock'), '--control', control,
         '--owner', str(owner), '--tls-ca', lender.ca],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(pager.stdout.readline())['event'] == 'listening'
        client = pager_tests.socket_file(control)

        def send(line):
            client.write(line + '\n')
            client.flush()

        def command(line):
            send(line)
            return json.loads(client.readline())
        spec = 'tls:%s' % lender.name
        assert command('store %s %s' % (spec, base64.b64encode(
            lender.token(owner + 1)).decode())) == {
                'event': 'error', 'line': 'store: the lease token is for '
                'owner %d, not %d' % (owner + 1, owner)}
        assert command('store %s %s' % (spec, base64.b64encode(
            lender.token(owner)).decode())) == {
                'event': 'store', 'copies': 1, 'stores': [spec],
                'swap_to': [spec]}
        send('quit')
        assert pager.wait(30) == 0
    finally:
        if pager.poll() is None:
            pager.kill()
            pager.wait(10)


def restart(lender):
    """The lender, stopped, started again at its address with its
    certificate and lease key: empty, as a memory server after a crash."""
    directory = os.path.dirname(lender.admin_path)
    lender.process, _ = services.start_memserver(
        65536, '--tls-cert', os.path.join(directory, 'memserver.pem'),
        '--tls-key', os.path.join(directory, 'memserver-key.pem'),
        '--lease-key', os.path.join(directory, 'lease-key.pem'),
        '--admin', lender.admin_path, '--listen', lender.name)


@pytest.mark.parametrize('when', ['start', 'takeover'])
def test_a_pager_whose_lender_is_down_serves_and_uses_it_once_back(
        build, lender, vms, short_tmp_path, when):
    """The memory server is down as a pager starts, or as one takes over
    from a pager that died, its guest waiting on the pages it held out:
    the pager attaches all the same (before, it exited, and the guest
    waited for a pager that never came), serves every page from the file,
    and keeps pages on the lender again once it is back."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    if when == 'start':
        lender.stop()
    # A pager started with its lender down pages to its file alone.
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   guest_mb=4,
                   options=['--copies', '1'] if when == 'start' else [])
    vms.append(vm)
    vm.swap_out()
    if when == 'takeover':
        lender.stop()
        vm.process.kill_pager()
        vm.process.start_pager()
        attached = vm.process.event('attached')
        assert attached['adopted'], attached
        assert attached['out_pages'] == vm.pages, attached
    assert vm.check() == 0
    stats = vm.stats()
    assert stats['lost'] == 0 and stats['served'] == [0, vm.pages], stats

    restart(lender)

    def served_by_the_lender():
        vm.process.command('swapout 0 %d' % vm.pages)
        assert vm.check() == 0
        return vm.stats()['served'][0] > 0
    # Its back-off (at most 30 s) decides when it is tried again.
    services.wait_for(served_by_the_lender, 120, 'the lender in use again')
    assert vm.stats()['lost'] == 0


def test_a_newer_lease_of_its_lender_is_used_at_once(build, lender, vms,
                                                     short_tmp_path):
    """`store tls:HOST:PORT TOKEN` for the lender a pager has (a newer
    lease, as the service sends with a larger quota) makes the pager
    present the new token from its next connection on: pages past the
    old lease's quota go out. Before, the pager took the same server for
    a store of its own, which the swap-out then also needed a copy on,
    and the old lease's quota held."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   guest_mb=4, quota=64)
    vms.append(vm)
    # Its runs of 512 pages are PUTs a 64-page lease refuses whole.
    refused = vm.process.command('swapout 0 %d' % vm.pages)
    assert refused['dropped'] == 0 and refused['put_failed'][0] > 0, refused
    spec = 'tls:%s' % lender.name
    stores = {'event': 'store', 'copies': 2, 'stores': [spec, vm.file],
              'swap_to': [spec, vm.file]}
    # Not a newer lease of this VM's: refused, the lease it has kept.
    assert vm.process.command('store %s %s' % (spec, base64.b64encode(
        lender.token(vm.owner + 1, quota_pages=vm.pages)).decode())) == {
            'event': 'error', 'line': 'store: the lease token is for owner '
            '%d, not %d' % (vm.owner + 1, vm.owner)}
    assert vm.process.command('store %s %s' % (spec, base64.b64encode(
        lender.token(vm.owner, quota_pages=vm.pages)).decode())) == dict(
            stores, renewed=True)
    vm.swap_out()
    assert vm.check() == 0
    stats = vm.stats()
    assert stats['served'] == [vm.pages, 0] and stats['lost'] == 0, stats


def test_pages_come_back_from_the_lender_in_runs(build, lender, vms,
                                                 short_tmp_path):
    """Issue #35: a swap-out to the lender alone (swapto), then a
    swapin of everything brings the pages back a run a request, each
    copy opened: the guest's words are all there, none from the file,
    which took no page."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'vm'), lender, key)
    vms.append(vm)
    spec = 'tls:%s' % lender.name
    assert vm.process.command('swapto %s' % spec)['swap_to'] == [spec]
    vm.swap_out()
    assert os.stat(vm.file).st_blocks == 0
    fetched = vm.process.command('swapin 0 %d' % vm.pages)['fetched']
    stats = vm.stats()
    assert fetched == vm.pages and stats['out_pages'] == 0, stats
    assert stats['served'] == [vm.pages, 0] and stats['swapped_in'] == (
        vm.pages), stats
    assert vm.check() == 0
    assert vm.stats()['lost'] == 0


@pytest.mark.parametrize('first, lost', [
    ('lender', 'emptied'), ('lender', 'down'), ('file', 'truncated')])
def test_a_swapin_falls_back_to_the_next_store_page_by_page(
        build, lender, vms, short_tmp_path, first, lost):
    """Issue #35: every page a swapin brings back comes from whichever
    store holds it. The first store, read a run a request, lost every
    page (the lender restarted empty, or the file truncated) or is down:
    its run reads fail and each page comes from the next store, none
    lost."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    order = ('lender', 'file') if first == 'lender' else ('file', 'lender')
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   order=order, guest_mb=4)
    vms.append(vm)
    vm.swap_out()
    if first == 'file':
        os.truncate(vm.file, 0)
    else:
        lender.stop()
        if lost == 'emptied':
            restart(lender)
    fetched = vm.process.command('swapin 0 %d' % vm.pages)['fetched']
    stats = vm.stats()
    assert fetched == vm.pages and stats['out_pages'] == 0, stats
    assert stats['served'] == [0, vm.pages] and stats['lost'] == 0, stats
    assert vm.check() == 0


def test_pages_read_ahead_or_swapped_in_fault_on_their_first_access(
        build, lender, vms, short_tmp_path):
    """Issue #35: pages the pager brings in from the lender without a
    fault (read ahead after a sequential fault, a swapin) are not mapped
    while it samples: the guest's first access to each still faults, so
    every page it touches after all went out is seen in its interval,
    sampled or not, exactly as with one fault a page."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   order=('lender',), guest_mb=16, rate=0.1,
                   guest=('-r', '2', '-t', '1', '-p', '100'))
    vms.append(vm)
    process = vm.process
    process.command('tick')
    for k, swapin in ((1, False), (2, True)):
        out = vm.swap_out()
        if swapin:
            fetched = process.command('swapin 0 %d' % vm.pages)
            assert fetched['fetched'] == out['out_pages'], fetched
        touched, written = process.phase(k)
        seen, seen_written, _ = process.interval()
        np.testing.assert_array_equal(seen, touched)
        np.testing.assert_array_equal(seen_written & process.sample,
                                      written & process.sample)
    stats = vm.stats()
    assert stats['read_ahead'] > vm.pages // 4, stats
    assert stats['swapped_in'] == vm.pages and stats['lost'] == 0, stats
    assert vm.check() == 0
