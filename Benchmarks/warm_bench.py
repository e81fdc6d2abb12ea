#!/usr/bin/env python3
"""Benchmark: fpctl warm at fleet scale, against fpctl serve on loopback (release build).

Measured in one run, each figure beside its reference:
  write floor  50 placements x 1,000 identities (--media none), median of 3: warm's wall
               time / the same run's write floor, a loop writing the same number of cache
               entries of the same average size, each a temporary file then a rename into
               its key directory                                        (goal <= 2.0x)
  requests     resolve-batch and media requests counted by the server with --media
               first-screen (goal: one batch per identity, one per distinct image)
  scale        1,000,000 identities x 2 placements: peak RSS (goal < 200 MiB) and
               identities/s within 20% of the rate at 10,000 identities
  report       fpctl report over 10 files of 1,000,000 rows: peak RSS (goal < 200 MiB)
  curl         (--curl) the same 50,000 resolves by `xargs -P 8 curl`, the first goal's reference

Usage: Benchmarks/warm_bench.py [--identities 1000] [--placements 50] [--scale 1000000]
                                [--report-rows 1000000] [--report-files 10] [--runs 3] [--curl]
                                [--fpctl PATH]   (measure another build, e.g. an older commit's)
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
import zlib
from pathlib import Path

from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "Benchmarks" / "work-warm"


def distinct_png(png: bytes, tag: str) -> bytes:
    """`png` with a tEXt chunk naming `tag` before its IEND: distinct bytes per image
    that are still a valid PNG (bytes after IEND are refused by bundle validation)."""
    body = b"tEXt" + b"Comment\0" + tag.encode()
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    return png[:-12] + chunk + png[-12:]


def make_source(d: Path, placements: int):
    (d / "flows").mkdir(parents=True)
    (d / "assets").mkdir()
    pngs = sorted((ROOT / "bundles/demo/assets").glob("*.png"))
    assets = {}
    bundle = {"app_id": "bench", "placements": {}, "assets": assets}
    for p in range(placements):
        imgs = []
        for k in range(3):  # 2 first-screen images + 1 on a later screen, distinct per placement
            url = f"https://cdn.example.com/bench/p{p}-{k}.png"
            path = f"assets/p{p}-{k}.png"
            data = distinct_png(pngs[(p + k) % len(pngs)].read_bytes(), f"{p}-{k}")
            (d / path).write_bytes(data)
            assets[url] = path
            imgs.append(url)
        flow = {"schema_version": 1, "id": f"flow_{p}", "version": "ver_1", "screens": [
            {"id": "a", "components": [{"type": "image", "src": imgs[0]}, {"type": "image", "src": imgs[1]},
                                       {"type": "text", "text": "Hello " * 20},
                                       {"type": "button", "text": "Next", "action": {"type": "navigate", "screen": "b"}}]},
            {"id": "b", "components": [{"type": "image", "src": imgs[2]}, {"type": "button", "text": "Buy",
                                        "action": {"type": "purchase", "product_id": "pro"}}]}]}
        (d / f"flows/p{p:02d}.json").write_text(json.dumps(flow))
        bundle["placements"][f"p{p:02d}"] = f"flows/p{p:02d}.json"
    (d / "bundle.json").write_text(json.dumps(bundle))


def identities(path: Path, count: int, prefix: str):
    with open(path, "w") as f:
        for i in range(count):
            f.write(json.dumps({"user_id": f"{prefix}-{i}", "attributes": {"plan": "free" if i % 2 else "pro"}}) + "\n")


def write_floor(root: Path, placements: int, identities: int, size: int) -> float:
    """The same number of entries, one per (placement, identity) key directory, each
    written to a temporary file in that directory and renamed into place."""
    payload = os.urandom(size)
    start = time.perf_counter()
    for i in range(identities):
        key = f"{uuid.uuid4().hex}{uuid.uuid4().hex}~user-{i}"
        for p in range(placements):
            d = root / f"p{p:02d}" / key
            os.makedirs(d)
            tmp = d / ".tmp-entry"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, payload)
            os.close(fd)
            os.rename(tmp, d / "entry.json")
    return time.perf_counter() - start


def peak(cmd):
    """Peak RSS (MiB) and wall time of a run that must succeed: a failed run has no figures."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M %e", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = out.stderr.strip().splitlines()
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd[:3]))} ... failed ({out.returncode}): {' | '.join(lines[-4:-1])}")
    rss, secs = lines[-1].split()
    return int(rss) / 1024, float(secs), out.returncode


def report_inputs(d: Path, files: int, rows: int):
    """Warm JSON outputs as warm writes them, one run each, `rows` rows each."""
    d.mkdir(parents=True)
    paths = []
    for n in range(files):
        path = d / f"run-{n}.json"
        with open(path, "w") as f:
            f.write('{"rows":[')
            for i in range(rows):
                fp = f"{(n * rows + i) * 2654435761 % (1 << 64):016x}" * 4
                state = "warmed" if i % 10 else "failed"
                row = ('{"delivery_source":' + ('"network"' if state == "warmed" else "null") +
                       ',"error":' + ('null' if state == "warmed" else '{"code":"http_503","message":"backend answered 503"}') +
                       f',"fingerprint":"{fp}","flow_id":"flow_1","from_cache":false,"media_warmed":false,"ms":{i % 97},'
                       f'"placement":"p{i % 50:02d}","state":"{state}","ttl_seconds":300,"user_id":"u{i}","version":"v1"}}')
                f.write(("\n" if i == 0 else ",\n") + row)
            f.write('\n],"run":{"ended_at":"2026-11-23T06:00:00Z","placements":["p00"],"run_id":"run-%d","shard":null,'
                    '"started_at":"2026-11-23T05:00:00Z"},"schema_version":1,"summary":{}}\n' % n)
        paths.append(str(path))
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--identities", type=int, default=1000)
    ap.add_argument("--placements", type=int, default=50)
    ap.add_argument("--scale", type=int, default=1_000_000)
    ap.add_argument("--report-rows", type=int, default=1_000_000)
    ap.add_argument("--report-files", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--curl", action="store_true")
    ap.add_argument("--fpctl", help="an fpctl binary to measure instead of this checkout's release build")
    ap.add_argument("--parts", default="floor,requests,scale,report", help="which measurements to run")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    make_source(WORK / "src", args.placements)
    keys = [f"p{p:02d}" for p in range(args.placements)]
    ids = WORK / "ids.jsonl"
    identities(ids, args.identities, "user")

    server = subprocess.Popen([fpctl, "serve", str(WORK / "src"), "--port", "0", "--ttl", "300", "--rewrite-asset-urls", "-q"],
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()

    def stats():
        with urllib.request.urlopen(f"{url}/_admin/stats") as r:
            return json.load(r)

    def reset():
        urllib.request.urlopen(urllib.request.Request(f"{url}/_admin/stats", method="DELETE"))

    def warm(cache, ids_path, placements, media="none", extra=()):
        start = time.perf_counter()
        r = subprocess.run([fpctl, "warm", *placements, "--cache-dir", str(cache), "--api-url", url, "--app-id", "bench",
                            "--identities", str(ids_path), "--media", media, "--concurrency", "16", "--format", "csv", *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return time.perf_counter() - start, r

    parts = set(args.parts.split(","))
    try:
        # 0. report over many rows (first: the big warm leaves millions of files behind).
        if "report" in parts and args.report_rows > 0:
            paths = report_inputs(WORK / "report", args.report_files, args.report_rows)
            rss, secs, rc = peak([fpctl, "report", *paths])
            print(f"report       {args.report_files} files x {args.report_rows:,} rows: peak RSS {rss:.0f} MiB (goal < 200), "
                  f"{secs:.1f}s, exit {rc}", flush=True)
            shutil.rmtree(WORK / "report")

        # 1. The write floor.
        warm_times, floor_times = [], []
        for n in range(args.runs if "floor" in parts else 0):
            cache = WORK / f"cache-{n}"
            os.sync()  # each timing starts with no dirty pages from the one before
            t, r = warm(cache, ids, keys)
            assert r.returncode == 0, r.stderr
            warm_times.append(t)
            entries = [p for p in (cache / "flows").rglob("*.json")]
            size = sum(p.stat().st_size for p in entries) // max(1, len(entries))
            os.sync()
            floor_times.append(write_floor(WORK / f"floor-{n}", args.placements, args.identities, size))
            shutil.rmtree(cache)
            shutil.rmtree(WORK / f"floor-{n}")
            os.sync()
        w, f = (statistics.median(warm_times), statistics.median(floor_times)) if warm_times else (0, 1)
        if warm_times:
            print(f"write floor  {args.placements} placements x {args.identities} identities, --media none, median of {args.runs}: "
              f"warm {w:.2f}s, floor {f:.2f}s ({len(entries)} entries of {size} bytes): {w / f:.2f}x  (goal <= 2.0x)")
            print(f"             warm runs {', '.join(f'{t:.2f}' for t in warm_times)}; floor runs {', '.join(f'{t:.2f}' for t in floor_times)}")

        # 2. Request counts with first-screen media.
        if "requests" in parts:
            reset()
            t, r = warm(WORK / "cache-media", ids, keys, media="first-screen")
            routes = stats()["routes"]
            print(f"requests     resolve-batch {routes.get('resolve-batch', 0)}, resolve {routes.get('resolve', 0)}, "
                  f"media {routes.get('media', 0)} in {t:.2f}s (goal: {args.identities} batch + {args.placements * 2} images)")

        # 3. Scale: rate at 10,000 identities vs at --scale, and peak RSS.
        small, big = WORK / "small.jsonl", WORK / "big.jsonl"
        if "scale" not in parts:
            args.scale = 0
        if args.scale:
            identities(small, 10_000, "s")
            identities(big, args.scale, "b")
            cmd = [fpctl, "warm", "p00", "p01", "--api-url", url, "--app-id", "bench", "--media", "none",
                   "--concurrency", "16", "--format", "csv"]
            os.sync()
            rss_small, secs_small, _ = peak(cmd + ["--cache-dir", str(WORK / "cache-small"), "--identities", str(small)])
            os.sync()
            rss_big, secs_big, rc = peak(cmd + ["--cache-dir", str(WORK / "cache-big"), "--identities", str(big)])
            rate_small, rate_big = 10_000 / secs_small, args.scale / secs_big
            print(f"scale        10,000 identities x 2: {rate_small:,.0f}/s, {rss_small:.0f} MiB; {args.scale:,} x 2: "
                  f"{rate_big:,.0f}/s ({rate_big / rate_small:.2f} of the small rate, goal >= 0.8), peak RSS "
                  f"{rss_big:.0f} MiB (goal < 200), exit {rc}", flush=True)

        if args.curl:
            pairs = WORK / "pairs.txt"
            with open(pairs, "w") as f:
                for i in range(args.identities):
                    body = json.dumps({"user_id": f"user-{i}", "attributes": {"plan": "free" if i % 2 else "pro"}})
                    for k in keys:
                        f.write(f"{url}/apps/bench/placements/{k}/resolve\t{body}\n")
            start = time.perf_counter()
            subprocess.run(f"tr '\\t' '\\n' < {pairs} | xargs -d '\\n' -n 2 -P 8 sh -c 'curl -s -o /dev/null -X POST -d \"$1\" \"$0\"'",
                           shell=True, check=True)
            ref = time.perf_counter() - start
            print(f"curl         xargs -P 8 curl {ref:.2f}s vs warm {w:.2f}s: {w / ref:.3f}x")
    finally:
        server.terminate()
        server.wait()

    print("removing the work directory (millions of files after a large --scale) ...", file=sys.stderr)
    shutil.rmtree(WORK)


if __name__ == "__main__":
    sys.exit(main())
