"""Secrets the service sends one agent through the broker, sealed to that
agent's host key, so that other broker users read ciphertext only.

A lease token (memcanal.service.lease_tokens) is a bearer credential:
whoever holds it reaches its owner's pages on its memory server. Casts
are signed, not encrypted, and every broker user may read them. So from
agent RPC 1.4 the service seals each token to the Ed25519 host key the
agent registered (memcanal.rpc.signing, pinned on first use) with
libsodium's sealed box (PyNaCl): an anonymous X25519 + XSalsa20-Poly1305
box to the Curve25519 form of that key. Only the holder of the host's
private key opens it; the service's signature over the cast still says
who sealed it. No crypto is written here: the key conversion and the box
are libsodium's.
"""

import base64

from cryptography.hazmat.primitives import serialization
from nacl import exceptions as nacl_exc
from nacl import public
from nacl import signing as nacl_signing

from memcanal.rpc import signing

PREFIX = 'sealed1:'


class SealError(ValueError):
    """What was sealed cannot be opened with this key (another host's,
    tampered with, or not a sealed box)."""


def _raw_private(private_key):
    return private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption())


def seal(public_text, data):
    """``data`` (bytes) sealed to the host whose Ed25519 public key is
    ``public_text`` (memcanal.rpc.signing.public_text), as text."""
    raw = signing.public_key_from_text(public_text).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    box = public.SealedBox(
        nacl_signing.VerifyKey(raw).to_curve25519_public_key())
    return PREFIX + base64.b64encode(box.encrypt(data)).decode()


def unseal(private_key, text):
    """The bytes ``seal`` sealed to ``private_key`` (the host's
    Ed25519PrivateKey); SealError otherwise."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise SealError('not a sealed value')
    try:
        sealed = base64.b64decode(text[len(PREFIX):], validate=True)
        box = public.SealedBox(nacl_signing.SigningKey(
            _raw_private(private_key)).to_curve25519_private_key())
        return box.decrypt(sealed)
    except (ValueError, nacl_exc.CryptoError) as error:
        raise SealError('cannot open a sealed value: %s' % error)
