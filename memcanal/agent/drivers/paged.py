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
takes over (same ``--state`` and stores) from a pager that died while
its QEMU runs.
"""

import dataclasses
import glob
import json
import os
import time

from oslo_log import log as logging

from memcanal.agent import driver
from memcanal.agent import durable
from memcanal.agent import pager_client
from memcanal.agent import paging
from memcanal import exception

LOG = logging.getLogger(__name__)
RECORD = '.json'


def local_store(conf, instance_uuid):
    """The store spec of the VM's pages in [pager] local_store_dir."""
    os.makedirs(conf.pager.local_store_dir, exist_ok=True)
    return 'file:%s' % os.path.join(conf.pager.local_store_dir,
                                    instance_uuid + '.pages')


def pager_file(conf, instance_uuid, suffix):
    """The VM's pager file ending in ``suffix`` in [pager] state_dir."""
    return os.path.join(conf.pager.state_dir, instance_uuid + suffix)


def sampling_arguments(conf):
    """The pager's sampling options from [sampling] (none: no
    sampling)."""
    options = conf.sampling
    if not options.enabled:
        return []
    interval = options.interval or conf.agent.report_interval
    return ['--sample-rate', repr(options.rate),
            '--sample-interval-ms', str(round(interval * 1000)),
            '--full-pass-every', str(options.full_pass_every)]


@dataclasses.dataclass
class Record:
    """What the agent keeps of one VM's pager: where it takes its
    guest's RAM, its stores in order (a pager taking over needs the same
    ones), its process and its QEMU's (pid and start time, which a
    reused pid does not share), and the resident target being kept."""

    uuid: str
    socket: str
    stores: list
    pid: int = 0
    started: int | None = None
    qemu: list | None = None
    resident_target: int | None = None

    def save(self, conf):
        durable.write(pager_file(conf, self.uuid, RECORD),
                      json.dumps(dataclasses.asdict(self)))


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

    @classmethod
    def start(cls, conf, instance_uuid, socket, stores=()):
        """A pager taking the VM's RAM on ``socket``, keeping each page
        in ``stores`` (memory servers lent to this host) and in the
        local file store, keyed by the VM (paging.owner_of) there and in
        the host's pool."""
        return cls._launch(conf, Record(
            instance_uuid, socket,
            list(stores) + [local_store(conf, instance_uuid)]))

    @classmethod
    def _launch(cls, conf, record):
        options = conf.pager
        # The agent's alone: records name the stores, and control
        # sockets command paging.
        os.makedirs(options.state_dir, mode=0o700, exist_ok=True)
        arguments = [
            '--socket', record.socket,
            '--control', pager_file(conf, record.uuid, '.ctl'),
            '--state', pager_file(conf, record.uuid, '.state'),
            '--owner', str(paging.owner_of(record.uuid))]
        for store in record.stores:
            arguments += ['--store', store]
        if options.pool_mb:
            arguments += ['--pool-mb', str(options.pool_mb)]
            if options.pool_path:
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
        file and stores, so it finds the pages it held out."""
        LOG.warning('memcanal-pager %d of %s died; starting one that takes '
                    'over', self.process.pid, self.record.uuid)
        self.close()
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
        self.guest = paging.GuestPager(
            self.client, paging.region_memfds(pid, regions), regions,
            self.conf.agent.report_interval, self.conf.pager.cold_after,
            paged=self.record.resident_target is not None)
        LOG.info('memcanal-pager %d holds the %d MiB of %s (QEMU %d, %d '
                 'regions)', self.process.pid,
                 self.guest.pages * paging.PAGE >> 20, self.record.uuid,
                 pid, len(regions))

    def add_stores(self, stores):
        """Have the pager also keep pages in ``stores`` it lacks (a
        paging action's memory servers); those it refuses are logged
        and not used."""
        for store in stores:
            if store in self.record.stores:
                continue
            try:
                self.client.command('store %s' % store)
            except pager_client.UnsupportedCommand as error:
                LOG.warning('Paging %s without %s: %s', self.record.uuid,
                            store, error)
                continue
            self.record.stores.append(store)
            self.record.save(self.conf)

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
        files go too. A pager that never got its guest's RAM would wait
        for it forever: it is stopped."""
        self.close()
        if self.record.qemu is None:
            self.process.kill()
        for suffix in (RECORD, '.state', '.ctl', '.sock'):
            durable.remove(pager_file(self.conf, self.record.uuid, suffix))


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


def collect(pager, sample, accessed=None, accesses=0):
    """``sample`` with what the VM's pager saw since the last collection
    (its sampled accesses, its paging trace), after feeding them and
    ``accessed`` (memtrace's page indexes; None: no memtrace) to the
    VM's cold-page detector, and the resident target kept; ``sample``
    as it is if the pager has not attached or fails."""
    uuid = pager.record.uuid
    try:
        guest = pager.attach()
        if guest is None:
            return sample
        sampled, trace = guest.interval(accessed, accesses)
        _keep_target(pager)
    except pager_client.PagerError as error:
        LOG.error('Paging of %s: %s', uuid, error)
        return sample
    return dataclasses.replace(sample, paging_trace=trace, accesses=sampled)


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


def set_resident(pager, target_bytes, stores, timeout):
    """Page the VM out (or in) to ``target_bytes`` resident, with
    ``stores`` added to its pager's: the driver's Resize, the target
    then kept at each collection. Waits up to ``timeout`` for a pager
    just started to hold the guest's RAM."""
    uuid = pager.record.uuid
    started = time.monotonic()
    try:
        guest = pager.attach(timeout)
        if guest is None:
            raise pager_client.PagerError(
                name=uuid, reason='its guest\'s RAM did not reach the '
                'pager within %.0fs' % timeout)
        pager.add_stores(stores)
        previous = guest.set_resident(target_bytes)
    except pager_client.PagerError as error:
        raise exception.ResizeFailed(uuid=uuid, reason=str(error))
    pager.keep_resident(int(target_bytes))
    return driver.Resize('paging', previous, int(target_bytes),
                         time.monotonic() - started)
