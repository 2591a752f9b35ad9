"""Ed25519 signatures of RPC messages, and the keys that make them.

Anyone holding the broker's credentials can put a message on any topic,
so neither side takes a message for what it says it is: each agent signs
what it sends with its host's own key (the service pins that key at the
host's first registration), and the service signs what it casts to
agents with its key ([service] signing_key; agents verify with [agent]
service_public_key).

What is signed is ``DOMAIN`` followed by the canonical JSON (sorted keys,
no spaces: ``json.dumps(sort_keys=True, separators=(',', ':'))``) of
``{"args": <the call's keyword arguments but signature>, "method":
<name>}``. The arguments travel as JSON already, so both sides serialize
the same values to the same text. ``DOMAIN`` keeps these signatures apart
from the lease tokens the same service key signs
(memcanal.service.lease_tokens), which start with their own magic.

A signature says who sent a message, not when: since service RPC 1.10
and agent RPC 1.3 the arguments signed include ``sent_at`` and
``nonce`` (memcanal.rpc.freshness), so that a receiver refuses a
message captured and sent again.

Public keys travel as base64 of their 32 raw bytes; key files are PEM
(PKCS#8 private keys, SubjectPublicKeyInfo public keys), as OpenSSL
writes and reads them.
"""

import base64
import binascii
import hashlib
import json
import os

from cryptography import exceptions as crypto_exc
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives import serialization

DOMAIN = b'memcanal-rpc-v1\0'
SIGNATURE = 'signature'


class KeyFileError(Exception):
    """A key file that is missing, unreadable or not an Ed25519 key."""


def canonical(method, args):
    """The bytes a signature of ``method`` called with ``args`` covers."""
    return DOMAIN + json.dumps(
        {'args': args, 'method': method}, sort_keys=True,
        separators=(',', ':')).encode()


def sign(private_key, method, args):
    """``args`` with the ``signature`` of ``method`` called with them."""
    signature = private_key.sign(canonical(method, args))
    return dict(args, **{SIGNATURE: base64.b64encode(signature).decode()})


def verify(public_key, method, args):
    """Whether ``args`` (the call's keyword arguments, ``signature``
    among them) carry a good signature of ``method`` by ``public_key``
    (an Ed25519PublicKey or its public_text; None verifies nothing)."""
    args = dict(args)
    signature = args.pop(SIGNATURE, None)
    if public_key is None or not isinstance(signature, str):
        return False
    try:
        if isinstance(public_key, str):
            public_key = public_key_from_text(public_key)
        public_key.verify(base64.b64decode(signature, validate=True),
                          canonical(method, args))
    except (crypto_exc.InvalidSignature, ValueError, TypeError,
            binascii.Error):
        # ValueError: a malformed key or signature; TypeError: arguments
        # JSON cannot hold, which no message carried.
        return False
    return True


def public_text(key):
    """A public key (or the private key's) as base64 of its raw bytes."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        key = key.public_key()
    return base64.b64encode(key.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def public_key_from_text(text):
    """The Ed25519PublicKey of public_text's ``text``; ValueError if it
    is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise ValueError('not base64: %s' % error)
    return ed25519.Ed25519PublicKey.from_public_bytes(raw)


def fingerprint(text):
    """A short name of a public key (public_text) for logs and operators,
    as ssh-keygen -l prints one."""
    digest = hashlib.sha256(base64.b64decode(text)).digest()
    return 'SHA256:' + base64.b64encode(digest).decode().rstrip('=')


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except OSError as error:
        raise KeyFileError('cannot read key file %s: %s' % (
            path, error.strerror))


def load_private_key(path):
    """The Ed25519 private key of a PEM file."""
    try:
        key = serialization.load_pem_private_key(_read(path), None)
    except (ValueError, TypeError) as error:
        raise KeyFileError('%s holds no unencrypted PEM private key: %s' % (
            path, error))
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise KeyFileError('%s is not an Ed25519 private key' % path)
    return key


def load_public_key(path):
    """The Ed25519 public key of a PEM file."""
    try:
        key = serialization.load_pem_public_key(_read(path))
    except ValueError as error:
        raise KeyFileError('%s holds no PEM public key: %s' % (path, error))
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise KeyFileError('%s is not an Ed25519 public key' % path)
    return key


def _create(path, data, mode):
    """Write ``data`` to a new file ``path`` with ``mode``; never over an
    existing file, nor through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 mode)
    with os.fdopen(fd, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def create_key_pair(private_path, public_path=None):
    """A new key pair, written as write_key_pair does."""
    key = ed25519.Ed25519PrivateKey.generate()
    write_key_pair(key, private_path, public_path)
    return key


def write_key_pair(key, private_path, public_path=None):
    """The private ``key`` written to ``private_path`` (mode 0600) and
    its public key to ``public_path`` (0644) when given.
    FileExistsError rather than replace a key."""
    _create(private_path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()), 0o600)
    if public_path is not None:
        _create(public_path, key.public_key().public_bytes(
            serialization.Encoding.PEM,
            serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)


def host_key(path):
    """The agent's key at ``path``, created (0600, its directory 0700 if
    new) on the host's first start."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700,
                    exist_ok=True)
        try:
            return create_key_pair(path)
        except FileExistsError:
            pass  # another agent of this state path made it meanwhile
    return load_private_key(path)
