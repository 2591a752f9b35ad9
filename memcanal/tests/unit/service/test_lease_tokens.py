"""Lease tokens (memcanal.service.lease_tokens): the 240 bytes the C
memory server reads, signed by the service's key."""

import struct
import uuid

from cryptography.hazmat.primitives.asymmetric import ed25519
import pytest

from memcanal.rpc import signing
from memcanal.service import lease_tokens

KEY = ed25519.Ed25519PrivateKey.generate()
LEASE = '0b0c6a3e-4bd7-4c0e-9d2f-8d9c2f1e7a55'


def token(**changes):
    fields = dict(private_key=KEY, lease_uuid=LEASE, owner=2 ** 63 - 1,
                  quota_pages=1536, borrower='compute-1',
                  server='10.0.0.5:7400', issued_at=1764140000,
                  lifetime=3600)
    fields.update(changes)
    return lease_tokens.sign(**fields)


def test_the_layout_is_the_one_the_memory_server_reads():
    signed = token()
    assert len(signed) == lease_tokens.SIZE == 240
    assert signed[:8] == b'mclease2'
    assert signed[8:24] == uuid.UUID(LEASE).bytes
    assert struct.unpack('<QQQQ', signed[24:56]) == (2 ** 63 - 1, 1536,
                                                     1764140000, 3600)
    assert signed[56:112] == b'compute-1'.ljust(56, b'\0')
    assert signed[112:176] == b'10.0.0.5:7400'.ljust(64, b'\0')
    # The signature is over the first 176 bytes, by the key alone.
    KEY.public_key().verify(signed[176:], signed[:176])


def test_verify_gives_back_what_was_signed():
    assert lease_tokens.verify(KEY.public_key(), lease_tokens.decode(
        lease_tokens.encode(token()))) == lease_tokens.LeaseToken(
        LEASE, 2 ** 63 - 1, 1536, 1764140000, 3600, 'compute-1',
        '10.0.0.5:7400')
    assert lease_tokens.verify(KEY.public_key(),
                               token()).expires_at == 1764143600


def test_a_forged_or_foreign_token_is_refused():
    signed = token()
    other = ed25519.Ed25519PrivateKey.generate()
    with pytest.raises(lease_tokens.InvalidLeaseToken, match='not signed'):
        lease_tokens.verify(other.public_key(), signed)
    # A larger quota, anything changed after signing.
    forged = signed[:32] + struct.pack('<Q', 2 ** 40) + signed[40:]
    with pytest.raises(lease_tokens.InvalidLeaseToken):
        lease_tokens.verify(KEY.public_key(), forged)
    with pytest.raises(lease_tokens.InvalidLeaseToken, match='240'):
        lease_tokens.verify(KEY.public_key(), signed + b'\0')


def test_an_rpc_signature_of_the_same_key_is_no_token():
    """The same key signs RPC casts: 176 bytes of a message, signed, are
    still no token, for lack of the magic."""
    message = signing.canonical('x', {'a': 'b' * 200})[:176]
    with pytest.raises(lease_tokens.InvalidLeaseToken, match='magic'):
        lease_tokens.verify(KEY.public_key(), message + KEY.sign(message))


@pytest.mark.parametrize('changes', [
    {'borrower': 'h' * 56}, {'lifetime': -1}, {'server': 's' * 60 + ':7400'},
    {'quota_pages': -1}, {'owner': 2 ** 64}, {'lease_uuid': 'not-a-uuid'}])
def test_what_does_not_fit_is_not_signed(changes):
    with pytest.raises(ValueError):
        token(**changes)
