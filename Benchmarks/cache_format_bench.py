#!/usr/bin/env python3
"""Benchmark: cache format 2 against format 1, and against the references
issue #51 names, in one run on one machine (docs/performance.md, "Cache format 2"):

  bytes     `du -s --block-size=1` of a cache of N identities x 2 placements
            (`warm onboarding paywall --media none --concurrency 64` against
            `fpctl serve bundles/demo -q`), beside the bytes of its distinct
            flows; goal: at most those plus 300 bytes an entry;
  inodes    files and directories in it; goal: at most 1 per 1,000 entries
            plus the distinct flows;
  durable   warm's identities/s with the cache on the VM's disk (ext4) against
            the same warm with the cache on tmpfs, interleaved rounds, medians;
            goal: ext4 >= 0.9x tmpfs;
  lookup    `fpctl resolve paywall` of one cached identity (a fresh hit, no
            backend) on the N-identity cache against a 5-identity cache (10
            entries), medians of many runs; goal: <= 1.5x;
  scans     `cache info`, `cache list --placement paywall`, `cache verify` and
            `cache prune --expired` on the N-identity cache, each as entries
            per second, beside `find CACHE -printf '%s %T@'` of the same
            directory; goal: format 2 at least format 1's entries/s;
  migrate   `cache migrate` of the format-1 N-identity cache: seconds and peak RSS.

Each figure for format 1 and format 2 (FPCTL_CACHE_FORMAT), same binary.
Instruction counts: Benchmarks/warm_callgrind.py (FPCTL_CACHE_FORMAT=2 in its
environment measures format 2).

Usage: Benchmarks/cache_format_bench.py [--identities 100000] [--rounds 3] [--lookups 30] [--fpctl PATH] [--keep]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fleet_sizing import du, serve
from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
PLACEMENTS = ["onboarding", "paywall"]


def env(fmt):
    return {**os.environ, "FPCTL_CACHE_FORMAT": str(fmt), "FPCTL_API_KEY": "bench"}


def write_identities(path, count):
    with open(path, "w") as f:
        for i in range(count):
            f.write(json.dumps({"user_id": f"u{i}", "attributes": {"plan": "free"}}) + "\n")


def warm(fpctl, url, ids, cache, fmt, count):
    start = time.perf_counter()
    done = subprocess.run([fpctl, "warm", *PLACEMENTS, "--api-url", url, "--app-id", "demo", "--identities", str(ids),
                           "--cache-dir", str(cache), "--media", "none", "--concurrency", "64", "--format", "csv"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(fmt))
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or f"warmed {2 * count}," not in done.stderr:
        sys.exit(f"warm failed ({done.returncode}): {done.stderr[-400:]}")
    return count / elapsed


def inodes(path):
    """Files and directories, the cache directory itself included."""
    return 1 + sum(len(dirs) + len(files) for _, dirs, files in os.walk(path))


def distinct_flow_bytes(fpctl):
    """The bytes of the distinct flows the demo serves (their canonical JSON, as objects/ holds them)."""
    total = 0
    for name in PLACEMENTS:
        doc = json.loads((ROOT / "bundles/demo/flows" / f"{name}.json").read_text())
        total += len(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    return total


def timed(cmd, fmt, runs=1, **kwargs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(fmt),
                              **kwargs)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 65):
            sys.exit(f"{' '.join(map(str, cmd))} failed ({done.returncode}): {done.stderr[-400:]}")
    return statistics.median(times)


def resolve_cmd(fpctl, cache, user):
    return [fpctl, "resolve", "paywall", "--cache-dir", str(cache), "--user-id", user, "--attribute", "plan=free",
            "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--retries", "0"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--identities", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=30)
    ap.add_argument("--fpctl")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl)
    work = ROOT / "Benchmarks" / f"work-format-{os.getpid()}"
    shm = Path("/dev/shm") / f"fpctl-format-{os.getpid()}"
    for d in (work, shm):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    n, entries = args.identities, 2 * args.identities
    ids, small_ids = work / "ids.jsonl", work / "ids-5.jsonl"
    write_identities(ids, n)
    write_identities(small_ids, 5)
    server, url = serve(fpctl, 0)
    out = {"identities": n, "entries": entries}
    try:
        # Durable rate: interleaved rounds, each format on ext4 and on tmpfs; the last ext4 cache is kept.
        rates = {(fmt, fs): [] for fmt in (1, 2) for fs in ("ext4", "tmpfs")}
        kept = {}
        for r in range(args.rounds):
            for fmt in (1, 2):
                for fs, base in (("ext4", work), ("tmpfs", shm)):
                    cache = base / f"cache-{fmt}-{r}"
                    rates[(fmt, fs)].append(warm(fpctl, url, ids, cache, fmt, n))
                    if fs == "ext4" and r == args.rounds - 1:
                        kept[fmt] = cache
                    else:
                        subprocess.run(["rm", "-rf", str(cache)], check=True)
                    print(f"round {r + 1}: format {fmt} on {fs}: {rates[(fmt, fs)][-1]:,.0f} identities/s",
                          file=sys.stderr, flush=True)
        flows = distinct_flow_bytes(fpctl)
        for fmt in (1, 2):
            ext4, tmpfs = statistics.median(rates[(fmt, "ext4")]), statistics.median(rates[(fmt, "tmpfs")])
            cache = kept[fmt]
            size, count = du(cache), inodes(cache)
            out[f"format{fmt}"] = {
                "ext4_identities_per_s": round(ext4), "tmpfs_identities_per_s": round(tmpfs),
                "ext4_vs_tmpfs": round(ext4 / tmpfs, 3), "rounds_ext4": [round(x) for x in rates[(fmt, "ext4")]],
                "rounds_tmpfs": [round(x) for x in rates[(fmt, "tmpfs")]],
                "du_bytes": size, "bytes_per_entry": round(size / entries, 1),
                "bytes_goal": flows + 300 * entries, "inodes": count, "inodes_goal": entries // 1000 + 2,
            }
        # Lookup: one cached identity on the big cache and on a 10-entry cache, interleaved.
        for fmt in (1, 2):
            small = work / f"small-{fmt}"
            warm(fpctl, url, small_ids, small, fmt, 5)
            big_t, small_t = [], []
            for _ in range(args.lookups):
                big_t.append(timed(resolve_cmd(fpctl, kept[fmt], "u4"), fmt))
                small_t.append(timed(resolve_cmd(fpctl, small, "u4"), fmt))
            big, little = statistics.median(big_t), statistics.median(small_t)
            out[f"format{fmt}"].update({"lookup_big_ms": round(big * 1000, 2), "lookup_small_ms": round(little * 1000, 2),
                                        "lookup_ratio": round(big / little, 3)})
        # Scans, each beside find -printf of the same directory, as entries per second.
        for fmt in (1, 2):
            cache = kept[fmt]
            scans = {}
            find = timed(["find", str(cache), "-printf", "%s %T@\n"], fmt, runs=3)
            for name, cmd in (("info", ["cache", "info"]), ("list", ["cache", "list", "--placement", "paywall"]),
                              ("verify", ["cache", "verify"]), ("prune_expired", ["cache", "prune", "--expired"])):
                t = timed([fpctl, *cmd, "--cache-dir", str(cache)], fmt, runs=3)
                scans[name] = {"seconds": round(t, 3), "entries_per_s": round(entries / t),
                               "vs_find": round(find / t, 3)}
            scans["find_seconds"] = round(find, 3)
            out[f"format{fmt}"]["scans"] = scans
        # Migration of the format-1 cache.
        start = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", fpctl, "cache", "migrate", "--cache-dir", str(kept[1])],
                              capture_output=True, text=True, env=env(2))
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"migrate failed: {done.stderr[-400:]}")
        out["migrate"] = {"seconds": round(elapsed, 2), "peak_rss_mib": round(int(done.stderr.split()[-1]) / 1024, 1),
                          "du_after": du(kept[1]), "inodes_after": inodes(kept[1])}
    finally:
        server.terminate()
        server.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
