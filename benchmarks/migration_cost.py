"""What a paged VM's live migration costs, and what a bulk swap-in before
it saves (issue #35).

    bash tools/build-test-guest.sh       # once; and tools/install-libvirt.sh
    sudo flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/migration_cost.py [--data-mb 64] [--target-mb 64]

QEMU's live migration reads every page of guest RAM. A page the pager
holds out on a memory server is read through the pager's fault path:
one userfaultfd fault, a GET over TLS (16 pages when the faults are
sequential: the pager's read-ahead), a UFFDIO_COPY. This measures that
on the production path, three times in one run, each on a fresh guest:

- ``unpaged``: the test guest as a libvirt domain, sampled by its pager
  as pooling_speed.py runs it (test_libvirt_sampling.py's fixtures: 10 %
  sample, 1 s intervals, a full pass every 2), --data-mb MiB of random
  data written (md5sum noted) and a 32 MiB hot loop running; migrated
  as it is: every page resident;
- ``paged``: the same, once the detector holds the data cold, paged to
  --target-mb resident by ``apply_memory_target(uuid, target, 'paging',
  [tls:server], tokens)`` as the agent applies a pooling action (a TLS
  memory server on loopback; the lender holds the only copy), then
  migrated as it is: QEMU's reads fault the pages back from the server;
- ``swapin_first``: paged the same way, then every page brought back by
  the agent's migration path (``migrations.before_migration``: one
  ``swapin`` of the whole VM, runs of 16 pages a GET), then migrated;
- ``swapin_during``: paged the same way, migrated, and the agent's
  collection run at once as it runs when libvirt says the domain
  migrates out (the libvirt driver's answer forced: libvirt knows
  nothing of a migration asked of QEMU directly): it brings every page
  back while QEMU reads them (``during_pages``, ``during_done_s``: when
  it returned, from ``migrate``). What the agent does for a nova live
  migration, at best (it sees one at its next collection).

The migration: QEMU's own, between two QEMU processes on this machine.
libvirt refuses to migrate a domain to the host it is on (one libvirtd,
one host uuid), so the source is the libvirt domain (its QEMU started by
libvirtd, RAM handed to the driver's pager by the shim), and the
destination a second QEMU this script starts as root with the source's
own command line (read from /proc, so the devices match) but its own
monitor and serial sockets and ``-incoming tcp:127.0.0.1:PORT``; the
source gets ``migrate`` through libvirt's monitor passthrough
(``virDomainQemuMonitorCommand``: the domain is then "tainted"), with
``max-bandwidth`` unlimited as libvirt and nova set it and QEMU's
default downtime limit (300 ms) unless --downtime-ms. The destination
is not pageable: no shim, its RAM a memfd the migration stream fills,
so every page arrives resident there. Once the migration completes
(QMP ``query-migrate``: total time, downtime, setup time, RAM moved),
the destination's guest checks its data (md5sum over the destination's
serial console) and the destination QEMU is stopped.

Per case: ``migrate_s`` (wall, from ``migrate`` to ``completed``),
``total_ms``, ``downtime_ms``, ``setup_ms``, ``ram_mib``, ``mbit_s``,
``dirty_syncs`` (QEMU's); the pager's ``served_tls`` (pages the memory
server gave during the migration), ``faults_missing``, ``read_ahead``,
``faults_minor`` (sampled pages' faults, as QEMU read them) deltas over
the migration, ``fault_p50_us`` and ``fault_p99_us`` of the TLS faults
(the pager's latest 262,144, almost all of them the migration's); for
the paged cases the page-out's Resize, and for ``swapin_first`` the
swap-in's seconds and pages (``swapin_s``, ``swapin_pages``) and
``cost_s`` = swap-in + migration. ``check_ok`` and ``lost``. The last
line is one JSON object of all of it; exits 1 if a check fails or a
page is lost.
"""

import argparse
import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import time
import types

import libvirt_qemu

from memcanal.agent.drivers import migrations
from memcanal.tests.functional import services
from memcanal.tests.functional import test_libvirt_sampling as sampling
from memcanal.tests.functional import test_paging_carriers as carriers

import pooling_speed

MiB = 2 ** 20
# libvirt's and nova's default: no bandwidth limit (bytes/s).
UNLIMITED = 2 ** 40
CASES = ('unpaged', 'paged', 'swapin_first', 'swapin_during')


def say(*words):
    print(time.strftime('%H:%M:%S'), *words, flush=True)


class Qmp:
    """A QEMU monitor on a Unix socket, in QMP: one command at a time,
    events skipped."""

    def __init__(self, path, timeout=60):
        self.socket = services.wait_for(
            lambda: self._connect(path), timeout, 'QMP at ' + path)
        self.lines = self.socket.makefile('r')
        json.loads(self.lines.readline())           # the greeting
        self.execute('qmp_capabilities')

    @staticmethod
    def _connect(path):
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
            return connection
        except OSError:
            return None

    def execute(self, command, **arguments):
        self.socket.sendall(json.dumps(
            {'execute': command, 'arguments': arguments}).encode() + b'\n')
        while True:
            answer = json.loads(self.lines.readline())
            if 'return' in answer:
                return answer['return']
            if 'error' in answer:
                raise RuntimeError('%s: %s' % (command, answer['error']))

    def close(self):
        self.lines.close()
        self.socket.close()


def source_qmp(domain, command, **arguments):
    """A QMP command to the libvirt domain's QEMU (libvirt's monitor
    passthrough)."""
    answer = json.loads(libvirt_qemu.qemuMonitorCommand(
        domain, json.dumps({'execute': command, 'arguments': arguments}), 0))
    if 'error' in answer:
        raise RuntimeError('%s: %s' % (command, answer['error']))
    return answer['return']


def qemu_pid(domain):
    with open('/run/libvirt/qemu/%s.pid' % domain.name()) as pid_file:
        return int(pid_file.read())


def qemu_argv(domain):
    """The command line libvirt started the domain's QEMU with."""
    with open('/proc/%d/cmdline' % qemu_pid(domain), 'rb') as cmdline:
        return cmdline.read().decode().split('\0')[:-1]


def destination_command(argv, qmp_path, console_path, port):
    """The source QEMU's command line ``argv`` with this script's
    monitor and serial sockets, waiting for the migration on ``port``."""
    command, skip = [], False
    for arg, following in zip(argv, argv[1:] + [None]):
        if skip:
            skip = False
            continue
        if arg in ('-S', '-daemonize'):
            continue
        if arg == '-chardev' and following.startswith(
                'socket,id=charmonitor'):
            command += [arg, 'socket,id=charmonitor,path=%s,server=on,'
                        'wait=off' % qmp_path]
            skip = True
        elif arg == '-chardev' and following.startswith(
                'socket,id=charserial0'):
            command += [arg, 'socket,id=charserial0,path=%s' % console_path]
            skip = True
        elif arg == '-pidfile':
            skip = True
        else:
            command.append(arg)
    return command + ['-incoming', 'tcp:127.0.0.1:%d' % port]


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def destination(domain, scratch, name):
    """A QEMU waiting for the domain's migration: (its QMP, its guest's
    console as a Host-like object), the console accepted once the
    migration has begun (QEMU connects as it starts)."""
    qmp_path = os.path.join(scratch, name + '.dst.qmp')
    console_path = os.path.join(scratch, name + '.dst.console')
    listener = carriers.console_listener(console_path)
    port = free_port()
    log = open(os.path.join(scratch, name + '.dst.log'), 'w')
    command = destination_command(qemu_argv(domain), qmp_path,
                                  console_path, port)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    try:
        try:
            qmp = Qmp(qmp_path)
            listener.settimeout(60)
            serial, _ = listener.accept()
        except BaseException:
            say('destination', command, 'failed:', open(log.name).read())
            raise
        stream = serial.makefile('rw', errors='replace', newline='')
        guest = types.SimpleNamespace(
            console=carriers.Console(stream, stream))
        yield qmp, guest, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        listener.close()
        log.close()


def migrate(domain, port, args, during=None):
    """Live-migrate the domain's QEMU to 127.0.0.1:``port``, calling
    ``during()`` once it began: QEMU's query-migrate once it ended, the
    wall seconds, and ``during``'s answer and seconds."""
    source_qmp(domain, 'migrate-set-parameters', **{
        'max-bandwidth': UNLIMITED, 'downtime-limit': args.downtime_ms})
    started = time.monotonic()
    source_qmp(domain, 'migrate', uri='tcp:127.0.0.1:%d' % port)
    if during is not None:
        answer = during()
        during = (answer, time.monotonic() - started)
    raised = False
    while True:
        state = source_qmp(domain, 'query-migrate')
        if state.get('status') in ('failed', 'cancelled'):
            break
        if state.get('status') == 'completed':
            # QEMU says completed a moment before it computes the total
            # time and downtime (0 until then): ask again for them.
            wall = time.monotonic() - started
            for _ in range(20):
                if state.get('total-time'):
                    break
                time.sleep(0.05)
                state = source_qmp(domain, 'query-migrate')
            state['wall_s'] = wall
            break
        waited = time.monotonic() - started
        if not raised and waited > args.converge_after:
            # A TCG guest's hot loop may dirty pages faster than the
            # limit allows to send the last ones: say so, and let more.
            say('not converged after %.0fs (%s); downtime limit raised to '
                '%d ms' % (waited, state.get('ram'), args.raised_downtime_ms))
            source_qmp(domain, 'migrate-set-parameters', **{
                'downtime-limit': args.raised_downtime_ms})
            raised = True
        if waited > args.timeout:
            source_qmp(domain, 'migrate_cancel')
        time.sleep(0.05)
    state.setdefault('wall_s', time.monotonic() - started)
    state['downtime_raised'] = raised
    state['during'] = during
    return state


def collection_seeing_the_migration(host):
    """The agent's collection of the domain as it runs when libvirt says
    the domain migrates out (LibvirtDriver._migrating_out; libvirt
    does not know of a migration asked of QEMU behind its back): it
    brings every page back (migrations.running), while QEMU reads them.
    The pages it fetched."""
    host.hypervisor._migrating_out = lambda uuid: True
    pager = host.pager()
    fetched = pager.client.command('stats')['swapped_in']
    host.hypervisor.collect(host.uuid)
    assert pager.migrating
    return pager.client.command('stats')['swapped_in'] - fetched


def grew(before, after, key):
    """How much a pager's counter grew (None if it has none)."""
    if key not in after:
        return None
    return after[key] - before.get(key, 0)


def tls_index(pager):
    return next(i for i, store in enumerate(pager.record.stores)
                if store.startswith('tls:'))


def page_out(host, server, target_bytes):
    """The pooling action, as the agent applies it: its Resize."""
    stores, tokens = sampling.lent(server, host.uuid)
    resize = host.hypervisor.apply_memory_target(
        host.uuid, target_bytes, 'paging', stores, tokens)
    pooling_speed.remove_local_copies(host.pager())
    return resize


def one_case(case, args, conf, scratch, connection, files, server):
    """Boot a guest, page it (or not), migrate it, check it on the
    destination: the case's figures."""
    figures = {}
    with sampling.booted(conf, scratch, connection, files, case) as host:
        say(case, ': guest up, data written')
        pager = host.pager()
        if case != 'unpaged':
            sampling.wait_cold(host)
            resize = page_out(host, server, args.target_mb * MiB)
            say(case, ': paged out', resize)
            figures.update(pageout_s=round(resize.seconds, 2),
                           paged_mib=round(pager.guest.paged_bytes() / MiB,
                                           1))
        if case == 'swapin_first':
            back = migrations.before_migration(pager)
            say(case, ': swapped in', back)
            figures.update(swapin_s=round(back['seconds'], 2),
                           swapin_pages=back['fetched'])
        before = pager.client.command('stats')
        figures['out_pages_before'] = before['out_pages']
        with destination(host.domain, scratch, case) as (qmp, guest, port):
            say(case, ': migrating to port', port)
            state = migrate(host.domain, port, args, during=(
                functools.partial(collection_seeing_the_migration, host)
                if case == 'swapin_during' else None))
            after = pager.client.command('stats')
            say(case, ': migration', state['status'], 'in %.2fs' % (
                state['wall_s']))
            ok, check_s = False, None
            if state['status'] == 'completed':
                ok, check_s = pooling_speed.check(guest)
                say(case, ': check on the destination',
                    'ok' if ok else 'BAD', 'in %.1fs' % check_s)
            with contextlib.suppress(Exception):
                qmp.execute('quit')     # it may exit before it answers
        ram = state.get('ram', {})
        tcp = (after.get('sources') or {}).get('tcp') or {}
        index = tls_index(pager) if case != 'unpaged' else None
        figures.update(
            status=state['status'],
            migrate_s=round(state['wall_s'], 2),
            total_ms=state.get('total-time'),
            downtime_ms=state.get('downtime'),
            setup_ms=state.get('setup-time'),
            ram_mib=round(ram.get('transferred', 0) / MiB, 1),
            mbit_s=ram.get('mbps'),
            dirty_syncs=ram.get('dirty-sync-count'),
            downtime_raised=state['downtime_raised'],
            served_tls=(after['served'][index] - before['served'][index]
                        if index is not None else 0),
            faults_missing=grew(before, after, 'faults_missing'),
            read_ahead=grew(before, after, 'read_ahead'),
            faults_minor=grew(before, after, 'faults_minor'),
            swapped_in=grew(before, after, 'swapped_in'),
            tls_faults=tcp.get('faults', 0) - (
                ((before.get('sources') or {}).get('tcp') or {}).get(
                    'faults', 0)),
            fault_p50_us=tcp.get('p50_us'), fault_p99_us=tcp.get('p99_us'),
            out_pages_after=after['out_pages'],
            check_ok=ok, check_s=round(check_s, 1) if check_s else None,
            lost=after['lost'])
        if case == 'swapin_first':
            figures['cost_s'] = round(figures['swapin_s']
                                      + figures['migrate_s'], 2)
        elif case != 'unpaged':
            figures['cost_s'] = figures['migrate_s']
        if state['during'] is not None:
            figures.update(during_pages=state['during'][0],
                           during_done_s=round(state['during'][1], 2))
    return figures


def run(args, scratch):
    result = {}
    with pooling_speed.guest_setup(args, scratch) as (
            conf, server, files, connection):
        for case in args.cases:
            result[case] = one_case(case, args, conf, scratch, connection,
                                    files, server)
            say(case, json.dumps(result[case]))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    pooling_speed.guest_options(parser)
    parser.add_argument('--downtime-ms', type=int, default=300,
                        help='QEMU\'s downtime limit (its default)')
    parser.add_argument('--converge-after', type=float, default=60,
                        help='seconds after which the limit is raised')
    parser.add_argument('--raised-downtime-ms', type=int, default=2000)
    parser.add_argument('--timeout', type=float, default=300,
                        help='seconds before a migration is cancelled')
    parser.add_argument('--cases', nargs='+', default=list(CASES),
                        choices=CASES)
    say('load average', os.getloadavg())
    result = pooling_speed.in_scratch(run, parser.parse_args())
    for case, figures in result.items():
        print(case)
        for key, value in figures.items():
            print('  %-20s %s' % (key, value))
    result['load_average'] = os.getloadavg()
    print(json.dumps(result))
    sys.exit(0 if all(figures['check_ok'] and figures['lost'] == 0
                      for figures in result.values()
                      if isinstance(figures, dict)) else 1)


if __name__ == '__main__':
    main()
