"""The release notes in releasenotes/notes/ pass ``reno lint`` and all
appear in ``reno report``.

reno reads notes from git history, not from the working tree, so the
notes are committed into a repository of their own first: uncommitted
notes are checked too, and the test does not depend on the checkout's
history (a shallow clone in CI, an unpacked archive).
"""

import os
import shutil
import subprocess
import sys

from dulwich import porcelain
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
NOTES = os.listdir(os.path.join(ROOT, 'releasenotes', 'notes'))
IDENTITY = b'memcanal tests <tests@memcanal.invalid>'


@pytest.fixture(scope='module')
def notes_repository(tmp_path_factory):
    repository = tmp_path_factory.mktemp('releasenotes')
    shutil.copytree(os.path.join(ROOT, 'releasenotes'),
                    repository / 'releasenotes')
    porcelain.init(str(repository))
    porcelain.add(str(repository), paths=[
        str(repository / 'releasenotes' / 'notes' / name) for name in NOTES])
    porcelain.commit(str(repository), message=b'Release notes',
                     author=IDENTITY, committer=IDENTITY)
    return repository


def reno(repository, *args):
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'reno'), *args],
        cwd=repository, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_notes_pass_reno_lint(notes_repository):
    reno(notes_repository, 'lint')


def test_reno_report_has_every_note_and_the_prelude(notes_repository):
    report = reno(notes_repository, 'report')
    missing = [name for name in NOTES
               if '.. releasenotes/notes/%s @' % name not in report]
    assert not missing
    assert 'Prelude' in report
