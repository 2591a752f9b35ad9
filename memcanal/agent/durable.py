"""Files that survive a crash whole: the agent's state on disk.

The sequence counter, the report outbox and the action journal each hold
something the agent must not forget when it is killed: a file is written
beside its final name, synced, renamed over it and its directory synced,
so after a crash it holds the old content or the new, never a part.
"""

import os


def sync_directory(path):
    """Make the names in directory ``path`` durable (a file made or
    renamed there)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path, text, mode=0o666):
    """Replace ``path`` with ``text`` atomically and durably; the file
    has ``mode`` (less the umask) from its first byte on, so a secret's
    file is never wider, not even while it is written."""
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, exist_ok=True)
    tmp = path + '.tmp'
    remove(tmp)                 # a crash's leftover, with its own mode
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode),
              'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    sync_directory(directory)


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
