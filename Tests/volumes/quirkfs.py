"""A FUSE file system over a directory, with the quirks of the volumes a fleet gets.

    python3 quirkfs.py BACKING MOUNTPOINT [--no-link] [--noop-flock | --pass-flock]
                       [--negative-timeout S] [--cache-timeout S]

It passes every call through to BACKING, so two mounts of one BACKING are two
nodes' views of one shared volume. Any FUSE file system through libfuse 2
already refuses `O_TMPFILE` and `renameat2`'s flags (EOPNOTSUPP, EINVAL), as
NFS and SMB mounts often do. On top of that:

  --no-link             `link` fails with EPERM (SMB, some FUSE and object-store mounts);
  --noop-flock          `flock` succeeds and locks nothing (NFS mounted `nolock`
                        across nodes): libfuse is told the file system does its
                        own flock, so the kernel hands every call here;
  --pass-flock          `flock` is taken on the backing file, so two mounts of one
                        BACKING lock each other out, as NFS's locks do across
                        nodes (without it, each mount's kernel locks its own inodes);
  --negative-timeout S  the kernel remembers a missing name for S seconds, as an
                        NFS client's attribute cache does: a name another mount
                        made meanwhile stays missing here until then;
  --cache-timeout S     the kernel keeps names and attributes for S seconds (an
                        NFS client's attribute cache, `acregmax`): a file another
                        mount appended to keeps its old size here, even through
                        a new `open`, and reads stop at it, until then.

Runs in the foreground until unmounted (`umount MOUNTPOINT`), on fusepy
(Debian's python3-fusepy, libfuse2), as root.
"""
import argparse
import ctypes
import errno
import fcntl
import os
import sys

import fusepy
from fusepy import FuseOSError, Operations


def with_flock() -> None:
    """fusepy's operations table stops at `ioctl`; libfuse 2.9's goes on with
    poll, write_buf, read_buf, flock and fallocate. The table is extended so a
    `flock` method reaches libfuse (which then asks the kernel to pass flock on)."""
    base = fusepy.fuse_operations
    flock_type = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(fusepy.fuse_file_info), ctypes.c_int)

    class Extended(ctypes.Structure):
        _fields_ = list(base._fields_) + [
            ("poll", ctypes.c_voidp),
            ("write_buf", ctypes.c_voidp),
            ("read_buf", ctypes.c_voidp),
            ("flock", flock_type),
            ("fallocate", ctypes.c_voidp),
        ]

    fusepy.fuse_operations = Extended

    def flock(self, path, fip, op):
        return self.operations("flock", self._decode_optional_path(path), fip.contents.fh, op)

    fusepy.FUSE.flock = flock


class Passthrough(Operations):
    use_ns = True

    def __init__(self, backing: str, no_link: bool, noop_flock: bool, pass_flock: bool = False):
        self.backing = os.path.realpath(backing)
        self.no_link = no_link
        if noop_flock:
            self.flock = lambda path, fh, op: 0
        elif pass_flock:
            self.flock = self._pass_flock

    @staticmethod
    def _pass_flock(path, fh, op):
        try:
            fcntl.flock(fh, op)
        except OSError as error:
            raise FuseOSError(error.errno)
        return 0

    def _real(self, path: str) -> str:
        return self.backing + path

    def getattr(self, path, fh=None):
        st = os.lstat(self._real(path))
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino")
        attrs = {key: getattr(st, key) for key in keys}
        for key in ("st_atime", "st_mtime", "st_ctime"):
            attrs[key] = getattr(st, key + "_ns")
        return attrs

    def access(self, path, amode):
        if not os.access(self._real(path), amode):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._real(path))

    def readlink(self, path):
        return os.readlink(self._real(path))

    def mkdir(self, path, mode):
        os.mkdir(self._real(path), mode)

    def rmdir(self, path):
        os.rmdir(self._real(path))

    def unlink(self, path):
        os.unlink(self._real(path))

    def symlink(self, target, source):
        os.symlink(source, self._real(target))

    def rename(self, old, new):
        os.rename(self._real(old), self._real(new))

    def link(self, target, source):
        if self.no_link:
            raise FuseOSError(errno.EPERM)
        os.link(self._real(source), self._real(target))

    def chmod(self, path, mode):
        os.chmod(self._real(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._real(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._real(path), ns=times) if times else os.utime(self._real(path))

    def statfs(self, path):
        st = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                "f_frsize", "f_namemax")
        return {key: getattr(st, key) for key in keys}

    def create(self, path, mode, fi=None):
        return os.open(self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def open(self, path, flags):
        return os.open(self._real(path), flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def fsync(self, path, datasync, fh):
        os.fdatasync(fh) if datasync else os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--no-link", action="store_true")
    parser.add_argument("--noop-flock", action="store_true")
    parser.add_argument("--pass-flock", action="store_true")
    parser.add_argument("--cache-timeout", type=float, default=0)
    parser.add_argument("--negative-timeout", type=float, default=0)
    args = parser.parse_args()
    if args.noop_flock or args.pass_flock:
        with_flock()
    options = {"foreground": True, "allow_other": True, "fsname": "quirkfs", "subtype": "quirkfs"}
    # Unless --cache-timeout says otherwise, positive lookups and attributes are not cached either, so a
    # name removed through the other mount is gone here at once.
    options["entry_timeout"] = args.cache_timeout
    options["attr_timeout"] = args.cache_timeout
    if args.negative_timeout:
        options["negative_timeout"] = args.negative_timeout
    fusepy.FUSE(Passthrough(args.backing, args.no_link, args.noop_flock, args.pass_flock), args.mountpoint, **options)


if __name__ == "__main__":
    sys.exit(main())
