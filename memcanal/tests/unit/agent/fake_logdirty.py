"""A stand-in for memcanal-logdirty and libvirt's Xen driver, for unit
tests.

``install(directory, lines)`` writes an executable that behaves as the
helper does towards the agent: ``BINARY DOMID INTERVAL 0`` "turns
log-dirty on" for DOMID (a file ``on-DOMID`` in its directory; an ENABLE
on a domain already on fails as Xen's does, EINVAL, exit 1), prints the
lines given, then waits; SIGTERM turns it off (the file removed) and
ends it. The real helper is hypervisor-patches/xen/logdirty.c, exercised
by memcanal/tests/functional/test_xen.py.
"""

import json
import os
import stat
import sys

SCRIPT = '''#!%(python)s
import os, signal, sys, time
directory = %(directory)r
domid = sys.argv[1]
marker = os.path.join(directory, 'on-' + domid)
with open(os.path.join(directory, 'calls'), 'a') as calls:
    calls.write(' '.join(sys.argv[1:]) + '\\n')
if os.path.exists(marker):
    sys.stderr.write('memcanal-logdirty: enable: Invalid argument\\n')
    sys.exit(1)
open(marker, 'w').close()
def off(signo, frame):
    os.unlink(marker)
    sys.exit(0)
signal.signal(signal.SIGTERM, off)
with open(os.path.join(directory, 'lines')) as lines:
    for line in lines:
        sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(%(delay)r)
while True:
    time.sleep(0.05)
'''


def interval(index, runs, pages=1044480, **fields):
    """One of the helper's lines, as it prints it."""
    document = {'interval': index, 'start_ns': 1000 * index,
                'end_ns': 1000 * (index + 1),
                'dirty': sum(count for _, count in runs), 'pfns': runs,
                'cost_ns': 500, 'pages': pages}
    document.update(fields)
    return json.dumps(document)


def install(directory, lines=(), delay=0.0):
    """The fake helper's path, printing ``lines`` when started,
    ``delay`` seconds apart."""
    with open(os.path.join(directory, 'lines'), 'w') as file:
        file.writelines(line + '\n' for line in lines)
    path = os.path.join(directory, 'memcanal-logdirty')
    with open(path, 'w') as file:
        file.write(SCRIPT % {'python': sys.executable,
                             'directory': directory, 'delay': delay})
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def log_dirty_on(directory):
    """The domain ids the fake has log-dirty on for."""
    return sorted(int(name[3:]) for name in os.listdir(directory)
                  if name.startswith('on-'))


XML = '''<domain type='xen'>
  <name>%s</name><uuid>%s</uuid>
  <memory unit='KiB'>%d</memory><currentMemory unit='KiB'>%d</currentMemory>
  <os><type arch='x86_64'>xenpvh</type></os>
  <devices><memballoon model='xen'/></devices>
</domain>'''


class Domain:
    """A libxl domain as the driver reads it."""

    def __init__(self, domid, uuid, memory_kib, name=None):
        self.domid = domid
        self.uuid = uuid
        self.name = name or 'vm%d' % domid
        self.max_kib = memory_kib
        self.current_kib = memory_kib
        self.calls = []

    def ID(self):
        return self.domid

    def UUIDString(self):
        return self.uuid

    def XMLDesc(self, flags=0):
        return XML % (self.name, self.uuid, self.max_kib, self.current_kib)

    def info(self):
        return [1, self.max_kib, self.current_kib, 1, 0]

    def maxMemory(self):
        return self.max_kib

    def memoryStats(self):
        # What libxl gives: the balloon's size and the maximum.
        return {'actual': self.current_kib, 'available': self.max_kib}

    def setMemoryFlags(self, kib, flags):
        self.calls.append(('setMemoryFlags', kib, flags))
        self.current_kib = kib


class Connection:
    """libvirt's Xen driver with Domain-0 and ``domains``."""

    def __init__(self, domains, host_mib=8192, dom0_kib=768 * 1024):
        self.domains = {0: Domain(0, '00000000-0000-0000-0000-000000000000',
                                  dom0_kib, 'Domain-0')}
        self.domains.update((domain.domid, domain) for domain in domains)
        self.host_mib = host_mib

    def getType(self):
        return 'Xen'

    def getInfo(self):
        return ['x86_64', self.host_mib, 2, 2000, 1, 1, 2, 1]

    def listAllDomains(self, flags=0):
        return list(self.domains.values())

    def lookupByID(self, domid):
        return self.domains[domid]

    def lookupByUUIDString(self, uuid):
        [domain] = [domain for domain in self.domains.values()
                    if domain.uuid == uuid]
        return domain
