"""memcanal-manage service create-key and host forget-key."""

import os
import stat

from memcanal.db import api as db_api
from memcanal.rpc import signing
from memcanal.tests import keys
from memcanal.tests.unit.db.test_retention import ctx  # noqa: F401
from memcanal.tests.unit.test_manage_cli import run  # noqa: F401


def test_create_key_writes_a_pair_once(run, tmp_path):  # noqa: F811
    private, public = tmp_path / 'service.key', tmp_path / 'service.pub'
    code, out, _err = run('service', 'create-key', '--private', str(private),
                          '--public', str(public))
    assert code == 0
    key = signing.load_private_key(str(private))
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert signing.public_text(signing.load_public_key(str(public))) == (
        signing.public_text(key))
    assert signing.fingerprint(signing.public_text(key)) in out
    code, _out, err = run('service', 'create-key', '--private',
                          str(private), '--public', str(tmp_path / 'other'))
    assert (code, err) == (1, 'memcanal-manage: %s exists; a key is never '
                              'replaced\n' % private)
    assert signing.public_text(signing.load_private_key(str(private))) == (
        signing.public_text(key))
    assert run('service', 'create-key', '--private', str(private))[0] == 2


def test_forget_key_lets_a_rebuilt_host_register(run, ctx):  # noqa: F811
    old = keys.Agent('compute-1')
    db_api.register_host(ctx, 'compute-1', 2 ** 34, 0, 60.0,
                         signing.public_text(old.key))
    code, out, _err = run('host', 'forget-key', 'compute-1')
    assert (code, out) == (0, 'Forgot key %s of host compute-1; its next '
                              'registration pins a new one.\n'
                           % signing.fingerprint(signing.public_text(
                               old.key)))
    assert db_api.host_identity(ctx, 'compute-1')['public_key'] is None
    assert run('host', 'forget-key', 'compute-1')[:2] == (
        0, 'Host compute-1 has no key pinned.\n')
    code, _out, err = run('host', 'forget-key', 'compute-9')
    assert code == 1 and 'compute-9' in err
