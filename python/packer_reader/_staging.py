"""Local working folders under $TMPDIR that a killed process cannot remove (verify's copy of a
bucket dataset): each holds a lock file, ``.packer-staging.lock``, locked (flock) by its owner
for as long as it uses the folder; the lock goes with the process however it ends. A later
process removes the folders of the same name prefix whose lock it can take (the owner is
gone), and never one whose lock is held or that holds no lock file. The Go commands do the
same for their own folders (storage.NewStaging, storage.RemoveStale). Where flock does not
exist (outside Unix), nothing is removed but the process's own folder."""

import glob
import os
import shutil
import tempfile

try:
    import fcntl
except ImportError:  # not Unix
    fcntl = None

LOCK = ".packer-staging.lock"


def _trylock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except (BlockingIOError, PermissionError):
        return False


def remove_stale(prefix, parent=None):
    """Remove the folders parent/prefix* (parent: the temporary folder) whose owner is gone;
    return their paths."""
    if fcntl is None:
        return []
    parent = parent or tempfile.gettempdir()
    removed = []
    for d in glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*")):
        if os.path.islink(d) or not os.path.isdir(d):
            continue
        try:
            fd = os.open(os.path.join(d, LOCK), os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue  # no lock file (not ours, or made before locks), or another user's
        try:
            if _trylock(fd):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
        finally:
            os.close(fd)
    return removed


class Staging:
    """A new locked folder parent/prefix*, after removing the stale ones; ``path``; ``remove()``
    (or use it as a context manager) removes it and releases the lock."""

    def __init__(self, prefix, parent=None):
        remove_stale(prefix, parent)
        self.path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        self._fd = None
        if fcntl is None:
            return
        try:
            # locked before it takes its name: remove_stale never finds it unlocked while we live
            fd, tmp = tempfile.mkstemp(prefix=".lock-", dir=self.path)
            self._fd = fd
            if not _trylock(fd):
                raise OSError("a new lock file in %s is locked by another process" % self.path)
            os.write(fd, b"%d\n" % os.getpid())
            os.rename(tmp, os.path.join(self.path, LOCK))
        except BaseException:
            self.remove()
            raise

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
