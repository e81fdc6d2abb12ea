"""A FUSE file system of one file, `disk.img`: the backing file of a loop
device, for an ext4 on a disk whose flushes the harness controls (blockcut.py's
volatile cache, Benchmarks/slow_disk_bench.py's slow flushes). A subclass sets
`size` and gives `read`, `write` and `fsync` (what the loop device makes of a
flush)."""
import errno
import stat

from fusepy import FuseOSError, Operations

NAME = "disk.img"


class DiskFile(Operations):
    size = 0

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path != "/" + NAME:
            raise FuseOSError(errno.ENOENT)
        return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": self.size}

    def readdir(self, path, fh):
        return [".", "..", NAME]

    def open(self, path, flags):
        return 0

    def truncate(self, path, length, fh=None):
        pass

    def flush(self, path, fh):
        return 0
