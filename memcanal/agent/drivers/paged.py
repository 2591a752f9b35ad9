"""What every driver that samples and pages its VMs does the same way.

The qemu and libvirt drivers get a guest's RAM to memcanal-pager
differently (the qemu driver starts QEMU itself, its shim handing the
RAM straight to the pager; a libvirt domain's QEMU hands it to a socket
the agent listens on, which relays it), but from there on it is the
same (issues #17, #24): one pager per VM, detached from the agent
(memcanal.agent.pager_client), sampling the guest's accesses
([sampling]) and paging it to the stores it was lent and the agent's
local file store, driven through memcanal.agent.paging.GuestPager.

Each pager has a record on disk (``[pager] state_dir/<uuid>.json``,
written whole or not at all), so that an agent that restarts finds the
pagers still running and connects to them again, and starts one that
takes over (same ``--state``, key, stores and lease tokens) from a pager
that died while its QEMU runs.

Pages leave the host in a form no one else can read or forge (issue
#25): each VM has a page key of its own (``<uuid>.key``, made by the
agent as its first pager starts, given to every pager of the VM as
``--key-file``), with which its pager seals every page it pages out.
The key never leaves the host (the agent does not even read it back),
and goes with the VM's other files once the VM is gone. A memory
server (``tls:HOST:PORT``) is checked against [pooling] tls_ca_file,
and the pager presents the lease token the service signed for it,
which the record keeps (0600, in the agent's 0700 state_dir) for the
pagers that take over. A pager is given its tokens in files
(``<uuid>.store<N>.token``, 0600, beside the key), never on its command
line, which any local user reads; a newer lease of a store it has goes
to it over its control socket. Tokens are not logged.
"""

import dataclasses
import glob
import json
import os
import stat
import threading
import time

from oslo_log import log as logging

from memcanal.agent import adaptive
from memcanal.agent import driver
from memcanal.agent import durable
from memcanal.agent import pager_client
from memcanal.agent import paging
from memcanal.agent.drivers import migrations
from memcanal import exception

LOG = logging.getLogger(__name__)
RECORD = '.json'
KEY = '.key'
KEY_BYTES = 32                  # AES-256-GCM's
TLS = 'tls:'


def local_store_path(conf, instance_uuid):
    """The VM's file in [pager] local_store_dir."""
    return os.path.join(conf.pager.local_store_dir, instance_uuid + '.pages')


def local_store(conf, instance_uuid):
    """The store spec of the VM's pages in [pager] local_store_dir."""
    os.makedirs(conf.pager.local_store_dir, exist_ok=True)
    return 'file:' + local_store_path(conf, instance_uuid)


def pager_file(conf, instance_uuid, suffix):
    """The VM's pager file ending in ``suffix`` in [pager] state_dir."""
    return os.path.join(conf.pager.state_dir, instance_uuid + suffix)


def token_file(conf, instance_uuid, index):
    """The file of the lease token of the VM's store ``index`` (its
    place in the record's stores)."""
    return pager_file(conf, instance_uuid, '.store%d.token' % index)


def write_token(path, token):
    """``token`` whole at ``path``, mode 0600 whatever the umask (the
    pager refuses any other)."""
    durable.write(path, token, mode=0o600)
    os.chmod(path, 0o600)


def state_dir(conf):
    """[pager] state_dir, the agent's alone (0700), made if missing:
    it holds the VMs' page keys, records with lease tokens, and control
    sockets that command paging."""
    path = conf.pager.state_dir
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def pool_directory(conf, instance_uuid):
    """The directory of [pager] pool_path, made root's alone (0700) if
    missing. One the agent did not make is taken only if it is as the
    agent makes them: a directory (not a link) of root's (or the
    agent's user's), mode 0700; else PagerError naming it and what is
    wrong. The pager would refuse the pool file in it anyway; before
    issue 36 a local user who made it first (in /dev/shm, which anyone
    writes) stopped every pager, each saying only that its pool was
    refused."""
    path = os.path.dirname(conf.pager.pool_path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)           # whatever the umask
        return path
    except FileExistsError:
        pass
    status = os.lstat(path)
    wrong = None
    if stat.S_ISLNK(status.st_mode):
        wrong = 'is a symbolic link'
    elif not stat.S_ISDIR(status.st_mode):
        wrong = 'is not a directory'
    elif status.st_uid not in (0, os.geteuid()):
        wrong = 'is owned by uid %d, not root' % status.st_uid
    elif stat.S_IMODE(status.st_mode) != 0o700:
        wrong = 'has mode %04o, not 0700' % stat.S_IMODE(status.st_mode)
    if wrong:
        raise pager_client.PagerError(name=instance_uuid, reason=(
            'pool directory %s %s: another user may have made it to stop '
            'pagers; remove it (the agent makes it again) or set [pager] '
            'pool_path elsewhere' % (path, wrong)))
    return path


def page_key(conf, instance_uuid):
    """The path of the VM's page key, made if the VM has none: 32
    random bytes, mode 0600. It is written beside its name and linked
    there (which replaces nothing, a symlink neither), so it is whole or
    absent; one found there is used only if it is a key as the agent
    makes them, PagerError otherwise (it is never replaced: the pages
    out were encrypted with it)."""
    path = pager_file(conf, instance_uuid, KEY)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        _make_key(path)
        return path
    if not (stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid()
            and stat.S_IMODE(status.st_mode) == 0o600
            and status.st_size == KEY_BYTES):
        raise pager_client.PagerError(name=instance_uuid, reason=(
            '%s is not a page key as the agent makes them (a regular file '
            'of its own, mode 0600, %d bytes)' % (path, KEY_BYTES)))
    return path


def _make_key(path):
    """A new key at ``path``, which must not exist."""
    tmp = path + '.tmp'
    durable.remove(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)            # whatever the umask
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    # Durable before any page is encrypted with it.
    durable.sync_directory(os.path.dirname(path))


def check_memory_servers(conf, instance_uuid, stores):
    """PagerError if ``stores`` name a memory server and no CA to check
    it against is configured."""
    servers = [store for store in stores if store.startswith(TLS)]
    if servers and not conf.pooling.tls_ca_file:
        raise pager_client.PagerError(name=instance_uuid, reason=(
            'cannot page to %s: [pooling] tls_ca_file (the CA of the '
            'memory servers\' certificates) is not set'
            % ', '.join(servers)))


def sampling_arguments(conf):
    """The pager's sampling options from [sampling] (none: no
    sampling)."""
    options = conf.sampling
    if not options.enabled:
        return []
    interval = options.interval or conf.agent.report_interval
    return ['--sample-rate', repr(adaptive.initial_rate(options)),
            '--sample-interval-ms', str(round(interval * 1000)),
            '--full-pass-every', str(options.full_pass_every)]


@dataclasses.dataclass
class Record:
    """What the agent keeps of one VM's pager: where it takes its
    guest's RAM, its stores in order and the lease tokens of those that
    are memory servers, by store (a pager taking over needs the same
    ones, in the same order), its process and its QEMU's (pid and start
    time, which a reused pid does not share), and the resident target
    being kept, and the stores swap-outs write to (None: every store).
    Its file is 0600, and its repr leaves the tokens out."""

    uuid: str
    socket: str
    stores: list
    pid: int = 0
    started: int | None = None
    qemu: list | None = None
    resident_target: int | None = None
    lease_tokens: dict = dataclasses.field(default_factory=dict, repr=False)
    swap_to: list | None = None

    def save(self, conf):
        durable.write(pager_file(conf, self.uuid, RECORD),
                      json.dumps(dataclasses.asdict(self)), mode=0o600)


def records(conf):
    """Every pager record in [pager] state_dir."""
    found = []
    for path in sorted(glob.glob(os.path.join(conf.pager.state_dir,
                                              '*' + RECORD))):
        try:
            with open(path) as record:
                found.append(Record(**json.load(record)))
        except (OSError, ValueError, TypeError) as error:
            LOG.warning('Ignoring pager record %s: %s', path, error)
    return found


class VmPager:
    """One VM's pager as a driver holds it: its record, its process, its
    control connection, and its GuestPager once it holds the guest's
    RAM."""

    def __init__(self, conf, record, process):
        self.conf = conf
        self.record = record
        self.process = process
        self.client = pager_client.PagerClient(
            pager_file(conf, record.uuid, '.ctl'), process,
            pager_file(conf, record.uuid, '.log'), conf.pager.timeout)
        self.guest = None
        # Held while the agent pages the VM or collects its samples: one
        # at a time on its GuestPager's state (a collection does not wait
        # for a page-out: DomainPagers.collect).
        self.busy = threading.Lock()
        # A live migration of the VM runs, as the last collection saw
        # (migrations.running): its pages are back and its target waits.
        self.migrating = False

    @classmethod
    def start(cls, conf, instance_uuid, socket, stores=(),
              lease_tokens=None):
        """A pager taking the VM's RAM on ``socket``, keeping each page
        in ``stores`` (memory servers lent to this host, each with its
        token from ``lease_tokens``) and in the local file store, keyed
        by the VM (paging.owner_of) there and in the host's pool, and
        encrypted with the VM's page key."""
        tokens = lease_tokens or {}
        return cls._launch(conf, Record(
            instance_uuid, socket,
            list(stores) + [local_store(conf, instance_uuid)],
            lease_tokens={store: tokens[store] for store in stores
                          if store in tokens}))

    @classmethod
    def _launch(cls, conf, record):
        options = conf.pager
        state_dir(conf)
        check_memory_servers(conf, record.uuid, record.stores)
        arguments = [
            '--socket', record.socket,
            '--control', pager_file(conf, record.uuid, '.ctl'),
            '--state', pager_file(conf, record.uuid, '.state'),
            '--owner', str(paging.owner_of(record.uuid)),
            '--key-file', page_key(conf, record.uuid)]
        if conf.pooling.tls_ca_file:
            arguments += ['--tls-ca', conf.pooling.tls_ca_file]
        for index, store in enumerate(record.stores):
            arguments += ['--store', store]
            if store in record.lease_tokens:
                path = token_file(conf, record.uuid, index)
                write_token(path, record.lease_tokens[store])
                arguments += ['--store-token-file', path]
        if options.pool_mb:
            arguments += ['--pool-mb', str(options.pool_mb)]
            if options.pool_path:
                pool_directory(conf, record.uuid)
                arguments += ['--pool', options.pool_path]
        process = pager_client.launch(
            options.binary, arguments + sampling_arguments(conf),
            pager_file(conf, record.uuid, '.log'))
        record.pid, record.started = process.pid, process.started
        record.save(conf)
        LOG.info('Started memcanal-pager %d for %s (stores %s)',
                 process.pid, record.uuid, ', '.join(record.stores))
        return cls(conf, record, process)

    @classmethod
    def adopt(cls, conf, record):
        """The pager of ``record``, an earlier agent's: reconnected to if
        it still runs, else to be restarted or forgotten (``upkeep``)."""
        process = pager_client.Process(record.pid, record.started)
        if process.alive():
            LOG.info('Found memcanal-pager %d of %s still running',
                     record.pid, record.uuid)
        return cls(conf, record, process)

    def restart(self):
        """A pager taking over from this one, which died: the same state
        file, key, stores and tokens, so it finds and reads the pages it
        held out. Without the key, none: a new key would not open them."""
        LOG.warning('memcanal-pager %d of %s died; starting one that takes '
                    'over', self.process.pid, self.record.uuid)
        self.close()
        if not os.path.lexists(pager_file(self.conf, self.record.uuid, KEY)):
            raise pager_client.PagerError(name=self.record.uuid, reason=(
                'its page key is gone: no pager can read the pages it held '
                'out'))
        return self._launch(self.conf, self.record)

    def alive(self):
        return self.process.alive()

    def qemu_alive(self):
        """Whether the QEMU it attached to still runs (None: it has not
        attached yet)."""
        if self.record.qemu is None:
            return None
        return pager_client.Process.running(*self.record.qemu) is not None

    def attach(self, timeout=0.0):
        """The GuestPager once the pager holds the guest's RAM, waiting
        up to ``timeout`` seconds for it; None before."""
        deadline = time.monotonic() + timeout
        while self.guest is None:
            hello = self.client.command('hello')
            if hello.get('attached'):
                self._attached(hello)
            elif time.monotonic() >= deadline:
                return None
            else:
                time.sleep(0.05)
        return self.guest

    def _attached(self, hello):
        pid = int(hello['pid'])
        regions = [tuple(region) for region in hello['regions']]
        started = pager_client.start_time(pid)
        if self.record.qemu != [pid, started]:
            self.record.qemu = [pid, started]
            self.record.save(self.conf)
        if self.record.swap_to is not None:
            # A pager taking over writes to every store until told.
            self._swap_to(self.record.swap_to)
        self.guest = paging.GuestPager(
            self.client, paging.region_memfds(pid, regions), regions,
            self.conf.agent.report_interval, self.conf.pager.cold_after,
            paged=self.record.resident_target is not None)
        LOG.info('memcanal-pager %d holds the %d MiB of %s (QEMU %d, %d '
                 'regions)', self.process.pid,
                 self.guest.pages * paging.PAGE >> 20, self.record.uuid,
                 pid, len(regions))

    def add_stores(self, stores, lease_tokens=None):
        """Have the pager also keep pages in ``stores`` it lacks (a
        paging action's memory servers), each with its token from
        ``lease_tokens``; those it refuses are logged and not used. The
        newer token of a store it has (a new lease: a larger quota, say)
        goes to the pager, which presents it from its next connection
        on, and is recorded for the pagers that take over from it (the
        same server and VM: the same pages)."""
        tokens = lease_tokens or {}
        check_memory_servers(self.conf, self.record.uuid, stores)
        for store in stores:
            token = tokens.get(store)
            if store in self.record.stores:
                if token and self.record.lease_tokens.get(store) != token:
                    self._renew(store, token)
                continue
            try:
                self.client.command(' '.join(filter(None, (
                    'store', store, token))))
            except pager_client.UnsupportedCommand as error:
                LOG.warning('Paging %s without %s: %s', self.record.uuid,
                            store, error)
                continue
            self.record.stores.append(store)
            if token:
                self.record.lease_tokens[store] = token
            self.record.save(self.conf)

    def renew(self, lease_tokens):
        """The renewed ``lease_tokens`` of the stores the pager has
        (issue #36: the old ones expire); the pager says HELLO with each
        at once. Tokens of stores it lacks are ignored: a renewal adds
        no store."""
        for store, token in (lease_tokens or {}).items():
            if (store in self.record.stores
                    and self.record.lease_tokens.get(store) != token):
                self._renew(store, token)

    def _renew(self, store, token):
        """The newer lease ``token`` of ``store``, which the pager has."""
        try:
            self.client.command('store %s %s' % (store, token))
        except pager_client.UnsupportedCommand as error:
            LOG.warning('Paging %s with the older lease of %s: %s',
                        self.record.uuid, store, error)
            return
        self.record.lease_tokens[store] = token
        self.record.save(self.conf)

    def swap_to(self, stores):
        """Later swap-outs go to ``stores`` of the pager's (a pooling
        action's memory servers: the lender only, unless [pager]
        local_copy; the local file store if the pager refused them all),
        and so do a pager's that takes over. Until a first action names
        its stores, a pager writes to every store it has (the local one,
        and those the qemu driver started it with)."""
        placement = [store for store in self.record.stores
                     if store in stores]
        if stores and self.conf.pager.local_copy:
            placement.append(local_store(self.conf, self.record.uuid))
        if not placement:     # none, or every memory server refused
            placement = [local_store(self.conf, self.record.uuid)]
        self._swap_to(placement)
        if self.record.swap_to != placement:
            self.record.swap_to = placement
            self.record.save(self.conf)

    def _swap_to(self, placement):
        try:
            self.client.command(' '.join(['swapto'] + placement))
        except pager_client.UnsupportedCommand as error:
            LOG.warning('Paging %s to every store it has: %s',
                        self.record.uuid, error)

    def keep_resident(self, target_bytes):
        """Remember the resident target, which collections keep."""
        self.record.resident_target = target_bytes
        self.record.save(self.conf)

    def close(self):
        """Let go of the pager; it serves its guest on."""
        if self.guest is not None:
            self.guest.close()
            self.guest = None
        self.client.close()

    def forget(self):
        """The guest is gone (a pager exits with its QEMU): its pager's
        files go too, its page key, lease token files and the local
        store's copies of its pages with them. A pager that never got
        its guest's RAM would wait for it forever: it is stopped."""
        self.close()
        if self.record.qemu is None:
            self.process.kill()
        for index in range(len(self.record.stores)):
            durable.remove(token_file(self.conf, self.record.uuid, index))
        for suffix in (RECORD, '.state', '.ctl', '.sock', KEY):
            durable.remove(pager_file(self.conf, self.record.uuid, suffix))
        durable.remove(local_store_path(self.conf, self.record.uuid))


def upkeep(pager):
    """The VM's pager after its check: the same one while it runs; one
    taking over if it died while its QEMU runs (or before it attached);
    None, its files removed, once its QEMU is gone."""
    if pager.alive():
        return pager
    if pager.qemu_alive() is False:
        LOG.info('The QEMU of %s exited; so did its pager',
                 pager.record.uuid)
        pager.forget()
        return None
    return pager.restart()


def instance_info(info, pager):
    """``info`` with the VM's resident and paged bytes once it is paged
    (as it is if the pager does not answer)."""
    if pager is None:
        return info
    try:
        guest = pager.attach()
        if guest is None or not guest.paging:
            return info
        return dataclasses.replace(
            info, resident_bytes=guest.resident_bytes(),
            paged_bytes=guest.paged_bytes())
    except pager_client.PagerError as error:
        LOG.error('Paging of %s: %s', info.uuid, error)
        return info


def collect(pager, sample, accessed=None, accesses=0, migrating=None):
    """``sample`` with what the VM's pager saw since the last collection
    (its sampled accesses, its paging trace), after feeding them and
    ``accessed`` (memtrace's page indexes; None: no memtrace) to the
    VM's cold-page detector, and the resident target kept (unless
    ``migrating()``, the driver's word, says a live migration of the VM
    runs: migrations.running); ``sample`` as it is if the pager has not
    attached or fails. Its guest_stats gain the pager's fault latency
    quantiles once it has timed faults, and its refused pages
    (GuestPager.unauthentic) once there are any."""
    uuid = pager.record.uuid
    try:
        guest = pager.attach()
        if guest is None:
            return sample
        sampled, trace = guest.interval(accessed, accesses)
        if not migrations.running(pager, migrating):
            _keep_target(pager)
    except pager_client.PagerError as error:
        LOG.error('Paging of %s: %s', uuid, error)
        return sample
    failed = guest.unauthentic()
    if failed:
        LOG.error('Paging of %s: page %d failed authentication in every '
                  'store that returned it (%d refused faults): the guest '
                  'waits at it rather than read zeros; the VM has failed '
                  '(see its pager log; its copies are kept)', uuid,
                  failed['paging_unauthentic_page'],
                  failed['paging_unauthentic_pages'])
    return dataclasses.replace(
        sample, paging_trace=trace, accesses=sampled,
        guest_stats=dict(sample.guest_stats, **guest.fault_latency(),
                         **failed))


def set_sampling(pager, rate, salt):
    """The VM's pager zaps the sample of ``rate`` and ``salt`` from its
    next interval on; False before it holds the guest's RAM, or if it
    cannot."""
    guest = pager.guest
    if guest is None:
        return False
    try:
        return guest.resample(rate, salt)
    except pager_client.PagerError as error:
        LOG.error('Sampling of %s: %s', pager.record.uuid, error)
        return False


def _keep_target(pager):
    """Page out what turned cold while more than the resident target is
    resident."""
    target = pager.record.resident_target
    guest = pager.guest
    if target is None:
        return
    resident = guest.resident()
    if (int(resident.sum()) * paging.PAGE > target
            and resident[guest.cold()].any()):
        guest.set_resident(target)


def set_resident(pager, target_bytes, stores, lease_tokens, timeout):
    """Page the VM out (or in) to ``target_bytes`` resident, with
    ``stores`` (and their ``lease_tokens``) added to its pager's: the
    driver's Resize, the target then kept at each collection. Waits up
    to ``timeout`` for a pager just started to hold the guest's RAM."""
    uuid = pager.record.uuid
    started = time.monotonic()
    try:
        guest = pager.attach(timeout)
        if guest is None:
            raise pager_client.PagerError(
                name=uuid, reason='its guest\'s RAM did not reach the '
                'pager within %.0fs' % timeout)
        pager.add_stores(stores, lease_tokens)
        if stores:
            pager.swap_to(stores)
        previous = guest.set_resident(target_bytes)
    except pager_client.PagerError as error:
        raise exception.ResizeFailed(uuid=uuid, reason=str(error))
    pager.keep_resident(int(target_bytes))
    return driver.Resize('paging', previous, int(target_bytes),
                         time.monotonic() - started)
