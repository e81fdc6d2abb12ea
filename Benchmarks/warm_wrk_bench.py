#!/usr/bin/env python3
"""Benchmark: fpctl warm's rate and CPU per identity against references
measured in the same run, against the same `fpctl serve` (issue #45):

  wrk         posting the same resolve-batch bodies (Benchmarks/resolve_batch.lua),
              reading each answer and nothing more: the ceiling of the loopback
              and the server;
  http-floor  AsyncHTTPClient configured as fpctl's transport configures it,
              posting the same bodies with the same concurrency and reading each
              answer whole, with nothing parsed and nothing written
              (Benchmarks/HTTPFloor, built here): the floor under any client
              built on it, which fpctl is;
  warm        `fpctl warm onboarding paywall --media none --concurrency 64` into
              a new cache on tmpfs (/dev/shm), and the same into a new cache on
              the VM's disk (ext4, under /var/tmp): durable there, one syncfs a
              group commit.

Rounds interleave the four; medians. Prints each rate beside its reference,
warm's CPU per identity (user+sys, getrusage of the child) beside the floor's
and the server's per batch, each client's user and system time apart (#63:
where warm's extra CPU goes), and the goals of #45:
  warm (tmpfs) >= 0.35 of wrk; warm (ext4) >= 0.7 of warm (tmpfs).

Instruction counts: Benchmarks/warm_callgrind.py.

Usage: Benchmarks/warm_wrk_bench.py [--identities 12000] [--rounds 5] [--seconds 5] [--fpctl PATH]
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
import uuid
from pathlib import Path

from fleet_sizing import serve
from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64


def cpu_seconds(pid):
    """user+sys of a running process, from /proc/PID/stat (ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SPLIT = {}


def child_cpu(command, **kwargs):
    """Runs `command`; its wall time and its CPU (user+sys) in seconds. The
    split is kept in SPLIT[program] as (user, sys) lists."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, **kwargs)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    key = Path(command[0]).name + (" " + command[command.index("--cache-dir") + 1].split("/")[1]
                                   if "--cache-dir" in command else "")
    SPLIT.setdefault(key, []).append((user, system))
    return done, wall, user + system


def warm_once(fpctl, url, identities, cache):
    done, wall, cpu = child_cpu(
        [fpctl, "warm", "onboarding", "paywall", "--api-url", url, "--app-id", "demo", "--identities", identities,
         "--cache-dir", cache, "--media", "none", "--concurrency", str(CONCURRENCY), "--format", "csv"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or f"warmed {2 * identities_count(identities)}," not in done.stderr:
        sys.exit(f"warm failed ({done.returncode}): {done.stderr[-400:]}")
    return wall, cpu


def identities_count(path):
    with open(path) as f:
        return sum(1 for _ in f)


def floor_once(floor, url, count):
    done, _, cpu = child_cpu([floor, url, str(count), str(CONCURRENCY)], capture_output=True, text=True, check=True)
    return float(re.search(r"([0-9.]+) identities/s", done.stdout).group(1)), cpu


def wrk_once(url, seconds):
    out = subprocess.run(["wrk", "-t1", f"-c{CONCURRENCY}", f"-d{seconds}s", "-s",
                          str(ROOT / "Benchmarks/resolve_batch.lua"), url],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def build_floor():
    package = ROOT / "Benchmarks/HTTPFloor"
    build = ["swift", "build", "-c", "release", "--package-path", str(package)]
    subprocess.run(build, check=True, stdout=subprocess.DEVNULL)
    return subprocess.run(build + ["--show-bin-path"], check=True, capture_output=True,
                          text=True).stdout.strip() + "/http-floor"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--identities", type=int, default=12_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5, help="each wrk run")
    ap.add_argument("--fpctl")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl)
    floor = build_floor()
    shm = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    disk = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="fpctl-wrk-bench-"))
    ids = shm / "ids.jsonl"
    ids.write_text("".join(f'{{"user_id":"u{i}"}}\n' for i in range(args.identities)))
    server, url = serve(fpctl, 0)
    m = {k: [] for k in ("tmpfs", "ext4", "cpu", "cpu_ext4", "server", "wrk", "floor", "floor_cpu")}
    try:
        for _ in range(args.rounds):
            for place, key in ((shm, "tmpfs"), (disk, "ext4")):
                s0 = cpu_seconds(server.pid)
                wall, cpu = warm_once(fpctl, url, str(ids), str(place / f"cache-{uuid.uuid4().hex}"))
                m[key].append(args.identities / wall)
                m["cpu" if key == "tmpfs" else "cpu_ext4"].append(cpu / args.identities)
                if key == "tmpfs":
                    m["server"].append((cpu_seconds(server.pid) - s0) / args.identities)
                # tmpfs entries go at once; the disk's at the end (removing them slows the next run).
                if key == "tmpfs":
                    for old in place.glob("cache-*"):
                        shutil.rmtree(old, ignore_errors=True)
            m["wrk"].append(wrk_once(url, args.seconds))
            rate, cpu = floor_once(floor, url, args.identities)
            m["floor"].append(rate)
            m["floor_cpu"].append(cpu / args.identities)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in m.items()}
    us = 1e6
    print(f"fpctl: {fpctl}; {args.identities} identities, 2 placements, C={CONCURRENCY}, --media none; "
          f"median of {args.rounds} interleaved rounds")
    print(f"rate  warm (tmpfs) {med['tmpfs']:,.0f}/s  wrk {med['wrk']:,.0f}/s  ratio {med['tmpfs'] / med['wrk']:.3f}x"
          f"  (goal >= 0.35x)")
    print(f"      http-floor {med['floor']:,.0f}/s = {med['floor'] / med['wrk']:.3f}x of wrk; "
          f"warm is {med['tmpfs'] / med['floor']:.3f}x of the floor")
    print(f"      warm (ext4) {med['ext4']:,.0f}/s = {med['ext4'] / med['tmpfs']:.3f}x of tmpfs  (goal >= 0.7x)")
    print(f"CPU   warm {med['cpu'] * us:,.0f} us per identity on tmpfs, {med['cpu_ext4'] * us:,.0f} on ext4; "
          f"http-floor {med['floor_cpu'] * us:,.0f}; serve {med['server'] * us:,.0f} us per batch")
    for key, pairs in sorted(SPLIT.items()):
        user = statistics.median(u for u, _ in pairs) / args.identities * us
        system = statistics.median(s for _, s in pairs) / args.identities * us
        print(f"      {key}: user {user:,.0f} us, sys {system:,.0f} us per identity (medians)")
    print("rounds: " + "; ".join(f"{k} " + " ".join(f"{x:,.0f}" if x > 1 else f"{x * us:,.0f}us" for x in v)
                                 for k, v in m.items()))


if __name__ == "__main__":
    sys.exit(main())
