#!/usr/bin/env python3
"""The disk's write floors for cache entries (issue #34): how many entries a
second this file system takes when nothing else is done, written as warm
writes them (a file of ENTRY_BYTES in a directory of its own, under one
placement directory), by THREADS writer threads. The writing is
write_floor.c, compiled here with the system's C compiler, so a floor is the
disk's and the kernel's rate, never an interpreter's.

  unsynced      mkdir, temporary file, write, rename; no sync: the ceiling no
                durable writer reaches;
  per-entry     the same with an fsync of the placement directory after the
                mkdir, of the file before its rename and of its directory after
                it: one sync per file and directory (warm before #34);
  group-syncfs  fpctl's group commit where the file system honours syncfs
                (Sources/FlowPilotCore/Files/GroupCommit.swift) with nothing
                else to do: BATCH entries staged unsynced (mkdir, O_TMPFILE,
                write), one syncfs, each file linked to its name (SYNC_THREADS
                threads), a second syncfs; then the next batch;
  group-fsync   fpctl's portable group commit (FUSE, NFS): BATCH entries staged
                as above; then, across SYNC_THREADS threads, each file fsynced
                and linked, then each directory fsynced, then the placement
                directory.

Prints one line per floor, `floor NAME ENTRIES_PER_S`, and, with --json, the
figures as JSON. Each floor writes into a fresh directory under --dir (default:
a temporary directory under Benchmarks/, on the disk the cache would be on);
they are all removed at the end (or left, with --keep), never between floors:
ext4 skips inodes freed in the last ~35 s when it allocates new ones, and
after thousands of deletions that search (recently_deleted) costs more CPU
than the writes themselves, so a floor measured right after another's removal
measures the removal. Used by warm_durable_bench.py, which runs it beside fpctl
warm. --only may be given more than once.

Usage: Benchmarks/write_floor.py [--dir DIR] [--entries 20000] [--threads 8] [--sync-threads 32]
                                 [--batch 1024] [--entry-bytes 2100] [--only NAME ...] [--json] [--keep]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ["unsynced", "per-entry", "group-syncfs", "group-fsync"]


def compiled(work: Path) -> str:
    binary = work / "write_floor"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(binary), str(ROOT / "Benchmarks/write_floor.c")], check=True)
    return str(binary)


def nosync_library(work: Path) -> str:
    """Benchmarks/nosync.c built as an LD_PRELOAD library (every sync a no-op: a reference, for benchmarks)."""
    library = work / "nosync.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(ROOT / "Benchmarks/nosync.c")], check=True)
    return str(library)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT / "Benchmarks"))
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--sync-threads", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--entry-bytes", type=int, default=2100)
    parser.add_argument("--only", choices=MODES, action="append")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="leave what was written (the caller removes --dir later)")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="work-floor-", dir=args.dir))
    figures = {}
    try:
        binary = compiled(parent)
        for mode in args.only or MODES:
            placement = parent / mode / "flows" / "paywall"
            placement.mkdir(parents=True)
            done = subprocess.run([binary, mode, str(placement), str(args.entries), str(args.threads),
                                   str(args.sync_threads), str(args.batch), str(args.entry_bytes)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"write_floor {mode}: {done.stderr.strip()}")
            figures[mode] = float(done.stdout)
            print(f"floor {mode} {figures[mode]:.0f}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    if args.json:
        json.dump(figures, sys.stdout)
        print()


if __name__ == "__main__":
    main()
