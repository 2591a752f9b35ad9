"""memcanal-memserver as a deployment runs it, for the functional tests:
TLS 1.3 with a certificate from a test CA (tools/pki.sh), lease tokens
signed by a test service key (memcanal.service.lease_tokens), and the
operator's admin socket."""

import os
import subprocess
import time
import uuid

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives import serialization

from memcanal.agent import memserver
from memcanal.service import lease_tokens
from memcanal.tests.functional import services

PKI_SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                          'tools', 'pki.sh')


def make_pki(directory):
    """(CA file, certificate, key) of a memory server on 127.0.0.1."""
    for args in (['ca', directory],
                 ['server', directory, 'memserver', '127.0.0.1']):
        subprocess.run([PKI_SCRIPT] + args, check=True, capture_output=True)
    return tuple(os.path.join(directory, name) for name in (
        'ca.pem', 'memserver.pem', 'memserver-key.pem'))


def write_public_key(private_key, path):
    with open(path, 'wb') as out:
        out.write(private_key.public_key().public_bytes(
            serialization.Encoding.PEM,
            serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def process_status(pid):
    """(resident KiB, threads, open descriptors) of process pid: what
    a memory server holds for its clients, read from /proc."""
    fields = {}
    for line in open('/proc/%d/status' % pid):
        key, _, value = line.partition(':')
        fields[key] = value.split()
    return (int(fields['VmRSS'][0]), int(fields['Threads'][0]),
            len(os.listdir('/proc/%d/fd' % pid)))


class Memserver:
    """A TLS memory server on a loopback port it picks, and clients of
    it; ``options`` are more command-line options."""

    def __init__(self, directory, max_pages, *options):
        self.ca, cert, key = make_pki(directory)
        self.lease_key = ed25519.Ed25519PrivateKey.generate()
        self.admin_path = os.path.join(directory, 'memserver.admin')
        self.process, self.address = services.start_memserver(
            max_pages, '--tls-cert', cert, '--tls-key', key,
            '--lease-key', write_public_key(
                self.lease_key, os.path.join(directory, 'lease-key.pem')),
            '--admin', self.admin_path, *options)
        self.name = '%s:%d' % self.address

    def stop(self):
        self.process.terminate()
        self.process.wait(10)

    def token(self, owner, quota_pages=1024, lease=None, server=None,
              issued_at=None, key=None, lifetime=3600):
        """A lease token for ``owner`` on this server (or ``server``),
        signed by the service's key (or ``key``)."""
        return lease_tokens.sign(
            key or self.lease_key, lease or str(uuid.uuid4()), owner,
            quota_pages, 'borrower-host', server or self.name,
            int(time.time()) if issued_at is None else issued_at,
            lifetime)

    def tls(self):
        """A TLS client that has not said HELLO."""
        return memserver.connect_tls(self.address, self.ca)

    def client(self, owner, quota_pages=1024, lease=None, **token):
        """A TLS client of a lease of ``owner``, after its HELLO
        (``token``: more of the token's fields)."""
        return memserver.connect_tls(
            self.address, self.ca,
            self.token(owner, quota_pages, lease, **token))

    def admin(self):
        return memserver.connect_admin(self.admin_path)
