"""A VM's pager files as the agent keeps them (issue #25): its page key,
its record with the lease tokens of its memory servers, and what a
restarted agent does with them.

The libvirt driver on test_domain_pagers' host: a fake QEMU and fake
memcanal-pagers, which check the key file and tokens as the real pager
does (fake_pager).
"""

import logging
import os
import signal
import stat
import time

import pytest

from memcanal.agent.drivers import migrations
from memcanal.agent.drivers import paged
from memcanal.agent import pager_client
from memcanal import exception
from memcanal.tests.unit.agent import fake_pager
from memcanal.tests.unit.agent import test_domain_pagers as domains
from memcanal.tests.unit.agent.test_domain_pagers import host  # noqa: F401

PAGE = domains.PAGE
STORE = fake_pager.STORE
# Another memory server, a second store of the VM.
OTHER = 'tls:10.0.0.6:7400'


def leases(domain, *stores):
    """The lease tokens of a page action of ``domain`` to ``stores``
    (default STORE), by store."""
    return {store: fake_pager.lease_token(domain.uuid, store.encode())
            for store in stores or (STORE,)}


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def paged_out(make, domain, stores=(STORE,), tokens=None):
    """A driver whose domain's pager paged its cold pages out to
    ``stores``, with ``tokens`` (default: leases of them); (driver,
    pager)."""
    hypervisor = make()
    domain.start()
    pager = domains.pager_of(hypervisor, domain)
    domains.inject(pager, intervals=[domains.interval(0, range(32),
                                                      full=True)])
    hypervisor.collect(domain.uuid)
    time.sleep(0.3)                     # [pager] cold_after passes
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging', list(stores),
                                   tokens or leases(domain, *stores))
    return hypervisor, pager


def given(pager):
    """The key file, stores and their tokens the pager has, in order,
    whether from its command line or its control socket."""
    stats = pager.client.command('stats')
    args = stats['args']
    return args[args.index('--key-file') + 1], stats['stores'], stats[
        'tokens']


def test_each_vm_has_a_page_key_of_its_own_for_its_life(host, conf):
    domain, make = host
    hypervisor, pager = paged_out(make, domain)
    key = paged.pager_file(conf, domain.uuid, '.key')
    # Made by the agent as it started the VM's first pager, in its own
    # directory, for root alone.
    assert mode(conf.pager.state_dir) == 0o700
    assert (mode(key), os.stat(key).st_size, os.stat(key).st_uid) == (
        0o600, 32, os.geteuid())
    had = given(pager)
    token = leases(domain)[STORE]
    assert had == (key, [paged.local_store(conf, domain.uuid), STORE],
                   [None, token])
    with open(key, 'rb') as file:
        secret = file.read()
    # The record that names the tokens is root's alone too; its repr
    # (what a log line would show) has no token.
    record = paged.pager_file(conf, domain.uuid, '.json')
    assert mode(record) == 0o600
    assert token not in repr(paged.records(conf))

    # The pager dies: the one taking over has the same key.
    os.kill(pager.process.pid, signal.SIGKILL)
    successor = domains.wait(
        lambda: (hypervisor.pagers.pager(domain.uuid) is not pager
                 and hypervisor.pagers.pager(domain.uuid)), 'no successor')
    assert given(successor) == had
    with open(key, 'rb') as file:
        assert file.read() == secret

    # The VM is gone: its key, record, state and local pages go too.
    local = paged.local_store_path(conf, domain.uuid)
    with open(local, 'wb') as copies:      # the fake pager writes none
        copies.write(b'ciphertext')
    domain.destroy()
    domains.wait(lambda: not successor.alive(), 'the pager outlived QEMU')
    assert hypervisor.list_instances() == []
    for path in (key, record, local,
                 paged.pager_file(conf, domain.uuid, '.state')):
        assert not os.path.lexists(path), path


def command_line(pager):
    with open('/proc/%d/cmdline' % pager.process.pid) as cmdline:
        return cmdline.read()


def test_lease_tokens_reach_pagers_in_files_not_on_command_lines(host,
                                                                 conf):
    """Any local user reads a process's command line (/proc/PID/cmdline),
    and a lease token lets its holder delete the VM's copies on that
    server: a pager is given its tokens in files of root's alone, in the
    agent's directory, gone with the VM."""
    domain, make = host
    tokens = leases(domain, STORE, OTHER)
    hypervisor, pager = paged_out(make, domain, [STORE, OTHER], tokens)
    had = given(pager)
    assert had[2] == [None, tokens[STORE], tokens[OTHER]]
    first = command_line(pager)
    # Added to the running pager over its control socket (0600, in the
    # 0700 directory); the one taking over reads them from files.
    os.kill(pager.process.pid, signal.SIGKILL)
    successor = domains.wait(
        lambda: (hypervisor.pagers.pager(domain.uuid) is not pager
                 and hypervisor.pagers.pager(domain.uuid)), 'no successor')
    assert given(successor) == had
    files = [paged.token_file(conf, domain.uuid, index)
             for index in (1, 2)]
    args = successor.client.command('stats')['args']
    assert [args[at + 1] for at, arg in enumerate(args)
            if arg == '--store-token-file'] == files
    for path, store in zip(files, (STORE, OTHER)):
        assert (mode(path), os.stat(path).st_uid) == (0o600, os.geteuid())
        with open(path) as token:
            assert token.read() == tokens[store]
    for cmdline in (first, command_line(successor)):
        assert '--store' in cmdline
        for token in tokens.values():
            assert token not in cmdline
    assert mode(conf.pager.state_dir) == 0o700

    domain.destroy()
    domains.wait(lambda: not successor.alive(), 'the pager outlived QEMU')
    assert hypervisor.list_instances() == []
    for path in files:
        assert not os.path.lexists(path), path


@pytest.mark.parametrize('planted', ['symlink', 'mode', 'size'])
def test_a_key_the_agent_did_not_make_is_refused(conf, short_tmp_path,
                                                 planted):
    """Not read, not replaced (the pages out were encrypted with the
    key that was there): no pager until an operator looks."""
    conf.set_override('state_dir', short_tmp_path, 'pager')
    key = paged.pager_file(conf, 'vm', '.key')
    elsewhere = os.path.join(short_tmp_path, 'elsewhere')
    with open(elsewhere, 'wb') as file:
        file.write(b'k' * 32)
    os.chmod(elsewhere, 0o600)
    if planted == 'symlink':
        os.symlink(elsewhere, key)
    else:
        with open(key, 'wb') as file:
            file.write(b'k' * (32 if planted == 'mode' else 31))
        os.chmod(key, 0o644 if planted == 'mode' else 0o600)
    before = os.lstat(key)
    with pytest.raises(pager_client.PagerError, match='not a page key'):
        paged.page_key(conf, 'vm')
    assert os.lstat(key) == before


def test_a_key_is_made_whole_once_then_kept(conf, short_tmp_path):
    conf.set_override('state_dir', short_tmp_path, 'pager')
    old = os.umask(0o277)           # 0400, but for the agent's chmod
    try:
        key = paged.page_key(conf, 'vm')
    finally:
        os.umask(old)
    with open(key, 'rb') as file:
        first = file.read()
    assert len(first) == 32 and mode(key) == 0o600
    assert paged.page_key(conf, 'vm') == key
    with open(key, 'rb') as file:
        assert file.read() == first
    # Each VM its own, and nothing beside them.
    with open(paged.page_key(conf, 'vm-2'), 'rb') as file:
        assert file.read() != first
    assert sorted(os.listdir(short_tmp_path)) == ['vm-2.key', 'vm.key']


def test_memory_servers_need_the_ca_that_signed_them(host, conf):
    domain, make = host
    conf.clear_override('tls_ca_file', 'pooling')
    hypervisor = make()
    domain.start()
    domains.pager_of(hypervisor, domain)
    with pytest.raises(exception.ResizeFailed, match='tls_ca_file'):
        hypervisor.apply_memory_target(domain.uuid, 0, 'paging', [STORE],
                                       leases(domain))
    # Paging to the local store alone needs none.
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging')


def test_lease_tokens_are_never_logged(host, conf, caplog):
    """Not when the pager takes them, nor when it refuses one."""
    caplog.set_level(logging.DEBUG)
    domain, make = host
    bad = 'c2VjcmV0LWxlYXNlLXRva2Vu'          # not 240 bytes: refused
    good = leases(domain)[STORE]
    hypervisor, pager = paged_out(make, domain, [STORE, OTHER],
                                  {STORE: good, OTHER: bad})
    assert pager.record.stores[1:] == [STORE]
    assert 'Paging %s without %s' % (domain.uuid, OTHER) in caplog.text
    for token in (good, bad):
        assert token not in caplog.text
    # The pager's log has none either.
    with open(paged.pager_file(conf, domain.uuid, '.log')) as log:
        assert good not in log.read()


def test_a_newer_lease_of_a_store_reaches_its_pager_and_those_taking_over(
        host, conf):
    """A page action with a new lease of a server the VM's pager has
    (a larger quota, say): the running pager presents it from then on,
    and the pagers taking over from it are given it."""
    domain, make = host
    hypervisor, pager = paged_out(make, domain)
    newer = {STORE: fake_pager.lease_token(domain.uuid, b'newer')}
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging', [STORE], newer)
    assert paged.records(conf)[0].lease_tokens == newer
    stats = pager.client.command('stats')
    assert (stats['stores'][1:], stats['tokens']) == (
        [STORE], [None, newer[STORE]])
    os.kill(pager.process.pid, signal.SIGKILL)
    successor = domains.wait(
        lambda: (hypervisor.pagers.pager(domain.uuid) is not pager
                 and hypervisor.pagers.pager(domain.uuid)), 'no successor')
    assert successor.client.command('stats')['tokens'] == [
        None, newer[STORE]]


def test_pooled_pages_go_to_the_lender_only(host, conf):
    """Issue #35: a pooling action's pages go to its memory servers, not
    the local store too, and so do those of a pager taking over and of
    a later action that names no store (taking the VM back in, or a
    collection keeping its target)."""
    domain, make = host
    hypervisor, pager = paged_out(make, domain, [STORE, OTHER])
    local = paged.local_store(conf, domain.uuid)
    hello = pager.client.command('hello')
    assert hello['stores'] == [local, STORE, OTHER]
    assert hello['swap_to'] == [STORE, OTHER]
    assert paged.records(conf)[0].swap_to == [STORE, OTHER]
    os.kill(pager.process.pid, signal.SIGKILL)
    successor = domains.wait(
        lambda: (hypervisor.pagers.pager(domain.uuid) is not pager
                 and hypervisor.pagers.pager(domain.uuid).attach()
                 and hypervisor.pagers.pager(domain.uuid)), 'no successor')
    assert successor.client.command('hello')['swap_to'] == [STORE, OTHER]
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging')
    assert successor.client.command('hello')['swap_to'] == [STORE, OTHER]


def test_a_vm_paged_without_a_memory_server_pages_to_every_store(host,
                                                                  conf):
    """No pooling action yet: the pager writes where it always did."""
    domain, make = host
    _, pager = paged_out(make, domain, stores=(), tokens={})
    local = paged.local_store(conf, domain.uuid)
    assert pager.client.command('hello')['swap_to'] == [local]
    assert paged.records(conf)[0].swap_to is None


def test_a_local_copy_of_pooled_pages_where_the_operator_asks(host, conf):
    conf.set_override('local_copy', True, 'pager')
    domain, make = host
    _, pager = paged_out(make, domain)
    local = paged.local_store(conf, domain.uuid)
    assert pager.client.command('hello')['swap_to'] == [local, STORE]


def test_a_restarted_agent_pages_a_vm_back_in(host, conf):
    """Finding 6: the new agent finds the pager and its lease in the
    record, and the whole VM as the target brings every page back."""
    domain, make = host
    first, pager = paged_out(make, domain, [STORE, OTHER])
    [info] = first.list_instances()
    assert info.paged_bytes > 0
    first.stop()

    second = make()
    again = second.pagers.pager(domain.uuid)
    assert again.process.pid == pager.process.pid
    assert (again.record.stores[1:], again.record.lease_tokens,
            again.record.resident_target) == (
                [STORE, OTHER], leases(domain, STORE, OTHER), 0)
    resize = second.apply_memory_target(domain.uuid, domains.PAGES * PAGE,
                                        'paging')
    assert resize.previous_bytes == info.resident_bytes
    [info] = second.list_instances()
    assert info.paged_bytes == 0
    assert again.client.command('stats')['out_pages'] == 0


def test_a_pager_dead_when_the_agent_restarts_is_taken_over(host, conf):
    """The new agent starts the pager that takes over as the dead one
    was: the same state, key, stores and tokens, in the same order."""
    domain, make = host
    first, pager = paged_out(make, domain, [STORE, OTHER])
    had = given(pager)
    out = pager.client.command('stats')['out_pages']
    first.stop()
    os.kill(pager.process.pid, signal.SIGKILL)
    domains.wait(lambda: not pager.alive(), 'the pager lives')

    second = make()
    # The shim offers its RAM again; the new agent's listener takes it.
    successor = domains.wait(
        lambda: (second.pagers.pager(domain.uuid).alive()
                 and second.pagers.pager(domain.uuid)), 'no successor')
    assert successor.process.pid != pager.process.pid
    hello = domains.wait(
        lambda: successor.client.command('hello').get('attached')
        and successor.client.command('hello'), 'not attached')
    assert hello['adopted'] and hello['pid'] == domain.qemu.pid
    assert given(successor) == had
    tokens = leases(domain, STORE, OTHER)
    assert had[2] == [None, tokens[STORE], tokens[OTHER]]
    assert successor.client.command('stats')['out_pages'] == out
    second.apply_memory_target(domain.uuid, domains.PAGES * PAGE, 'paging')
    [info] = second.list_instances()
    assert info.paged_bytes == 0


def pager_args_with_pool(host, conf, pool):
    """The command line of the host's domain's pager, started with a
    4 MiB pool in the file ``pool``."""
    domain, make = host
    conf.set_override('pool_mb', 4, 'pager')
    conf.set_override('pool_path', pool, 'pager')
    hypervisor = make()
    domain.start()
    return domains.pager_of(hypervisor, domain).client.command('stats')[
        'args']


def test_the_hosts_pool_is_in_a_directory_of_roots_alone(host, conf,
                                                         short_tmp_path):
    """The pager refuses a pool file where another user could have put
    one: its directory is made root's alone."""
    pool = os.path.join(short_tmp_path, 'shm', 'memcanal', 'pool')
    args = pager_args_with_pool(host, conf, pool)
    assert args[args.index('--pool-mb'):args.index('--pool') + 2] == [
        '--pool-mb', '4', '--pool', pool]
    assert mode(os.path.dirname(pool)) == 0o700


def test_without_its_key_no_pager_takes_over(host, conf, caplog):
    """A new key would not open the pages out: none is made, and the
    error says why."""
    domain, make = host
    hypervisor, pager = paged_out(make, domain)
    key = paged.pager_file(conf, domain.uuid, '.key')
    os.unlink(key)
    os.kill(pager.process.pid, signal.SIGKILL)
    domains.wait(lambda: 'its page key is gone' in caplog.text,
                 'no error about the key')
    assert not os.path.exists(key)
    assert not hypervisor.pagers.pager(domain.uuid).alive()


def planted_pool_dir(path, how):
    """Make the pool's directory ``path`` as a local user could have
    made it before the agent (issue 36: every pager then failed to
    start, each saying only that its pool was refused)."""
    if how == 'symlink':
        os.mkdir(path + '.real', 0o700)
        os.symlink(path + '.real', path)
    elif how == 'file':
        open(path, 'w').close()
    else:
        os.mkdir(path)
        os.chmod(path, 0o755 if how == 'mode' else 0o700)
        if how == 'owner':
            os.chown(path, 65534, 65534)


@pytest.mark.parametrize('how,why', [
    ('owner', 'owned by uid 65534, not root'),
    ('mode', 'mode 0755, not 0700'),
    ('symlink', 'a symbolic link'),
    ('file', 'not a directory'),
])
def test_a_pool_dir_another_user_made_is_refused_clearly(
        host, conf, short_tmp_path, how, why):
    """The pager is not started and the error names the directory and
    what is wrong with it; the directory is left as it was."""
    if how == 'owner' and os.geteuid() != 0:
        pytest.skip('chown to another user needs root')
    domain, make = host
    directory = os.path.join(short_tmp_path, 'memcanal')
    planted_pool_dir(directory, how)
    before = os.lstat(directory)
    conf.set_override('pool_mb', 4, 'pager')
    conf.set_override('pool_path', os.path.join(directory, 'pool'), 'pager')
    with pytest.raises(pager_client.PagerError) as error:
        paged.pool_directory(conf, domain.uuid)
    assert 'pool directory %s' % directory in str(error.value)
    assert why in str(error.value)
    assert os.lstat(directory) == before


def test_a_pool_dir_of_roots_alone_is_taken(host, conf, short_tmp_path):
    """One the agent did not make is used if it is as the agent makes
    them: root's (the agent's user), mode 0700."""
    directory = os.path.join(short_tmp_path, 'memcanal')
    os.mkdir(directory, 0o700)
    pool = os.path.join(directory, 'pool')
    args = pager_args_with_pool(host, conf, pool)
    assert args[args.index('--pool') + 1] == pool
    assert mode(directory) == 0o700


def out_pages(pager):
    return pager.client.command('stats')['out_pages']


def test_a_live_migration_brings_a_paged_vm_back_first(host, conf, caplog):
    """QEMU's migration reads every page, a page out through a fault
    each: the first collection that finds libvirt migrating the domain
    out brings every page back at once, and none goes out again while
    the migration runs; one that ends with the VM still here has its
    resident target kept again. No other job of the domain does it."""
    domain, make = host
    hypervisor, pager = paged_out(make, domain)
    paged_before = out_pages(pager)
    assert paged_before > 0
    domain.job = {'type': domains.libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
                  'operation': domains.libvirt.VIR_DOMAIN_JOB_OPERATION_DUMP}
    hypervisor.collect(domain.uuid)
    assert out_pages(pager) == paged_before

    caplog.set_level(logging.INFO)
    domain.job['operation'] = (
        domains.libvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT)
    hypervisor.collect(domain.uuid)
    assert out_pages(pager) == 0
    assert '%d pages its pager held out brought back' % paged_before in (
        caplog.text)
    time.sleep(0.3)                     # [pager] cold_after passes again
    hypervisor.collect(domain.uuid)
    assert out_pages(pager) == 0
    assert pager.record.resident_target == 0

    domain.job = {'type': domains.libvirt.VIR_DOMAIN_JOB_NONE}
    hypervisor.collect(domain.uuid)
    assert out_pages(pager) > 0
    assert 'is kept again' in caplog.text


def test_before_migration_brings_every_page_back(host, conf):
    """What the migration path calls (and benchmarks/migration_cost.py
    times): one swapin of the whole VM, the pages it fetched."""
    domain, make = host
    hypervisor, pager = paged_out(make, domain)
    paged_before = out_pages(pager)
    back = migrations.before_migration(pager)
    assert back['fetched'] == paged_before and back['seconds'] >= 0
    assert out_pages(pager) == 0
    assert migrations.before_migration(pager)['fetched'] == 0
