#!/usr/bin/python3
"""Benchmark: warm on a disk whose every flush takes DELAY ms (issue #34), as a
cloud volume's sync does: group commit against one sync per entry.

The slow disk is ext4 on a loop device whose backing file is served by a small
FUSE file system (fusepy, as the power-cut test uses): reads and writes go
straight to a file in /dev/shm, and each fsync, which is what a flush of the
loop device becomes, sleeps DELAY ms, one at a time, as a device with one
flush in flight would. ext4 and the block layer above it are the real ones, so
concurrent fsyncs still share journal commits and flushes where they can.

Measured on it, in turns (median of ROUNDS), 2 placements, --media none, C=64 (--concurrency),
against `fpctl serve` on loopback:
  group commit  this build (syncfs: two flushes a group)
  fsync fan-out this build with FPCTL_COMMIT=fsync (the portable commit)
  per entry     --per-entry PATH: an fpctl from before group commit (one fsync
                per file and directory), e.g. the previous commit's release build
  unsynced      this build with every sync a no-op (LD_PRELOAD nosync.so): the
                same work minus durability, warm's ceiling on this machine
  floor         write_floor.c's group-syncfs floor on the same disk, the same
                number of entries (what the disk takes when nothing else is
                done: the issue's "warm's ceiling set by group commit" is warm
                at >= 0.8 of it)
and prints entries/s and the ratios.

Usage: sudo Benchmarks/slow_disk_bench.py [--fpctl PATH] [--per-entry PATH] [--delay-ms 5]
                                          [--identities 1000] [--rounds 3] [--concurrency 64]
Needs root (FUSE, losetup, mount) and python3-fusepy (Scripts/install-deps.sh powercut).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import fusepy

from release_fpctl import release_fpctl
from write_floor import compiled, nosync_library
from warm_latency_bench import Backends, identities

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests/powercut"))
from diskfile import NAME, DiskFile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class SlowFlushFile(DiskFile):
    """One file, `disk.img`, backed by `backing`; fsync sleeps `delay` seconds, one at a time."""

    def __init__(self, backing: str, delay: float):
        self.fd = os.open(backing, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        self.delay = delay
        self.flush_lock = threading.Lock()
        self.flushes = 0

    def read(self, path, size, offset, fh):
        return os.pread(self.fd, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(self.fd, data, offset)

    def fsync(self, path, datasync, fh):
        with self.flush_lock:
            time.sleep(self.delay)
            self.flushes += 1
        return 0


class SlowDisk:
    def __init__(self, work: Path, delay: float, size_mb: int):
        self.work = work
        self.backing = Path(tempfile.mkdtemp(prefix="slow-disk-", dir="/dev/shm")) / "disk.img"
        with open(self.backing, "wb") as f:
            f.truncate(size_mb << 20)
        self.fuse_dir, self.mnt = work / "fuse", work / "mnt"
        self.fuse_dir.mkdir()
        self.mnt.mkdir()
        self.fs = SlowFlushFile(str(self.backing), delay)
        self.thread = threading.Thread(target=lambda: fusepy.FUSE(
            self.fs, str(self.fuse_dir), foreground=True, nothreads=False, direct_io=False), daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not os.path.ismount(self.fuse_dir):
            if time.time() > deadline:
                sys.exit("slow disk: the FUSE file system did not mount (root? /dev/fuse?)")
            time.sleep(0.05)
        self.loop = subprocess.run(["losetup", "--find", "--show", str(self.fuse_dir / NAME)],
                                   check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", self.loop], check=True)
        subprocess.run(["mount", self.loop, str(self.mnt)], check=True)

    def close(self):
        subprocess.run(["umount", str(self.mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        subprocess.run(["umount", str(self.fuse_dir)], capture_output=True)
        self.thread.join(10)
        shutil.rmtree(self.backing.parent, ignore_errors=True)


def warm(fpctl, disk: SlowDisk, url: str, ids: Path, count: int, concurrency: int, env=None):
    cache = disk.mnt / f"cache-{uuid.uuid4().hex}"
    flushes = disk.fs.flushes
    start = time.perf_counter()
    done = subprocess.run([fpctl, "warm", "onboarding", "paywall", "--api-url", url, "--app-id", "demo", "--media",
                           "none", "--identities", str(ids), "--cache-dir", str(cache), "--concurrency", str(concurrency),
                           "--summary", "--format", "csv"], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - start
    flushes = disk.fs.flushes - flushes
    # Untimed: what a run left dirty (the unsynced one: all of it) is written
    # now, not by the next run's syncs.
    os.sync()
    total = [line for line in done.stdout.splitlines() if line.startswith("TOTAL,")]
    if done.returncode != 0 or not total or total[0].split(",")[2] != str(2 * count):
        sys.exit(f"warm on the slow disk failed ({done.returncode}): {done.stdout[-300:]} {done.stderr[-300:]}")
    return 2 * count / elapsed, flushes


def floor(binary: str, disk: SlowDisk, entries: int):
    """write_floor's group-syncfs floor on the slow disk: entries/s and the flushes it took."""
    placement = disk.mnt / f"floor-{uuid.uuid4().hex}" / "flows" / "paywall"
    placement.mkdir(parents=True)
    flushes = disk.fs.flushes
    done = subprocess.run([binary, "group-syncfs", str(placement), str(entries), "8", "32", "1024", "2100"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"write_floor on the slow disk: {done.stderr.strip()}")
    return float(done.stdout), disk.fs.flushes - flushes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpctl")
    ap.add_argument("--per-entry", help="an fpctl that syncs each entry on its own (before group commit)")
    ap.add_argument("--delay-ms", type=float, default=5)
    ap.add_argument("--identities", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    # Room (and inodes) for every run's entries: the backing file is sparse, in /dev/shm.
    ap.add_argument("--size-mb", type=int, default=4096)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("slow disk: needs root (FUSE, losetup, mount)")
    fpctl = release_fpctl(args.fpctl, static=True)
    work = Path(tempfile.mkdtemp(prefix="work-slow-", dir=ROOT / "Benchmarks"))
    backends = Backends(fpctl, work)
    disk = None
    try:
        url = backends.serve()
        disk = SlowDisk(work, args.delay_ms / 1000, args.size_mb)
        ids = identities(work, args.identities)
        floor_binary = compiled(work)
        runs = [("group commit", fpctl, {}), ("fsync fan-out", fpctl, {"FPCTL_COMMIT": "fsync"}),
                ("unsynced", fpctl, {"LD_PRELOAD": nosync_library(work)})]
        if args.per_entry:
            runs.append(("per entry", args.per_entry, {}))
        print(f"ext4 on a loop device whose every flush takes {args.delay_ms:g} ms; warm of "
              f"{args.identities} identities x 2 placements, C={args.concurrency}: durable entries/s (device flushes)")
        rates = {name: [] for name, _, _ in runs}
        rates["floor"] = []
        for round_ in range(args.rounds):
            line = f"  round {round_ + 1}:"
            rate, flushes = floor(floor_binary, disk, 2 * args.identities)
            rates["floor"].append(rate)
            line += f"   floor {rate:6.0f} ({flushes} flushes)"
            for name, binary, env in runs:
                rate, flushes = warm(binary, disk, url, ids, args.identities, args.concurrency, env)
                rates[name].append(rate)
                line += f"   {name} {rate:6.0f} ({flushes} flushes)"
            print(line, flush=True)
        median = {name: statistics.median(values) for name, values in rates.items()}
        for name, value in median.items():
            print(f"  median {name:14} {value:7.0f} entries/s   {value / median['group commit']:.2f}x group commit")
        if args.per_entry:
            print(f"group commit / per entry: {median['group commit'] / median['per entry']:.1f}x")
        print(f"group commit / floor: {median['group commit'] / median['floor']:.2f} (goal >= 0.8); "
              f"group commit / unsynced: {median['group commit'] / median['unsynced']:.2f}")
    finally:
        if disk:
            disk.close()
        backends.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
