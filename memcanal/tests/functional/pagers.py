"""memcanal-pager as the attack tests run it (issue #25): VMs whose
pagers seal their pages and keep a copy of each on a memory server (the
lender: TLS, lease tokens) and in a file, and a pager told to quit as it
starts, to see what it refuses. Shared by test_pager_attacks.py,
test_pager_file_attacks.py and test_pager_lender_attacks.py, which take
its fixtures by assignment."""

import base64
import os
import subprocess
import uuid

import pytest

from memcanal.agent import paging
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_pager as pager_tests

POOL_MB = 80              # both VMs' pages, and A's twice over


@pytest.fixture(scope='module')
def build(tmp_path_factory):
    return services.build_pager(tmp_path_factory.mktemp('pager-build'))


@pytest.fixture
def lender(short_tmp_path):
    """A memory server as deployed: TLS, lease tokens, an admin socket."""
    directory = os.path.join(short_tmp_path, 'lender')
    os.mkdir(directory)
    server = memservers.Memserver(directory, 65536)
    yield server
    server.stop()


@pytest.fixture
def vms():
    """The Vms a test appends; their pagers and guests stopped after."""
    started = []
    yield started
    for vm in started:
        vm.process.stop()


class Vm:
    """A VM's memory as its host pages it: its pager seals with ``key``
    (None: plaintext) and keeps a copy of each page on the lender (TLS,
    its lease token) and in a file, in ``order``; the pool too if given;
    sampled at ``rate`` (0: not), sample_guest run with ``guest``'s
    options.
    """

    def __init__(self, build, directory, lender, key, order=('lender',
                 'file'), pool=None, guest_mb=64, secret=None, owner=None,
                 quota=None, options=(), rate=0, guest=('-r', '2', '-t',
                                                         '2'),
                 lifetime=3600):
        os.mkdir(directory)
        self.owner = owner or paging.owner_of(str(uuid.uuid4()))
        self.lease = str(uuid.uuid4())
        token = lender.token(self.owner, quota_pages=quota or guest_mb * 512,
                             lease=self.lease, lifetime=lifetime)
        self.file = os.path.join(directory, 'pages')
        stores = {'lender': ('tls:%s' % lender.name,
                             base64.b64encode(token).decode()),
                  'file': 'file:%s' % self.file}
        options = ['--owner', str(self.owner), '--tls-ca', lender.ca,
                   *options]
        if pool:
            options += ['--pool', pool, '--pool-mb', str(POOL_MB)]
        self.process = pager_tests.SampledProcess(
            build, directory, rate, key=key,
            stores=[stores[name] for name in order], options=options,
            guest=('-m', str(guest_mb), *guest)
            + (('-S', secret) if secret else ()))
        self.pages = self.process.pages

    def swap_out(self):
        out = self.process.command('swapout 0 %d' % self.pages)
        assert out['dropped'] == self.pages and out['lost'] == 0, out
        return out

    def check(self):
        """The guest's wrong words, every page read back."""
        self.process.send('check')
        return self.process.answer()['check']

    def stats(self):
        return self.process.command('stats')


def run_pager(build, directory, *options):
    """memcanal-pager started with ``options`` and told to quit: its
    exit status and stderr."""
    done = subprocess.run(
        [str(build / 'memcanal-pager'), '--socket',
         os.path.join(directory, 'pager.sock'), *options],
        input='quit\n', capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr
