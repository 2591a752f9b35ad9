"""Attacks through the files a root pager trusts (issue #25, finding 3),
against the real memcanal-pager.

Before #25 a pool file planted in /dev/shm by another user was used by a
root pager, which then put guest pages in it. Now the pool lives only in
root's own directory, in root's own file. The VM's key and its lease
tokens are in files of root's alone, not on the pager's command line
(which any local user reads in /proc): a token lets whoever holds it
delete that VM's copies on that server. Whatever else stands at those
paths (another user's file, a link, a FIFO, a directory), the pager
refuses to start and says why.
"""

import base64
import os
import struct
import subprocess
import uuid

import pytest

from memcanal.tests.functional import pagers
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

NOBODY = 65534

build = pagers.build


def as_nobody(path, mode):
    """A file at path created by uid 65534 with ``mode``, which holds
    what that user chose."""
    subprocess.run(
        ['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY,
         '--clear-groups', 'sh', '-c',
         'umask 0; head -c 65536 /dev/zero > "$1"; chmod %o "$1"' % mode,
         'sh', path], check=True)


def state_of(path):
    """What is at path (None if nothing), as a pager must leave it."""
    if not os.path.lexists(path):
        return None
    status = os.lstat(path)
    content = (open(path, 'rb').read() if os.path.isfile(path)
               and not os.path.islink(path) else None)
    return status.st_uid, status.st_mode, status.st_size, content


def planted_in_dev_shm(directory):
    path = '/dev/shm/memcanal-planted-%s' % uuid.uuid4().hex[:8]
    as_nobody(path, 0o666)
    return path, 'its directory is writable by others (mode 1777)'


def in_root_directory(directory, mode=0o700):
    pools = os.path.join(directory, 'pools')
    os.mkdir(pools)
    os.chmod(pools, mode)
    return os.path.join(pools, 'pool')


def nobodys_file(directory):
    path = in_root_directory(directory, 0o755)
    with open(path, 'wb') as planted:
        planted.write(b'\0' * 65536)
    os.chmod(path, 0o600)
    os.chown(path, NOBODY, NOBODY)
    return path, 'owned by uid 65534, not 0'


def readable_file(directory):
    path = in_root_directory(directory)
    with open(path, 'wb') as planted:
        planted.write(b'\0' * 65536)
    os.chmod(path, 0o644)
    return path, 'mode 0644, not 0600'


def symbolic_link(directory):
    path = in_root_directory(directory)
    target = os.path.join(directory, 'target')
    with open(target, 'wb') as victim:
        victim.write(b'precious')
    os.chmod(target, 0o600)
    os.symlink(target, path)
    return path, 'a symbolic link'


def dangling_link(directory):
    path = in_root_directory(directory)
    os.symlink(os.path.join(directory, 'created-through-the-link'), path)
    return path, 'a symbolic link'


def fifo(directory):
    path = in_root_directory(directory)
    os.mkfifo(path, 0o600)
    return path, 'not a regular file'


def writable_directory(directory):
    return (in_root_directory(directory, 0o777),
            'its directory is writable by others (mode 0777)')


def nobodys_directory(directory):
    path = in_root_directory(directory)
    os.chown(os.path.dirname(path), NOBODY, NOBODY)
    return path, 'its directory is owned by uid 65534, not root'


@pytest.mark.parametrize('plant', [
    planted_in_dev_shm, nobodys_file, readable_file, symbolic_link,
    dangling_link, fifo, writable_directory, nobodys_directory],
    ids=lambda plant: plant.__name__)
def test_a_planted_pool_is_refused(build, short_tmp_path, plant):
    """Finding 3: a pool file another user planted (in /dev/shm, or that
    became theirs), a link at the pool's path, a FIFO, or a directory
    others may write: a root pager refuses to start, says why, and
    neither writes the file nor creates anything through the link."""
    path, why = plant(short_tmp_path)
    try:
        before = state_of(path)
        status, err = pagers.run_pager(
            build, short_tmp_path, '--pool', path, '--pool-mb', '8',
            '--key-file', pager_tests.key_file(
                os.path.join(short_tmp_path, 'vm.key')))
        assert status == 1, err
        assert 'pool %s refused: %s' % (path, why) in err, err
        assert state_of(path) == before
        assert not os.path.exists(os.path.join(short_tmp_path,
                                               'created-through-the-link'))
    finally:
        if path.startswith('/dev/shm/'):
            os.unlink(path)


def test_a_pool_in_roots_directory_is_made_roots_alone(build,
                                                       short_tmp_path):
    """The pool a pager creates is root's, mode 0600, whatever the umask;
    the next pager uses it."""
    path = in_root_directory(short_tmp_path, 0o755)
    old_umask = os.umask(0)
    try:
        for _ in range(2):
            assert pagers.run_pager(build, short_tmp_path, '--pool', path,
                                    '--pool-mb', '8')[0] == 0
    finally:
        os.umask(old_umask)
    status = os.stat(path)
    assert (status.st_uid, status.st_mode & 0o7777) == (0, 0o600)
    assert status.st_size > 8 << 20


def secret_that(directory, name, content, how):
    """A file at ``name`` in ``directory`` meant to hold ``content`` for
    the pager alone (root's, 0600), made ``how`` instead: its path, and
    why the pager refuses it."""
    path = os.path.join(directory, name)
    if how == 'a directory':
        os.mkdir(path)
        return path, 'not a regular file'
    if how == 'a FIFO':
        os.mkfifo(path, 0o600)
        return path, 'not a regular file'
    if how == 'missing':
        return path, 'No such file or directory'
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, 'wb') as secret:
        secret.write(content)
    if how == 'readable':
        os.chmod(path, 0o644)
        return path, 'mode 0644, not 0600'
    if how == 'nobody\'s':
        os.chown(path, NOBODY, NOBODY)
        return path, 'owned by uid 65534, not 0'
    if how == 'short':
        os.truncate(path, len(content) - 1)
        return path, '%d bytes, not %d' % (len(content) - 1, len(content))
    if how == 'a symbolic link':
        link = os.path.join(directory, 'link')
        os.symlink(path, link)
        return link, 'a symbolic link'
    return path, None


NOT_THE_PAGERS_ALONE = ['readable', 'nobody\'s', 'short', 'a symbolic link',
                        'a directory', 'a FIFO', 'missing']


@pytest.mark.parametrize('how', NOT_THE_PAGERS_ALONE)
def test_a_key_file_not_the_pagers_alone_is_refused(build, short_tmp_path,
                                                    how):
    path, why = secret_that(short_tmp_path, 'vm.key', os.urandom(32), how)
    status, err = pagers.run_pager(build, short_tmp_path, '--key-file', path)
    assert status == 1, err
    assert 'key file %s refused: %s' % (path, why) in err, err


@pytest.mark.parametrize('how', NOT_THE_PAGERS_ALONE + ['not base64'])
def test_a_token_file_not_the_pagers_alone_is_refused(build, short_tmp_path,
                                                      how):
    """A lease token is given in a file (not on the command line, which
    every local user reads in /proc), checked as the key file is: a
    token another user could have written, or read, is refused."""
    owner = 17
    token = base64.b64encode(b'mclease1'.ljust(24, b'.') + struct.pack(
        '<Q', owner) + b'.' * 208)
    path, why = secret_that(short_tmp_path, 'lease.token', b'!' * len(
        token) if how == 'not base64' else token, how)
    status, err = pagers.run_pager(
        build, short_tmp_path, '--owner', str(owner), '--tls-ca',
        '/nonexistent/ca.pem', '--store', 'tls:127.0.0.1:1',
        '--store-token-file', path)
    assert status == 1, err
    assert ('token file %s refused: %s' % (path, why) if why else
            'a tls: store needs its lease token (240 bytes, base64)'
            ) in err, err
