#!/usr/bin/env python3
"""Benchmark: warm's durable throughput against the disk's group-commit floor (issue #34).

Measured in one run, each figure beside its reference (release build, 2
placements, --media none, `fpctl serve` on loopback):

  floor    warm at --concurrency 64 with no latency, IDENTITIES identities (2 entries
           each): durable entries/s, against the write floors write_floor.py
           measures on the same disk in the same run, interleaved with the warm
           runs (floor, warm, floor, warm, ...; medians of ROUNDS):
             group-syncfs  a batch of 1,024 written, then one syncfs(2) (the goal's floor;
                           fpctl's commit on ext4 is two syncfs a group, so this is stricter)
             group-fsync   fpctl's portable commit (FUSE, NFS) with nothing else to do
             per-entry     one fsync per file and per directory (warm before #34)
             unsynced      no sync at all
           goal: >= 0.8 of the group-syncfs floor, reported against each
           beside it, the same warm with every sync a no-op (LD_PRELOAD of
           Benchmarks/nosync.c): what durability costs warm on this machine; and
           the ceiling: that unsynced warm against the floor, the most any commit
           could reach here, beside the CPU per identity it used and the CPU the
           goal's rate leaves per identity on this machine's cores
           --compare PATH measures another fpctl in the same rounds (an older commit's)
  latency  at 100 ms (`serve --latency 100`), over HTTP/1.1 and over HTTPS + HTTP/2
           through nginx: --concurrency 256 and 1,024, each against
           bound = min(C / 0.1 s, the zero-latency rate at the same C over the
                       same transport, measured in the same run)
           goal: >= 0.9 of the bound; 1,024 never slower than 256 (both rounds)

Usage: Benchmarks/warm_durable_bench.py [--fpctl PATH] [--identities 16000] [--rounds 3]
                                        [--latency-identities 16000] [--skip-latency] [--skip-floor]
Needs: nginx (with http_v2), openssl (Scripts/install-deps.sh); as warm_latency_bench.py.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from release_fpctl import release_fpctl
from write_floor import nosync_library
from warm_latency_bench import Backends, warm

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ["group-syncfs", "group-fsync", "per-entry", "unsynced"]
# ext4 skips inodes freed in the last ~35 s when it allocates, and after thousands of
# deletions that search costs more than the writes: nothing is removed until the end,
# and the run starts this long after whatever was removed before it.
SETTLE_SECONDS = 40


def floors(work: Path, entries: int):
    done = subprocess.run([sys.executable, str(ROOT / "Benchmarks/write_floor.py"), "--dir", str(work),
                           "--entries", str(entries), "--json", "--keep"], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpctl", help="the fpctl binary to measure (default: the static release build of this tree)")
    ap.add_argument("--identities", type=int, default=16000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-identities", type=int, default=16000)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-floor", action="store_true", help="measure only the 100 ms figures")
    ap.add_argument("--settle", type=float, default=SETTLE_SECONDS,
                    help="seconds to wait before measuring (after earlier deletions on this disk)")
    ap.add_argument("--compare", help="another fpctl to measure beside it at C=64 (e.g. an older commit's)")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl, static=True)
    # On the disk the cache would be on (Benchmarks/), not a tmpfs /tmp.
    work = Path(tempfile.mkdtemp(prefix="work-durable-", dir=ROOT / "Benchmarks"))
    backends = Backends(fpctl, work)
    try:
        plain0 = backends.serve()
        time.sleep(args.settle)
        print(f"fpctl: {fpctl}; 2 placements, --media none")
        if not args.skip_floor:
            floor_section(args, fpctl, work, plain0)
        if args.skip_latency:
            return
        latency_section(args, fpctl, work, backends, plain0)
    finally:
        backends.stop()
        shutil.rmtree(work, ignore_errors=True)


def floor_section(args, fpctl, work: Path, plain0: str):
    print(f"durable entries/s, no latency, C=64, {args.identities} identities; floors of "
          f"{2 * args.identities} entries beside each run")
    measured = {name: [] for name in FLOORS + ["warm", "warm unsynced", "unsynced cpu", "compare"]}
    nosync = {"LD_PRELOAD": nosync_library(work)}
    for round_ in range(args.rounds):
        figures = floors(work, 2 * args.identities)
        rate, _ = warm(fpctl, work, plain0, 64, args.identities)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        unsynced, _ = warm(fpctl, work, plain0, 64, args.identities, env=nosync)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        measured["unsynced cpu"].append(cpu * 1e6 / args.identities)
        for name in FLOORS:
            measured[name].append(figures[name])
        measured["warm"].append(2 * rate)
        measured["warm unsynced"].append(2 * unsynced)
        line = f"  round {round_ + 1}: warm {2 * rate:7.0f}   warm unsynced {2 * unsynced:7.0f}"
        if args.compare:
            other, _ = warm(args.compare, work, plain0, 64, args.identities)
            measured["compare"].append(2 * other)
            line += f"   compared {2 * other:7.0f}"
        print(line + "   " + "   ".join(f"{name} {figures[name]:7.0f}" for name in FLOORS), flush=True)
    median = {name: statistics.median(values) for name, values in measured.items() if values}
    print(f"  median: warm {median['warm']:.0f} entries/s ({median['warm'] / 2:.0f} identities/s)")
    print(f"    / warm unsynced  {median['warm unsynced']:7.0f}: {median['warm'] / median['warm unsynced']:.2f}"
          "   (what durability costs warm)")
    if args.compare:
        print(f"    compared ({args.compare}): {median['compare']:.0f} entries/s; "
              f"warm / compared {median['warm'] / median['compare']:.2f}")
    for name in FLOORS:
        goal = "   (goal >= 0.80)" if name == "group-syncfs" else ""
        print(f"    / {name:12} floor {median[name]:7.0f}: {median['warm'] / median[name]:.2f}{goal}")
    # No commit can take warm past what it does with no sync at all: that rate, against
    # the floor, is the most any commit could reach on this machine. The goal's rate
    # leaves each identity this much of the machine's CPU, for warm, serve (on the same
    # cores here) and the kernel's writeback together.
    goal_ids = 0.8 * median["group-syncfs"] / 2
    budget = (os.cpu_count() or 1) * 1e6 / goal_ids
    print(f"  ceiling: warm unsynced / group-syncfs floor: {median['warm unsynced'] / median['group-syncfs']:.2f} "
          f"(the most any commit could reach here)")
    print(f"    0.8 of the floor is {goal_ids:.0f} identities/s: {budget:.0f} us of CPU per identity on "
          f"{os.cpu_count()} cores for everything; warm unsynced alone used {median['unsynced cpu']:.0f}")


def latency_section(args, fpctl, work: Path, backends: Backends, plain0: str):
    plain100 = backends.serve("--latency", "100")
    tls0, tls100 = backends.nginx_h2(plain0), backends.nginx_h2(plain100)
    ca = ("--cacert", str(work / "ca.pem"))
    count = args.latency_identities
    print(f"\nat 100 ms, {count} identities: identities/s vs min(C / 0.1 s, zero-latency rate at that C)")
    print(f"{'transport':24} {'round':>5} {'C':>5} {'ids/s':>8} {'zero-lat':>9} {'C/lat':>7} {'bound':>7} "
          f"{'ratio':>6}")
    worst, never_slower = 1e9, True
    for name, url, zero_url, extra in (("HTTP/1.1", plain100, plain0, ()),
                                       ("HTTPS + HTTP/2 (nginx)", tls100, tls0, ca)):
        for round_ in (1, 2):
            rates = {}
            for c in (256, 1024):
                zero, _ = warm(fpctl, work, zero_url, c, count, extra)
                rate, _ = warm(fpctl, work, url, c, count, extra)
                bound = min(c / 0.1, zero)
                rates[c] = rate
                worst = min(worst, rate / bound)
                print(f"{name:24} {round_:>5} {c:>5} {rate:>8.0f} {zero:>9.0f} {c / 0.1:>7.0f} {bound:>7.0f} "
                      f"{rate / bound:>6.2f}", flush=True)
            never_slower &= rates[1024] >= 0.97 * rates[256]
    print(f"goal: worst ratio {worst:.2f} (>= 0.9); C=1,024 never slower than 256 (within 3%): "
          f"{'yes' if never_slower else 'NO'}")


if __name__ == "__main__":
    main()
