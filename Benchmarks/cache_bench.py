#!/usr/bin/env python3
"""Benchmark: fpctl cache info / list / prune on a large cache vs find, same run.

Fills a cache directory with 100,000 flow entries and 20,000 images through the
core library (`fpctl cache put`), then measures with the release build, median of 5:

  info                       vs find DIR -type f -printf '%s %T@\\n'   (goal <= 1.0x)
  list --format json         vs the same find                         (goal <= 1.5x)
  prune --max-size HALF --dry-run  vs the same find                   (goal <= 1.0x)
  peak RSS of each                                                   (goal < 200 MiB)

Usage: Benchmarks/cache_bench.py [--flows 100000] [--images 20000] [--runs 5] [--keep] [--dynamic | --fpctl PATH]
By default it measures the binary Scripts/install.sh installs (release, Swift
runtime linked in, .build-static); --dynamic the everyday `swift build -c release` one.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "Benchmarks" / "work"


def timed(cmd, shell=False):
    start = time.perf_counter()
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median(runs, cmd, shell=False):
    return statistics.median(timed(cmd, shell) for _ in range(runs))


def peak_mib(cmd):
    err = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr.strip().splitlines()[-1]
    return int(err) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--images", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fpctl", help="an fpctl binary to measure instead of this checkout's static release build")
    ap.add_argument("--dynamic", action="store_true", help="measure `swift build -c release`'s binary instead")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl, static=not args.dynamic)
    WORK.mkdir(parents=True, exist_ok=True)
    cache = WORK / "cache"
    if cache.exists():
        shutil.rmtree(cache)
    flow = ROOT / "bundles/demo/flows/paywall.json"
    images = WORK / "img"
    images.mkdir(exist_ok=True)
    for i in range(20):
        (images / f"{i}.png").write_bytes(os.urandom(2000 + i * 500))
    lines = WORK / "fill.jsonl"
    placements = ["onboarding", "paywall", "upsell", "settings", "winback"]
    with open(lines, "w") as f:
        for i in range(args.flows):
            f.write('{"placement":"%s","user_id":"user-%d","attributes":{"plan":"free"},"ttl_seconds":%d,"flow_file":"%s"}\n'
                    % (placements[i % 5], i // 5, 300 if i % 3 else 0, flow))
        for i in range(args.images):
            f.write('{"image_url":"https://cdn.example.com/img/%d.png","image_file":"%s"}\n' % (i, images / f"{i % 20}.png"))
    start = time.perf_counter()
    subprocess.run([fpctl, "cache", "put", "--cache-dir", str(cache), "--input", str(lines)], check=True, stderr=subprocess.DEVNULL)
    fill = time.perf_counter() - start
    files = sum(len(f) for _, _, f in os.walk(cache))
    image_bytes = sum(p.stat().st_size for p in (cache / "images").rglob("*.img"))

    find = f"find {cache} -type f -printf '%s %T@\\n' > /dev/null"
    ref = median(args.runs, find, shell=True)
    info_cmd = [fpctl, "cache", "info", "--cache-dir", str(cache)]
    list_cmd = [fpctl, "cache", "list", "--cache-dir", str(cache), "--format", "json"]
    prune_cmd = [fpctl, "cache", "prune", "--cache-dir", str(cache), "--max-size", str(image_bytes // 2), "--dry-run"]
    info = median(args.runs, info_cmd)
    lst = median(args.runs, " ".join(list_cmd) + " > /dev/null", shell=True)
    prune = median(args.runs, prune_cmd)
    mem = {name: peak_mib(cmd) for name, cmd in [("info", info_cmd), ("list", list_cmd), ("prune", prune_cmd)]}

    print(f"fpctl: {fpctl}")
    print(f"cache: {args.flows} flows, {args.images} images, {files} files; filled in {fill:.1f}s; median of {args.runs}")
    print(f"find -printf      {ref:.3f}s")
    print(f"info              {info:.3f}s  ratio {info / ref:.2f}x  (goal <= 1.0x)  peak {mem['info']:.0f} MiB")
    print(f"list --format json {lst:.3f}s  ratio {lst / ref:.2f}x  (goal <= 1.5x)  peak {mem['list']:.0f} MiB")
    print(f"prune --dry-run   {prune:.3f}s  ratio {prune / ref:.2f}x  (goal <= 1.0x)  peak {mem['prune']:.0f} MiB  (goal < 200 MiB)")
    if not args.keep:
        shutil.rmtree(WORK)


if __name__ == "__main__":
    sys.exit(main())
