#!/usr/bin/env python3
"""Sizing a fleet warm from measurements (docs/fleet.md, "Sizing").

One pod's figures, measured here against `fpctl serve --latency L` on
loopback, as the Kubernetes Job runs warm (2 placements, --media none,
--output-dir, --shard job/N with one shard of one): for each latency and
--concurrency C, a warm over N identities into a fresh cache, reporting

  identities/s (wall time), requests/s at the backend (batches counted by the
  server over the same wall time), peak RSS (/usr/bin/time), the cache's disk
  per million entries (du of the cache over its entries), the output's bytes
  per row, and the ratio to the bound min(C / latency, the zero-latency rate).

Then the table for 1, 10 and 100 million identities: pods needed for a target
wall time, scaled by arithmetic printed beside each figure. Nothing is
extrapolated but by that arithmetic.

Usage: Benchmarks/fleet_sizing.py [--fpctl PATH] [--identities 10000]
                                 [--latencies 0,100] [--concurrency 64,256,1024]
                                 [--backend-budget 5000]
Needs /usr/bin/time (Scripts/install-deps.sh time).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
PLACEMENTS = ["onboarding", "paywall"]


def serve(fpctl, latency, more=()):
    extra = (["--latency", str(latency)] if latency else []) + list(more)
    process = subprocess.Popen([fpctl, "serve", str(ROOT / "bundles" / "demo"), "--port", "0", "-q", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        sys.exit("fpctl serve did not start")
    return process, url


def batches(url):
    with urllib.request.urlopen(url + "/_admin/stats") as response:
        return json.load(response)["routes"].get("resolve-batch", 0)


def du(path):
    """Bytes allocated on disk (blocks, directories included), not the files' lengths."""
    return int(subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True,
                              text=True).stdout.split()[0])


def one(fpctl, work, url, ids, count, concurrency, name):
    cache, results = work / f"cache-{name}", work / f"results-{name}"
    results.mkdir()
    before = batches(url)
    cmd = ["/usr/bin/time", "-f", "%M", fpctl, "warm", *PLACEMENTS, "--api-url", url, "--app-id", "demo",
           "--media", "none", "--identities", str(ids), "--cache-dir", str(cache), "--concurrency",
           str(concurrency), "--shard", "job/1", "--run-id", name, "--output-dir", str(results)]
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "JOB_COMPLETION_INDEX": "0"})
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"warm failed ({result.returncode}): {result.stderr}")
    rss = int(result.stderr.strip().splitlines()[-1]) / 1024
    requests = batches(url) - before
    entries = sum(1 for _ in cache.glob("flows/*/*/*.json"))
    output = next((results / name).iterdir())
    rows = count * len(PLACEMENTS)
    figures = {
        "identities_per_s": count / elapsed, "requests_per_s": requests / elapsed, "rss_mib": rss,
        "cache_bytes_per_entry": du(cache) / max(entries, 1), "entries": entries,
        "output_bytes_per_row": output.stat().st_size / rows, "seconds": elapsed,
    }
    shutil.rmtree(cache)
    shutil.rmtree(results)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fpctl")
    parser.add_argument("--identities", type=int, default=10000)
    parser.add_argument("--latencies", default="0,100")
    parser.add_argument("--concurrency", default="64,256,1024")
    parser.add_argument("--backend-budget", type=int, default=5000,
                        help="requests/s the backend allows the whole fleet (pods are paced with --rate past it)")
    args = parser.parse_args()
    fpctl = release_fpctl(args.fpctl, static=True)
    work = Path(tempfile.mkdtemp(prefix="fpctl-sizing-"))
    ids = work / "ids.jsonl"
    ids.write_text("".join(json.dumps({"user_id": f"u{i}", "attributes": {"country": "DE"}}) + "\n"
                           for i in range(args.identities)))
    latencies = [int(x) for x in args.latencies.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    measured = {}
    try:
        for latency in latencies:
            process, url = serve(fpctl, latency)
            for c in concurrencies:
                measured[(latency, c)] = one(fpctl, work, url, ids, args.identities, c, f"l{latency}-c{c}")
            process.terminate()
            process.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"fpctl {fpctl}; {args.identities} identities x {len(PLACEMENTS)} placements, --media none, "
          f"--output-dir, one pod (this machine: {os.cpu_count()} cores)")
    print("| latency | --concurrency | identities/s | bound | ratio | requests/s at the backend | peak RSS MiB "
          "| disk per 1M entries | output per 1M rows |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (latency, c), f in measured.items():
        zero = measured.get((0, c), f)["identities_per_s"]
        bound = min(c / (latency / 1000), zero) if latency else zero
        print(f"| {latency} ms | {c} | {f['identities_per_s']:,.0f} | {bound:,.0f} | {f['identities_per_s'] / bound:.2f} "
              f"| {f['requests_per_s']:,.0f} | {f['rss_mib']:.0f} | {f['cache_bytes_per_entry'] * 1e6 / 2**30:.2f} GiB "
              f"| {f['output_bytes_per_row'] * 1e6 / 2**20:.0f} MiB |")

    # Scaling: pods for a target wall time, from the slowest backend measured
    # and the --concurrency that was fastest against it.
    latency = max(latencies)
    c = max(concurrencies, key=lambda c: measured[(latency, c)]["identities_per_s"])
    f = measured[(latency, c)]
    rate = f["identities_per_s"]
    budget = args.backend_budget
    print(f"\nScaled from {latency} ms at --concurrency {c}, the fastest measured there: {rate:,.0f} identities/s "
          f"a pod ({f['requests_per_s']:,.0f} requests/s at the backend: one batch an identity), "
          f"{f['rss_mib']:.0f} MiB peak RSS; the backend allows the whole fleet {budget:,} requests/s.")
    print("| identities | pairs | target | pods = ceil(identities / (rate x target)) | --concurrency | --rate a pod "
          "| wall time | backend requests/s | memory a pod | cache disk (pairs x bytes/entry) "
          "| results (pairs x bytes/row) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for identities, hours in [(1_000_000, 1), (10_000_000, 1), (100_000_000, 4)]:
        pods = math.ceil(identities / (rate * hours * 3600))
        fleet = pods * rate
        per_pod = "none"
        if fleet > budget:  # the backend's budget, not the pods, bounds the run: pace every pod under it
            per_pod = f"{budget // pods}/s"
            fleet = (budget // pods) * pods
        wall = identities / fleet
        pairs = identities * len(PLACEMENTS)
        print(f"| {identities:,} | {pairs:,} | {hours} h | {pods} | {c} | {per_pod} | {wall / 60:.0f} min "
              f"| {fleet:,.0f} | {f['rss_mib']:.0f} MiB | {pairs * f['cache_bytes_per_entry'] / 2**30:,.1f} GiB "
              f"| {pairs * f['output_bytes_per_row'] / 2**30:,.1f} GiB |")


if __name__ == "__main__":
    main()
