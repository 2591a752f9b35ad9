"""The pagers of a libvirt host's domains (issues #17, #24).

A domain whose XML preloads libmemcanal-uffd.so with
``MEMCANAL_PAGER_SOCKET`` (doc/paging.md) hands its RAM to that socket
as its QEMU starts; the agent listens on every such socket of the
domains libvirt has defined, inactive ones included
(memcanal.agent.drivers.handoff). Each handoff goes to a memcanal-pager
of the domain's own (memcanal.agent.drivers.paged): at once when
[sampling] is enabled (the pager samples every guest, paged or not),
else at the domain's first paging action. A pager that dies while its
QEMU runs is replaced by one that takes over: the shim offers its uffd
again on the domain's socket, and the offer is relayed to the new pager.
An agent that restarts finds the pagers still running by their records.

Only a domain's own QEMU may hand its RAM over (issue #25): the
listeners' sockets are open to ``[libvirt] qemu_group`` alone, and an
offer is filed under a domain only if it comes from the process
libvirt's pid file of that domain names (``[libvirt] qemu_run_dir``),
by the kernel's word, with that process's own descriptors
(memcanal.agent.drivers.handoff_checks).
"""

import glob
import grp
import os
import threading
from xml.etree import ElementTree

from oslo_log import log as logging

from memcanal.agent.drivers import handoff
from memcanal.agent.drivers import handoff_checks
from memcanal.agent.drivers import paged
from memcanal.agent import pager_client
from memcanal import exception

LOG = logging.getLogger(__name__)

QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
# How much later than libvirt wrote its pid file its QEMU may seem to
# have started: /proc gives start times in ticks since boot, put on the
# wall clock as it is now. A process given a QEMU's pid once it exited
# starts after the file was written, and only after every other pid
# was handed out meanwhile (Linux assigns them in turn).
PID_FILE_SLACK = 1.0


def pager_socket(root, socket_dir=None):
    """The ``MEMCANAL_PAGER_SOCKET`` the domain gives its QEMU
    (``<qemu:commandline><qemu:env>``); else, with ``socket_dir`` (the
    QEMU wrapper's, ``[libvirt] pager_socket_dir``), ``<uuid>.sock``
    there; else None."""
    for env in root.findall('{%s}commandline/{%s}env' % (QEMU_NS, QEMU_NS)):
        if env.get('name') == 'MEMCANAL_PAGER_SOCKET' and env.get('value'):
            return env.get('value')
    uuid = root.findtext('uuid')
    if socket_dir and uuid:
        return os.path.join(socket_dir, uuid + '.sock')
    return None


def libvirt_qemus(run_dir):
    """The QEMUs libvirt runs, {pid: (domain name, when libvirt wrote its
    pid file)}, from its root-owned ``<domain name>.pid`` files in
    ``run_dir``; libvirt writes each once it forked the process that
    becomes QEMU."""
    found = {}
    for path in glob.glob(os.path.join(run_dir, '*.pid')):
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW)) as file:
                status = os.fstat(file.fileno())
                pid = int(file.read())
        except (OSError, ValueError):
            continue
        if status.st_uid == 0:
            found[pid] = (os.path.basename(path)[:-len('.pid')],
                          status.st_mtime)
    return found


class DomainPagers:
    """The pagers of the domains of ``connection`` (a virConnect), by
    uuid, and the listeners their RAM comes through. ``errors``: the
    exceptions libvirt raises."""

    def __init__(self, conf, connection, errors):
        self.conf = conf
        self.connection = connection
        self._errors = errors
        self.listeners = {}
        self._pagers = {}
        # Pagers start from the listeners' threads and the driver's.
        self._lock = threading.RLock()
        self._adopt()
        self.listen()

    def _adopt(self):
        """The pagers an earlier agent started for domains still
        running; the records of others are dropped."""
        found = paged.records(self.conf)
        if not found:
            return
        active = {domain.UUIDString() for domain in
                  self.connection.listAllDomains(0) if domain.isActive()}
        for record in found:
            pager = paged.VmPager.adopt(self.conf, record)
            if record.uuid in active:
                self._pagers[record.uuid] = pager
            else:
                pager.forget()

    def listen(self):
        """Listen on the pager socket of every domain that names one and
        has no listener yet: a QEMU hands its RAM over only as it starts.
        Held handoffs of QEMUs that exited are dropped."""
        for listener in self.listeners.values():
            listener.drop_abandoned()
        for domain in self.connection.listAllDomains(0):
            try:
                path = pager_socket(ElementTree.fromstring(
                    domain.XMLDesc(0)), self.conf.libvirt.pager_socket_dir)
            except self._errors:
                continue
            if path is None or path in self.listeners:
                continue
            try:
                self.listeners[path] = handoff.Listener(
                    path, self._domain_of, take_now=self._take_now,
                    gid=grp.getgrnam(self.conf.libvirt.qemu_group).gr_gid)
            except KeyError:
                LOG.error('Cannot listen on %s for the RAM of %s: no group '
                          '%s ([libvirt] qemu_group)', path,
                          domain.UUIDString(), self.conf.libvirt.qemu_group)
            except (OSError, handoff.HandoffError) as error:
                LOG.warning('Cannot listen on %s for the RAM of %s: %s',
                            path, domain.UUIDString(), error)

    def _domain_of(self, peer):
        """The uuid of the domain whose QEMU ``peer`` is: the process
        libvirt's pid file of the domain names, started before libvirt
        wrote it (not one given the same pid since), the uuid libvirt
        gives that domain. Refused otherwise."""
        found = libvirt_qemus(self.conf.libvirt.qemu_run_dir).get(peer.pid)
        if found is None:
            raise handoff_checks.Refused('not_qemu', (
                'pid %d (uid %d) is no QEMU libvirt runs' % (
                    peer.pid, peer.uid)))
        name, written = found
        if peer.started is None or (
                peer.started_at() > written + PID_FILE_SLACK):
            raise handoff_checks.Refused('reused_pid', (
                'pid %d started after libvirt wrote %s.pid: it is not the '
                'QEMU libvirt started' % (peer.pid, name)))
        try:
            return self.connection.lookupByName(name).UUIDString()
        except self._errors as error:
            raise handoff_checks.Refused('not_qemu', (
                'libvirt knows no domain %s: %s' % (name, error)))

    def pager(self, uuid):
        """The domain's VmPager, or None."""
        with self._lock:
            return self._pagers.get(uuid)

    def _take_now(self, uuid, offer):
        """Relay an offer at once (the listener's thread) when the
        domain is sampled, or its pager died or waits for it; else it
        is held, until the domain is paged."""
        with self._lock:
            pager = self._pagers.get(uuid)
            if pager is not None and pager.record.qemu not in (
                    None, [offer.pid, offer.started]):
                # A new QEMU of the domain: the old one's pager is done.
                pager.forget()
                del self._pagers[uuid]
                pager = None
            if pager is None and not self.conf.sampling.enabled:
                return False
            try:
                if pager is not None and pager.alive() and pager.attach():
                    return False        # served already; nothing to take
                self._relay(uuid, offer)
            except (handoff.HandoffError, pager_client.PagerError) as error:
                LOG.error('The RAM of %s did not reach its pager: %s',
                          uuid, error)
            return True

    def _relay(self, uuid, offer, stores=(), lease_tokens=None):
        """Give ``offer`` to the domain's pager: a new one (with
        ``stores`` and their ``lease_tokens``), one taking over from a
        pager that died, or one waiting for it."""
        pager = self._pagers.get(uuid)
        try:
            if pager is None:
                pager = paged.VmPager.start(
                    self.conf, uuid,
                    paged.pager_file(self.conf, uuid, '.sock'), stores,
                    lease_tokens)
            elif not pager.alive():
                pager = pager.restart()
        except pager_client.PagerError:
            offer.close()
            raise
        self._pagers[uuid] = pager
        offer.relay(pager.record.socket, self.conf.pager.timeout,
                    pager.alive)

    def refresh(self, active):
        """Forget the pagers of domains no longer ``active`` (their QEMU
        exited, and a pager exits with it); replace those that died."""
        self.listen()
        with self._lock:
            for uuid, pager in list(self._pagers.items()):
                if uuid not in active:
                    LOG.info('Domain %s stopped: its pager is done', uuid)
                    pager.forget()
                    del self._pagers[uuid]
                else:
                    self._upkeep(uuid, pager)

    def _upkeep(self, uuid, pager):
        """The domain's pager, replaced if it died (None once its QEMU
        is gone too)."""
        try:
            kept = paged.upkeep(pager)
        except pager_client.PagerError as error:
            LOG.error('No pager for %s: %s', uuid, error)
            return None
        if kept is None:
            del self._pagers[uuid]
        elif kept is not pager:
            self._pagers[uuid] = kept
            # The shim's re-offer, if the listener held it.
            for listener in self.listeners.values():
                offer = listener.take(uuid)
                if offer is not None:
                    try:
                        self._relay(uuid, offer)
                    except (handoff.HandoffError,
                            pager_client.PagerError) as error:
                        LOG.error('The RAM of %s did not reach its pager: '
                                  '%s', uuid, error)
        return kept

    def collect(self, uuid, sample, migrating=None):
        """``sample`` with what the domain's pager saw (paged.collect,
        ``migrating`` its question whether a live migration of the
        domain runs); as it is while the domain is being paged, rather
        than wait for it (a page-out takes as long as its pages take to
        reach their stores)."""
        with self._lock:
            pager = self._pagers.get(uuid)
            if pager is None or self._upkeep(uuid, pager) is None:
                return sample
            pager = self._pagers[uuid]
        if not pager.busy.acquire(blocking=False):
            LOG.debug('%s is being paged: its samples wait for the next '
                      'report', uuid)
            return sample
        try:
            return paged.collect(pager, sample, migrating=migrating)
        finally:
            pager.busy.release()

    def page(self, uuid, socket, target_bytes, stores, lease_tokens=None):
        """Page the domain to ``target_bytes`` resident, starting its
        pager with ``stores`` (and their ``lease_tokens``) if it has
        none; the Resize. The pagers' lock is held only to find or start
        the pager: the other domains' pagers are kept and collected while
        this one pages."""
        with self._lock:
            pager = self._pagers.get(uuid)
            if pager is not None:
                pager = self._upkeep(uuid, pager)
            if pager is None:
                try:
                    self._relay(uuid, self._held(uuid, socket), stores,
                                lease_tokens)
                except (handoff.HandoffError,
                        pager_client.PagerError) as error:
                    raise exception.ResizeFailed(uuid=uuid,
                                                 reason=str(error))
                pager = self._pagers[uuid]
        with pager.busy:
            return paged.set_resident(pager, target_bytes, stores,
                                      lease_tokens, self.conf.pager.timeout)

    def _held(self, uuid, socket):
        listener = self.listeners.get(socket)
        offer = listener.take(uuid) if listener is not None else None
        if offer is None:
            raise exception.ResizeFailed(uuid=uuid, reason=(
                'its QEMU has not handed its RAM to the agent on %s: the '
                'domain needs the pager socket in its XML and [libvirt] '
                'paging, and must start after the agent listens there'
                % socket if socket else 'no MEMCANAL_PAGER_SOCKET in its '
                'XML (doc/paging.md)'))
        return offer

    def stop(self):
        """Stop listening (held handoffs are dropped: their guests run
        unpaged) and let go of the pagers: they serve their guests on,
        for the next agent to find."""
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()
        with self._lock:
            for pager in self._pagers.values():
                pager.close()
            self._pagers.clear()
