"""An in-memory FUSE file system that forgets what was never synced.

Like LazyFS: every write lands in memory; `fsync` of a file makes its bytes
durable, `fsync` of a directory (`fsyncdir`) makes its names durable. A power
cut (`LazyFS.power_cut`, with the file system unmounted) keeps only what was
made durable, as the strictest file system POSIX allows would, plus some of
what a real one may have written back on its own:

  - a directory's names: those of its last sync; or, with probability
    `p_writeback`, those it has now (the journal happened to commit them);
  - a file's bytes: those of its last sync; a file never synced is kept whole,
    cut to a random length (a torn write) or emptied, one chance in three each.

So a name that fpctl published without syncing the bytes behind it can come
back torn or empty, and a name whose directory it did not sync can vanish.

A cut can also be timed by syncs (`arm_kill`): the writer is killed with
SIGKILL from inside its Nth `fsync`/`fsyncdir`, before that sync takes
effect, which puts cuts inside a group commit (between one file's sync and
the next) and between a group's writes and its first sync. What was durable
at that moment, with no write-back luck, is kept (`killed_durable`) for the
strictest check.
Runs on fusepy (Debian's python3-fusepy, libfuse2), as root.
"""
import errno
import itertools
import os
import signal
import random
import stat
import threading
import time

import fusepy
from fusepy import FuseOSError, Operations

_inodes = itertools.count(2)


class Node:
    def __init__(self, is_dir: bool, mode: int):
        self.is_dir = is_dir
        self.mode = mode & 0o7777
        self.ino = next(_inodes)
        self.data = bytearray()
        self.durable: bytes | None = None  # a file's bytes at its last sync
        self.entries: dict[str, "Node"] = {}
        self.durable_entries: dict[str, "Node"] = {}  # a directory's names at its last sync
        self.links = 0
        now = time.time()
        self.atime = self.mtime = self.ctime = now


class LazyFS(Operations):
    def __init__(self, p_writeback: float = 0.3):
        self._mutex = threading.RLock()
        self.root = Node(True, 0o755)
        self.handles: dict[int, Node] = {}
        self.next_handle = itertools.count(10)
        self.p_writeback = p_writeback
        self.syncs = 0
        self.kill_at: int | None = None  # the sync (counted from arm_kill) to kill the writer in
        self.syncs_since_arm = 0
        self.writes_since_sync = False
        self.killed_durable: set[str] | None = None  # files durable when the writer was killed
        self.killed_contents: dict[str, bytes] = {}  # and their durable bytes
        self.killed_after_writes = False  # the kill came at the first sync after writes

    def arm_kill(self, nth_sync: int) -> None:
        with self._mutex:
            self.kill_at, self.syncs_since_arm, self.killed_durable = nth_sync, 0, None

    def durable_contents(self) -> dict[str, bytes]:
        """What `durable_files` names, with the bytes a power cut keeps of each."""
        found: dict[str, bytes] = {}

        def walk(node: Node, path: str) -> None:
            for name, child in node.durable_entries.items():
                if child.is_dir:
                    walk(child, f"{path}/{name}")
                elif child.durable is not None and len(child.durable) > 0:
                    found[f"{path}/{name}"] = bytes(child.durable)
        walk(self.root, "")
        return found

    def durable_files(self) -> set[str]:
        """Paths of the files a power cut with no write-back luck keeps, with their synced bytes."""
        found: set[str] = set()

        def walk(node: Node, path: str) -> None:
            for name, child in node.durable_entries.items():
                if child.is_dir:
                    walk(child, f"{path}/{name}")
                elif child.durable is not None and len(child.durable) > 0:
                    found.add(f"{path}/{name}")
        walk(self.root, "")
        return found

    def _sync_point(self) -> None:
        """Called with the mutex held at the start of every sync: the armed kill."""
        self.syncs += 1
        after_writes, self.writes_since_sync = self.writes_since_sync, False
        if self.kill_at is None:
            return
        self.syncs_since_arm += 1
        if self.syncs_since_arm < self.kill_at:
            return
        self.kill_at = None
        self.killed_durable = self.durable_files()
        self.killed_contents = self.durable_contents()
        self.killed_after_writes = after_writes
        os.kill(fusepy.fuse_get_context()[2], signal.SIGKILL)
        raise FuseOSError(errno.EIO)

    # Paths
    def _lookup(self, path: str) -> Node:
        node = self.root
        for part in filter(None, path.split("/")):
            if not node.is_dir or part not in node.entries:
                raise FuseOSError(errno.ENOENT)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head or "/")
        if not parent.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        return parent, name

    def _handle(self, node: Node) -> int:
        fh = next(self.next_handle)
        self.handles[fh] = node
        return fh

    # The power cut
    def power_cut(self, rng: random.Random) -> None:
        """Keeps what was synced (and what write-back may have saved); the rest is gone."""
        with self._mutex:
            seen: set[int] = set()

            def settle(node: Node) -> None:
                if node.ino in seen:
                    return
                seen.add(node.ino)
                if node.is_dir:
                    if rng.random() >= self.p_writeback:
                        node.entries = dict(node.durable_entries)
                    node.durable_entries = dict(node.entries)
                    for child in node.entries.values():
                        settle(child)
                    return
                if node.durable is not None:
                    node.data = bytearray(node.durable)
                else:
                    fate = rng.randrange(3)
                    if fate == 1:
                        node.data = node.data[: rng.randrange(len(node.data) + 1)]
                    elif fate == 2:
                        node.data = bytearray()
                node.durable = bytes(node.data)

            settle(self.root)
            self.handles.clear()

    def make_durable(self, path: str) -> None:
        """Syncs a directory tree the harness made before the run (the disk as it was)."""
        with self._mutex:
            def sync(node: Node) -> None:
                if node.is_dir:
                    node.durable_entries = dict(node.entries)
                    for child in node.entries.values():
                        sync(child)
                else:
                    node.durable = bytes(node.data)
            sync(self._lookup(path))
            self.root.durable_entries = dict(self.root.entries)

    # FUSE operations
    def getattr(self, path, fh=None):
        with self._mutex:
            node = self.handles.get(fh) if fh else None
            node = node or self._lookup(path)
            kind = stat.S_IFDIR if node.is_dir else stat.S_IFREG
            return {
                "st_mode": kind | node.mode, "st_ino": node.ino,
                "st_nlink": 2 + sum(c.is_dir for c in node.entries.values()) if node.is_dir else max(node.links, 1),
                "st_size": len(node.data), "st_uid": 0, "st_gid": 0,
                "st_atime": node.atime, "st_mtime": node.mtime, "st_ctime": node.ctime,
                "st_blocks": (len(node.data) + 511) // 512, "st_blksize": 4096,
            }

    def readdir(self, path, fh):
        with self._mutex:
            node = self._lookup(path)
            return [".", ".."] + list(node.entries)

    def mkdir(self, path, mode):
        with self._mutex:
            parent, name = self._parent(path)
            if name in parent.entries:
                raise FuseOSError(errno.EEXIST)
            child = Node(True, mode)
            child.links = 1
            parent.entries[name] = child
            parent.mtime = parent.ctime = time.time()

    def rmdir(self, path):
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                raise FuseOSError(errno.ENOENT)
            if not node.is_dir:
                raise FuseOSError(errno.ENOTDIR)
            if node.entries:
                raise FuseOSError(errno.ENOTEMPTY)
            del parent.entries[name]

    def create(self, path, mode, fi=None):
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                node = Node(False, mode)
                node.links = 1
                parent.entries[name] = node
                parent.mtime = parent.ctime = time.time()
            return self._handle(node)

    def open(self, path, flags):
        with self._mutex:
            node = self._lookup(path)
            if flags & 0o1000:  # O_TRUNC
                node.data = bytearray()
            return self._handle(node)

    def opendir(self, path):
        with self._mutex:
            return self._handle(self._lookup(path))

    def read(self, path, size, offset, fh):
        with self._mutex:
            node = self.handles.get(fh) or self._lookup(path)
            return bytes(node.data[offset: offset + size])

    def write(self, path, data, offset, fh):
        with self._mutex:
            node = self.handles.get(fh) or self._lookup(path)
            self.writes_since_sync = True
            if offset > len(node.data):
                node.data.extend(b"\0" * (offset - len(node.data)))
            node.data[offset: offset + len(data)] = data
            node.mtime = node.ctime = time.time()
            return len(data)

    def truncate(self, path, length, fh=None):
        with self._mutex:
            node = (self.handles.get(fh) if fh else None) or self._lookup(path)
            del node.data[length:]
            node.data.extend(b"\0" * (length - len(node.data)))

    def unlink(self, path):
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.entries.pop(name, None)
            if node is None:
                raise FuseOSError(errno.ENOENT)
            node.links -= 1
            parent.mtime = parent.ctime = time.time()

    def rename(self, old, new):
        with self._mutex:
            old_parent, old_name = self._parent(old)
            new_parent, new_name = self._parent(new)
            node = old_parent.entries.get(old_name)
            if node is None:
                raise FuseOSError(errno.ENOENT)
            existing = new_parent.entries.get(new_name)
            if existing is not None and existing.is_dir and existing.entries:
                raise FuseOSError(errno.ENOTEMPTY)
            del old_parent.entries[old_name]
            new_parent.entries[new_name] = node

    def link(self, target, source):
        with self._mutex:
            node = self._lookup(source)
            parent, name = self._parent(target)
            if name in parent.entries:
                raise FuseOSError(errno.EEXIST)
            parent.entries[name] = node
            node.links += 1

    def fsync(self, path, datasync, fh):
        with self._mutex:
            self._sync_point()
            node = self.handles.get(fh) or self._lookup(path)
            node.durable = bytes(node.data)
            return 0

    def fsyncdir(self, path, datasync, fh):
        with self._mutex:
            self._sync_point()
            node = self.handles.get(fh) or self._lookup(path)
            node.durable_entries = dict(node.entries)
            return 0

    def release(self, path, fh):
        with self._mutex:
            self.handles.pop(fh, None)
            return 0

    def releasedir(self, path, fh):
        return self.release(path, fh)

    def flush(self, path, fh):
        return 0

    def chmod(self, path, mode):
        with self._mutex:
            self._lookup(path).mode = mode & 0o7777
            return 0

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        with self._mutex:
            node = self._lookup(path)
            node.atime, node.mtime = times if times else (time.time(), time.time())
            return 0

    def access(self, path, amode):
        with self._mutex:
            self._lookup(path)
            return 0

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 20, "f_bfree": 1 << 19, "f_bavail": 1 << 19,
                "f_files": 1 << 20, "f_ffree": 1 << 19, "f_namemax": 255}


def mount(fs: LazyFS, mountpoint: str) -> threading.Thread:
    """Serves `fs` at `mountpoint` from a thread until it is unmounted. The kernel
    caches no names or attributes, so what a reader sees after a remount is the
    file system's own state."""
    def serve():
        fusepy.FUSE(fs, mountpoint, foreground=True, nothreads=False, attr_timeout=0, entry_timeout=0,
                    negative_timeout=0, hard_remove=True, use_ino=True)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread
