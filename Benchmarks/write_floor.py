#!/usr/bin/env python3
"""The disk's write floors for cache entries (issue #34): how many entries a
second this file system takes when nothing else is done, written as warm
writes them (a file of ENTRY_BYTES in a directory of its own, under one
placement directory: a temporary file, then a rename), by THREADS threads.

  unsynced   write and rename, no sync: the ceiling no durable writer reaches;
  per-entry  fsync the file before its rename and the directory after it: what
             one sync per entry costs (warm's way today);
  group-syncfs  a batch of BATCH entries written and renamed without a sync,
             then one syncfs(2) of the file system, then the next batch: a
             group-commit floor (durable at the end of each batch);
  group-fsync   fpctl's group commit (Sources/FlowPilotCore/Files/GroupCommit.swift)
             with nothing else to do: a batch of BATCH entries written, unsynced,
             to O_TMPFILE files by THREADS threads; then, across SYNC_THREADS
             threads, each file fsynced and linked to its name; then each
             directory and the placement directory fsynced; then the next batch.

Prints one line per floor, `floor NAME ENTRIES_PER_S`, and, with --json, the
figures as JSON. Each floor writes into a fresh directory under --dir (default:
a temporary directory under Benchmarks/, on the disk the cache would be on);
they are all removed at the end, never between floors: ext4 skips inodes freed
in the last ~35 s when it allocates new ones, and after thousands of deletions
that search (recently_deleted) costs more CPU than the writes themselves, so a
floor measured right after another's removal measures the removal. Used by warm_durable_bench.py, which runs it beside fpctl warm.
(--only may be given more than once.)

Usage: Benchmarks/write_floor.py [--dir DIR] [--entries 20000] [--threads 8]
                                 [--batch 1024] [--sync-threads 32] [--entry-bytes 2100]
                                 [--only NAME ...]
"""
import argparse
import ctypes
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ["unsynced", "per-entry", "group-syncfs", "group-fsync", "group-hybrid"]
libc = ctypes.CDLL(None, use_errno=True)


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs")
    finally:
        os.close(fd)


def write_entry(base, i, data, sync):
    key = os.path.join(base, f"key-{i:08d}")
    os.mkdir(key)
    if sync:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
    temporary = os.path.join(key, ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    if sync:
        os.fsync(fd)
    os.close(fd)
    os.rename(temporary, os.path.join(key, "entry.json"))
    if sync:
        fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)


def link_unnamed(fd, target):
    # linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, target, AT_SYMLINK_FOLLOW); os.link does not follow.
    if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, os.fsencode(target), 0x400) != 0:
        raise OSError(ctypes.get_errno(), "linkat")


def fsync_directory(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run_group_fsync(placement, entries, threads, sync_threads, batch, data, syncfs_first=False):
    def stage(i):
        key = os.path.join(placement, f"key-{i:08d}")
        os.mkdir(key)
        fd = os.open(key, os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.write(fd, data)
        return fd, key

    def name(item):
        fd, key = item
        os.fsync(fd)
        link_unnamed(fd, os.path.join(key, "entry.json"))
        os.close(fd)

    with ThreadPoolExecutor(threads) as writers, ThreadPoolExecutor(sync_threads) as syncers:
        for first in range(0, entries, batch):
            group = list(writers.map(stage, range(first, min(entries, first + batch))))
            if syncfs_first:
                syncfs(placement)
            list(syncers.map(name, group))
            list(syncers.map(fsync_directory, [key for _, key in group] + [placement]))


def run(mode, parent, entries, threads, batch, data, sync_threads=32):
    base = tempfile.mkdtemp(prefix=f"floor-{mode}-", dir=parent)
    placement = os.path.join(base, "flows", "paywall")
    os.makedirs(placement)
    syncfs(base)
    started = time.perf_counter()
    if mode in ("group-fsync", "group-hybrid"):
        run_group_fsync(placement, entries, threads, sync_threads, batch, data, syncfs_first=mode == "group-hybrid")
        return entries / (time.perf_counter() - started)
    step = batch if mode == "group-syncfs" else entries
    for first in range(0, entries, step):
        last = min(entries, first + step)
        work = iter(range(first, last))
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    i = next(work, None)
                if i is None:
                    return
                write_entry(placement, i, data, sync=(mode == "per-entry"))

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        if mode == "group-syncfs":
            syncfs(placement)
    return entries / (time.perf_counter() - started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT / "Benchmarks"))
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--sync-threads", type=int, default=32)
    parser.add_argument("--entry-bytes", type=int, default=2100)
    parser.add_argument("--only", choices=MODES, action="append")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="leave what was written (the caller removes --dir later)")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="work-floor-", dir=args.dir))
    data = os.urandom(args.entry_bytes)
    figures = {}
    try:
        for mode in args.only or MODES:
            figures[mode] = run(mode, str(parent), args.entries, args.threads, args.batch, data, args.sync_threads)
            print(f"floor {mode} {figures[mode]:.0f}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    if args.json:
        json.dump(figures, sys.stdout)
        print()


if __name__ == "__main__":
    main()
