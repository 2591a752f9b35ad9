"""Files that survive a crash whole: the agent's state on disk.

The sequence counter, the report outbox and the action journal each hold
something the agent must not forget when it is killed: a file is written
beside its final name, synced, renamed over it and its directory synced,
so after a crash it holds the old content or the new, never a part.
"""

import os


def _sync_directory(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path, text):
    """Replace ``path`` with ``text`` atomically and durably."""
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _sync_directory(directory)


def names(directory, suffix):
    """The names of the files ending in ``suffix`` in ``directory``
    (made if missing); any other file is a write that a crash
    interrupted, and is removed."""
    os.makedirs(directory, exist_ok=True)
    found = []
    for name in os.listdir(directory):
        if name.endswith(suffix):
            found.append(name)
        else:
            remove(os.path.join(directory, name))
    return found


def remove(path):
    """Remove ``path`` if it is there (a crash may have removed it)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
