#!/usr/bin/env python3
"""Benchmark: fpctl warm, 50 placements x 1,000 identities against fpctl serve.

Same run, release build, loopback:
  requests   resolve-batch requests and media requests counted by the server
             (goal: exactly 1,000 batch requests plus one per distinct image/font)
  wall time  fpctl warm vs the same 50,000 resolves made per (identity, placement)
             by `xargs -P 8 curl`                                (goal <= 0.2x)
  memory     peak RSS of fpctl warm with a 100,000-identity input (goal < 200 MiB)

Usage: Benchmarks/warm_bench.py [--identities 1000] [--placements 50] [--memory-identities 100000]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "Benchmarks" / "work-warm"


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
            data = pngs[(p + k) % len(pngs)].read_bytes() + f"{p}-{k}".encode()  # distinct bytes per image
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--identities", type=int, default=1000)
    ap.add_argument("--placements", type=int, default=50)
    ap.add_argument("--memory-identities", type=int, default=100_000)
    args = ap.parse_args()
    subprocess.run(["swift", "build", "-c", "release", "--product", "fpctl"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    fpctl = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.strip() + "/fpctl"
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    make_source(WORK / "src", args.placements)
    keys = [f"p{p:02d}" for p in range(args.placements)]
    ids = WORK / "ids.jsonl"
    ids.write_text("".join(json.dumps({"user_id": f"user-{i}", "attributes": {"plan": "free" if i % 2 else "pro"}}) + "\n"
                           for i in range(args.identities)))

    server = subprocess.Popen([fpctl, "serve", str(WORK / "src"), "--port", "0", "--ttl", "300", "--rewrite-asset-urls", "-q"],
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        def stats():
            with urllib.request.urlopen(f"{url}/_admin/stats") as r:
                return json.load(r)

        def reset():
            urllib.request.urlopen(urllib.request.Request(f"{url}/_admin/stats", method="DELETE"))

        reset()
        start = time.perf_counter()
        r = subprocess.run([fpctl, "warm", *keys, "--cache-dir", str(WORK / "cache"), "--api-url", url, "--app-id", "bench",
                            "--identities", str(ids), "--media", "first-screen", "--concurrency", "16", "--format", "csv"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        warm = time.perf_counter() - start
        s = stats()
        rows = r.stdout.count("\n") - 1
        warmed = r.stdout.count(",warmed,")
        routes = s["routes"]

        # Reference: one curl per (identity, placement), 8 at a time.
        pairs = WORK / "pairs.txt"
        with open(pairs, "w") as f:
            for i in range(args.identities):
                body = json.dumps({"user_id": f"user-{i}", "attributes": {"plan": "free" if i % 2 else "pro"}})
                for k in keys:
                    f.write(f"{url}/apps/bench/placements/{k}/resolve\t{body}\n")
        reset()
        start = time.perf_counter()
        subprocess.run(f"tr '\\t' '\\n' < {pairs} | xargs -d '\\n' -n 2 -P 8 sh -c 'curl -s -o /dev/null -X POST -d \"$1\" \"$0\"'",
                       shell=True, check=True)
        ref = time.perf_counter() - start
        ref_requests = stats()["routes"].get("resolve", 0)

        # Memory: a large identity input, 2 placements, no media.
        big = WORK / "big.jsonl"
        big.write_text("".join(f'{{"user_id":"m-{i}","attributes":{{"n":{i}}}}}\n' for i in range(args.memory_identities)))
        mem = subprocess.run(["/usr/bin/time", "-f", "%M %e", fpctl, "warm", "p00", "p01", "--cache-dir", str(WORK / "cache-big"),
                              "--api-url", url, "--app-id", "bench", "--identities", str(big), "--media", "none",
                              "--concurrency", "16", "--format", "csv"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr.strip().splitlines()[-1].split()
    finally:
        server.terminate()
        server.wait()

    distinct_media = args.placements * 2  # first-screen images
    print(f"{args.placements} placements x {args.identities} identities: {rows} rows, {warmed} warmed, exit {r.returncode}")
    print(f"requests  resolve-batch {routes.get('resolve-batch', 0)}, resolve {routes.get('resolve', 0)}, media {routes.get('media', 0)} "
          f"(goal: {args.identities} batch + {distinct_media} first-screen images; fonts: none in these flows)")
    print(f"wall time fpctl warm {warm:.2f}s  xargs -P 8 curl {ref:.2f}s ({ref_requests} requests)  ratio {warm / ref:.3f}x  (goal <= 0.2x)")
    print(f"memory    {args.memory_identities} identities x 2 placements: peak RSS {int(mem[0]) / 1024:.0f} MiB in {mem[1]}s  (goal < 200 MiB)")
    shutil.rmtree(WORK)


if __name__ == "__main__":
    sys.exit(main())
