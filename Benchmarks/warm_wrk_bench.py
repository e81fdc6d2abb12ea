#!/usr/bin/env python3
"""Benchmark: fpctl warm's rate and CPU per identity against wrk posting the
same resolve-batch bodies to the same `fpctl serve` (issue #45's yardstick).

Zero latency, --media none, 2 placements, concurrency 64, cache on tmpfs
(/dev/shm). Rounds interleave warm and wrk; medians. Prints:
  rate      warm identities/s vs wrk batch requests/s        (#45's goal >= 0.35x)
  CPU       warm's user+sys per identity (getrusage of the child) beside the
            server's per batch over the same run

No instruction count: on the 2-core VM (2026-11-26) Debian 12's valgrind 3.19
stops on the Swift 6.3 release binary (its debuginfo reader gives up; on the
stripped binary, an internal SIGSEGV), and perf has no instruction counter in
the guest. A newer valgrind (trixie's 3.24) is the next thing to try.

Usage: Benchmarks/warm_wrk_bench.py [--identities 12000] [--rounds 3] [--seconds 10] [--fpctl PATH]
Needs: wrk (Scripts/install-deps.sh wrk).
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet_sizing import serve
from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid):
    """user+sys of a running process, from /proc/PID/stat (ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def warm_once(fpctl, url, identities, cache):
    shutil.rmtree(cache, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([fpctl, "warm", "onboarding", "paywall", "--api-url", url, "--app-id", "demo",
                    "--identities", identities, "--cache-dir", cache, "--media", "none",
                    "--concurrency", "64", "--format", "csv"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def wrk_once(url, seconds):
    out = subprocess.run(["wrk", "-t1", "-c64", f"-d{seconds}s", "-s", str(ROOT / "Benchmarks/resolve_batch.lua"),
                          url], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--identities", type=int, default=12_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--fpctl")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl)
    work = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    ids = work / "ids.jsonl"
    ids.write_text("".join(f'{{"user_id":"u{i}"}}\n' for i in range(args.identities)))
    server, url = serve(fpctl, 0)
    rates, cpus, wrks, server_cpu = [], [], [], []
    try:
        for _ in range(args.rounds):
            s0 = cpu_seconds(server.pid)
            wall, cpu = warm_once(fpctl, url, str(ids), str(work / "cache"))
            server_cpu.append((cpu_seconds(server.pid) - s0) / args.identities)
            rates.append(args.identities / wall)
            cpus.append(cpu / args.identities)
            wrks.append(wrk_once(url, args.seconds))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    rate, wrk = statistics.median(rates), statistics.median(wrks)
    print(f"fpctl: {fpctl}; {args.identities} identities, 2 placements, C=64, --media none, cache on tmpfs; "
          f"median of {args.rounds} interleaved rounds")
    print(f"rate      warm {rate:,.0f} identities/s  wrk {wrk:,.0f} batches/s  ratio {rate / wrk:.3f}x  (#45 goal >= 0.35x)")
    print(f"CPU       warm {statistics.median(cpus) * 1e6:,.0f} us per identity (user+sys)  "
          f"serve {statistics.median(server_cpu) * 1e6:,.0f} us per batch")


if __name__ == "__main__":
    sys.exit(main())
