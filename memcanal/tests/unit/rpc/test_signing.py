"""Signatures of RPC messages and their keys (memcanal.rpc.signing)."""

import json
import os
import stat

from cryptography.hazmat.primitives.asymmetric import ed25519
import pytest

from memcanal.rpc import signing
from memcanal.service import lease_tokens

KEY = ed25519.Ed25519PrivateKey.generate()
ARGS = {'host': 'compute-1', 'report': {'sequence': 3, 'ratio': 0.1,
                                        'instances': [], 'zone': 'é'}}


def test_a_signature_covers_the_method_and_every_argument():
    signed = signing.sign(KEY, 'report', ARGS)
    assert set(signed) == set(ARGS) | {'signature'}
    public = signing.public_text(KEY)
    assert signing.verify(public, 'report', signed)
    assert signing.verify(KEY.public_key(), 'report', signed)
    assert not signing.verify(public, 'actions_done', signed)
    for changed in (dict(signed, host='compute-2'),
                    dict(signed, report=dict(ARGS['report'], sequence=4)),
                    dict(signed, extra=None),
                    {k: v for k, v in signed.items() if k != 'host'}):
        assert not signing.verify(public, 'report', changed)
    other = signing.public_text(ed25519.Ed25519PrivateKey.generate())
    assert not signing.verify(other, 'report', signed)


def test_a_signature_survives_the_json_the_message_travels_in():
    signed = signing.sign(KEY, 'report', ARGS)
    # oslo.messaging's JSON, key order and all, as the other side reads it.
    arrived = json.loads(json.dumps(dict(reversed(list(signed.items())))))
    assert signing.verify(signing.public_text(KEY), 'report', arrived)


@pytest.mark.parametrize('signature', [None, '', 'not base64!', 'AAAA', 5])
@pytest.mark.parametrize('key', [None, 'not a key', 'AAAA'])
def test_garbage_verifies_nothing_and_raises_nothing(signature, key):
    args = dict(ARGS, signature=signature)
    assert not signing.verify(key, 'report', args)
    assert not signing.verify(signing.public_text(KEY), 'report', args)


def test_canonical_text_is_domain_separated_from_lease_tokens():
    text = signing.canonical('report', ARGS)
    assert text.startswith(b'memcanal-rpc-v1\0{"args":{')
    assert not text.startswith(lease_tokens.MAGIC)


def test_key_files_are_made_once_private_and_read_back(tmp_path):
    private, public = tmp_path / 'service.key', tmp_path / 'service.pub'
    key = signing.create_key_pair(str(private), str(public))
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert signing.public_text(signing.load_private_key(str(private))) == (
        signing.public_text(signing.load_public_key(str(public))))
    assert signing.public_text(key) == signing.public_text(
        signing.load_public_key(str(public)))
    with pytest.raises(FileExistsError):
        signing.create_key_pair(str(private))
    link = tmp_path / 'link.key'
    link.symlink_to(tmp_path / 'elsewhere.key')
    with pytest.raises(FileExistsError):
        signing.create_key_pair(str(link))


def test_unusable_key_files_say_which_and_why(tmp_path):
    (tmp_path / 'text').write_text('hello')
    with pytest.raises(signing.KeyFileError, match='missing'):
        signing.load_private_key(str(tmp_path / 'missing'))
    with pytest.raises(signing.KeyFileError, match='text'):
        signing.load_public_key(str(tmp_path / 'text'))
    signing.create_key_pair(str(tmp_path / 'pair.key'),
                            str(tmp_path / 'pair.pub'))
    with pytest.raises(signing.KeyFileError, match='pair.pub'):
        signing.load_private_key(str(tmp_path / 'pair.pub'))


def test_a_host_key_is_made_on_first_use_and_kept(tmp_path):
    path = str(tmp_path / 'state' / 'agent-compute-1.key')
    first = signing.host_key(path)
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert signing.public_text(signing.host_key(path)) == (
        signing.public_text(first))


def test_fingerprints_name_keys_as_ssh_keygen_does():
    public = signing.public_text(KEY)
    fingerprint = signing.fingerprint(public)
    assert fingerprint.startswith('SHA256:') and len(fingerprint) == 50
    assert fingerprint == signing.fingerprint(public)
