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
    0      8    magic "mclease2"
    8      16   lease uuid (raw bytes): the uuid of the action making it
    24     8    owner (memcanal.owners.owner_of of the VM's uuid)
    32     8    quota_pages (pages the lease may hold on that server)
    40     8    issued_at (unix seconds)
    48     8    lifetime (seconds after issued_at the token is good)
    56     56   borrower host name
    112    64   server address "host:port", as registered
    176    64   Ed25519 signature over bytes 0..175
    240         total

The magic keeps a token from ever verifying as an RPC signature of the
same key (memcanal.rpc.signing), and the other way round. A string must
leave at least one NUL, so C can read it as a string.

Tokens end (issue #36): a memory server refuses one before its
issued_at (less a minute of clock skew) or from issued_at + lifetime on,
the lifetime capped by its own --max-token-lifetime; the service renews
a live lease's token before then ([pooling] lease_lifetime). The
"mclease1" tokens of the release before have no lifetime field (and a
64-byte borrower): a server takes its maximum for them.
"""

import base64
import dataclasses
import struct
import uuid

from cryptography import exceptions as crypto_exc

MAGIC = b'mclease2'
_SIGNED = struct.Struct('<8s16sQQQQ56s64s')
SIGNATURE_SIZE = 64
SIZE = _SIGNED.size + SIGNATURE_SIZE
BORROWER_SIZE = 56
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
    lifetime: int
    borrower: str
    server: str

    @property
    def expires_at(self):
        return self.issued_at + self.lifetime


def _name(value, what, size=NAME_SIZE):
    data = value.encode()
    if len(data) >= size:
        raise ValueError('%s %r is longer than a lease token holds (%d '
                         'bytes)' % (what, value, size - 1))
    return data


def sign(private_key, lease_uuid, owner, quota_pages, borrower, server,
         issued_at, lifetime):
    """The 240 bytes of a token for ``lease_uuid``, good from
    ``issued_at`` for ``lifetime`` seconds, signed by ``private_key``
    (an Ed25519PrivateKey). ValueError when a name does not fit or a
    number is out of range."""
    try:
        signed = _SIGNED.pack(MAGIC, uuid.UUID(lease_uuid).bytes, owner,
                              quota_pages, issued_at, lifetime,
                              _name(borrower, 'borrower', BORROWER_SIZE),
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
    (magic, lease, owner, quota, issued_at, lifetime, borrower,
     server) = _SIGNED.unpack(signed)
    if magic != MAGIC:
        raise InvalidLeaseToken('not a lease token (magic %r)' % magic)
    return LeaseToken(str(uuid.UUID(bytes=lease)), owner, quota, issued_at,
                      lifetime, borrower.rstrip(b'\0').decode(),
                      server.rstrip(b'\0').decode())


def encode(token):
    """A token as it travels in JSON, RPC and configuration: base64."""
    return base64.b64encode(token).decode()


def decode(text):
    return base64.b64decode(text, validate=True)
