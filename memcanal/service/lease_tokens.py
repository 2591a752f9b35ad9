"""Lease tokens: the service's word that a pager may store pages of one
owner on one memory server, up to a quota.

A memory server cannot tell the pager of a VM from anybody else who
reaches its port, and the service alone decides which VM borrows how
much of which server. So every store of a pooling ``page`` action comes
with a token the service signs with its key ([service] signing_key); the
pager presents it after the TLS handshake, and the server checks it with
the service's public key (``--lease-key``) and then scopes the
connection to the token's owner and quota. The layout is fixed, for the
C server to read as is (all integers little-endian, strings NUL-padded)::

    offset size field
    0      8    magic "mclease1"
    8      16   lease uuid (raw bytes): the uuid of the action making it
    24     8    owner (memcanal.owners.owner_of of the VM's uuid)
    32     8    quota_pages (pages the lease may hold on that server)
    40     8    issued_at (unix seconds)
    48     64   borrower host name
    112    64   server address "host:port", as registered
    176    64   Ed25519 signature over bytes 0..175
    240         total

The magic keeps a token from ever verifying as an RPC signature of the
same key (memcanal.rpc.signing), and the other way round. A string must
leave at least one NUL, so C can read it as a string.
"""

import base64
import dataclasses
import struct
import uuid

from cryptography import exceptions as crypto_exc

MAGIC = b'mclease1'
_SIGNED = struct.Struct('<8s16sQQQ64s64s')
SIGNATURE_SIZE = 64
SIZE = _SIGNED.size + SIGNATURE_SIZE
NAME_SIZE = 64


class InvalidLeaseToken(ValueError):
    """A token that is not 240 bytes, not a lease token, or whose
    signature is not the service's."""


@dataclasses.dataclass(frozen=True)
class LeaseToken:
    lease_uuid: str
    owner: int
    quota_pages: int
    issued_at: int
    borrower: str
    server: str


def _name(value, what):
    data = value.encode()
    if len(data) >= NAME_SIZE:
        raise ValueError('%s %r is longer than a lease token holds (%d '
                         'bytes)' % (what, value, NAME_SIZE - 1))
    return data


def sign(private_key, lease_uuid, owner, quota_pages, borrower, server,
         issued_at):
    """The 240 bytes of a token for ``lease_uuid``, signed by
    ``private_key`` (an Ed25519PrivateKey). ValueError when a name does
    not fit or a number is out of range."""
    try:
        signed = _SIGNED.pack(MAGIC, uuid.UUID(lease_uuid).bytes, owner,
                              quota_pages, issued_at,
                              _name(borrower, 'borrower'),
                              _name(server, 'server address'))
    except struct.error as error:
        raise ValueError('lease token out of range: %s' % error)
    return signed + private_key.sign(signed)


def verify(public_key, token):
    """The LeaseToken ``token`` (bytes) says, once its signature by
    ``public_key`` (an Ed25519PublicKey) is checked; InvalidLeaseToken
    otherwise."""
    if len(token) != SIZE:
        raise InvalidLeaseToken('a lease token is %d bytes, not %d' % (
            SIZE, len(token)))
    signed, signature = token[:_SIGNED.size], token[_SIGNED.size:]
    try:
        public_key.verify(signature, signed)
    except crypto_exc.InvalidSignature:
        raise InvalidLeaseToken('the lease token is not signed by the '
                                'service\'s key')
    (magic, lease, owner, quota, issued_at, borrower,
     server) = _SIGNED.unpack(signed)
    if magic != MAGIC:
        raise InvalidLeaseToken('not a lease token (magic %r)' % magic)
    return LeaseToken(str(uuid.UUID(bytes=lease)), owner, quota, issued_at,
                      borrower.rstrip(b'\0').decode(),
                      server.rstrip(b'\0').decode())


def encode(token):
    """A token as it travels in JSON, RPC and configuration: base64."""
    return base64.b64encode(token).decode()


def decode(text):
    return base64.b64decode(text, validate=True)
