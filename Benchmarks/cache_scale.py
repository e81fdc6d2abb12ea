#!/usr/bin/env python3
"""Benchmark: every cache command on a format-2 cache of 100,000 to 10 million
entries (#62): wall time and peak RSS of each, bytes and files an entry.

For each size in --sizes, a cache of that many entries (two placements, half
as many users, one flow) is written by `fpctl cache put` in format 2, and the
first fifth of them put again (older records in the log, as a cache warmed
twice holds), then each command is run once on it, its peak RSS read by
/usr/bin/time:

  info; list --format json and as text (to /dev/null); list --placement
  paywall --user-id U; verify; prune --older-than 3650d --dry-run; prune
  --older-than 0s --dry-run --format json (every entry reported); prune
  --user-id U (a compaction of the whole cache); info again (the log as that
  compaction left it: answered from log/summary.json unless entries turn
  stale that second), and as an hour later (FPCTL_NOW); clear --flows is left
  out (it only unlinks); resolve of one cached identity (a fresh entry: Tier
  0, no request); last, prune --older-than 0s (every entry removed, and listed).

The reference, measured in the same run on the same directory: `find DIR -type
f -printf '%s %T@'` (the walk a listing needs at least) and `cat` of every
segment to /dev/null (the bytes a scan must read), as entries/s. The goals of
#62: peak RSS <= 64 MiB at every size (flat), `list` and `prune --older-than`
>= 1,000,000 entries/s, `info` at 10 million in <= 1 s (the walk's, and the
summary's after a compaction).

Usage: Benchmarks/cache_scale.py [--sizes 100000,1000000] [--keep] [--dynamic | --fpctl PATH]
Ten million entries (`--sizes 10000000`) takes about 2.3 GB of disk and
about 10 minutes: opt in.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "Benchmarks" / "work-scale"


def measured(cmd, stdout=subprocess.DEVNULL):
    """Wall seconds and peak RSS (MiB) of one run of `cmd`, which must exit 0."""
    start = time.perf_counter()
    run = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()[-400:]}")
    return wall, int(run.stderr.strip().splitlines()[-1]) / 1024


def fill(fpctl, cache, entries):
    """`entries` keys put, then the first fifth put again by a second writer
    (so the log holds older records, as a cache warmed twice does); the
    wall time and peak RSS of the first put."""
    flow = ROOT / "bundles/demo/flows/paywall.json"
    lines = WORK / "fill.jsonl"
    measured_put = None
    for count in (entries, entries // 5):
        with open(lines, "w") as f:
            for i in range(count):
                f.write('{"placement":"%s","user_id":"user-%d","ttl_seconds":300,"flow_file":"%s"}\n'
                        % ("paywall" if i % 2 == 0 else "onboarding", i // 2, flow))
        put = measured([fpctl, "cache", "put", "--cache-dir", str(cache), "--input", str(lines)])
        measured_put = measured_put or put
    lines.unlink()
    return measured_put


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fpctl", help="an fpctl binary to measure instead of this checkout's static release build")
    ap.add_argument("--dynamic", action="store_true", help="measure `swift build -c release`'s binary instead")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl, static=not args.dynamic)
    os.environ["FPCTL_CACHE_FORMAT"] = "2"
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        if WORK.exists():
            shutil.rmtree(WORK)
        WORK.mkdir(parents=True)
        cache = WORK / "cache"
        put_wall, put_rss = fill(fpctl, cache, size)
        files = sum(len(f) for _, _, f in os.walk(cache))
        disk = int(subprocess.run(["du", "-sb", str(cache)], capture_output=True, text=True).stdout.split()[0])
        subprocess.run(["sync"], check=True)
        start = time.perf_counter()
        subprocess.run(f"find {cache} -type f -printf '%s %T@\\n' > /dev/null", shell=True, check=True)
        find = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(f"cat {cache}/log/*.seg > /dev/null", shell=True, check=True)
        cat = time.perf_counter() - start
        base = ["--cache-dir", str(cache)]
        user = f"user-{size // 4}"
        commands = {
            "info": ["cache", "info"] + base,
            "list": ["cache", "list", "--format", "json"] + base,
            "list (text)": ["cache", "list"] + base,
            "list --user-id": ["cache", "list", "--placement", "paywall", "--user-id", user] + base,
            "verify": ["cache", "verify"] + base,
            "prune --older-than --dry-run": ["cache", "prune", "--older-than", "3650d", "--dry-run"] + base,
            # Every entry chosen, and each reported: the report waits in a scratch file, not in memory.
            "prune --older-than 0s --dry-run --format json": [
                "cache", "prune", "--older-than", "0s", "--dry-run", "--format", "json"] + base,
            "prune --user-id": ["cache", "prune", "--user-id", user] + base,
            # The log as that compaction left it: info reads log/summary.json, not the records, unless entries
            # turn stale in this very second (the fill's TTL of 300 s ends while the larger sizes run); then, as
            # at rest, an hour later (FPCTL_NOW), when none does.
            "info after the compaction": ["cache", "info"] + base,
            "info after the compaction, an hour on": ["env", "FPCTL_NOW=" + time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600)), fpctl, "cache", "info"] + base,
            "resolve": ["resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo",
                        "--user-id", f"user-{size // 4 + 1}"] + base,
            # Last: every entry removed by one compaction that asks the rule of each record.
            "prune --older-than 0s": ["cache", "prune", "--older-than", "0s"] + base,
        }
        row = {"entries": size, "put_s": round(put_wall, 2), "put_rss_mib": round(put_rss, 1), "files": files,
               "bytes_per_entry": round(disk / size, 1), "find_entries_per_s": round(size / find),
               "cat_entries_per_s": round(size / cat), "commands": {}}
        for name, cmd in commands.items():
            wall, rss = measured(cmd if cmd[0] == "env" else [fpctl] + cmd)
            row["commands"][name] = {"s": round(wall, 3), "rss_mib": round(rss, 1),
                                     "entries_per_s": round(size / wall)}
            print(f"{size:>10,} {name:<30} {wall:8.3f} s {rss:8.1f} MiB {size / wall:12,.0f} entries/s", flush=True)
        print(f"{size:>10,} put {put_wall:.1f} s {put_rss:.1f} MiB; {files} files, {disk / size:.1f} bytes an entry; "
              f"find {size / find:,.0f} entries/s, cat of the segments {size / cat:,.0f} entries/s", flush=True)
        results.append(row)
        if not args.keep:
            shutil.rmtree(WORK)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
