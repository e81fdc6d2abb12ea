#!/usr/bin/env python3
"""Benchmark: fpctl bundle build and validate against reference tools, same run.

Generates a bundle source of ~300 flows, 600 incompressible images (20-200 KB) and
10 fonts (~75 MB in all), then measures with the release build, median of 5, each command run in turn
with its reference:

  build     fpctl bundle build      vs  bsdtar --format zip -cf      (goal <= 0.15x)
  validate  fpctl bundle validate   vs  bsdtar -xOf | openssl sha256 (goal <= 1.0x)
  both again with --format sarif, in the same turns (the findings formats may
  cost nothing a clean bundle does not: positions are recorded in the one parse)
  memory    peak RSS of validate on this bundle and on one 3x larger (goal < 64 MiB)
  preview   fpctl bundle preview    vs  bsdtar -xOf | base64         (goal < 2 s; the
            page <= 1.4x the bytes of the bundle's media and fonts)

The sources are written before the larger one is generated, so they are older
than FileStamp's racy window when built, as a CI checkout is; a source written
in the last two seconds is hashed a second time while it is written.

Usage: Benchmarks/bundle_bench.py [--runs 5] [--keep] [--dynamic | --fpctl PATH] [--against OTHER]
(run from anywhere). --against OTHER also measures `bundle validate` of the
bundle and of its source (`--source`) by another fpctl (say, main's, before a
change) in the same turns, and prints this one's time as a ratio of that one's.
By default it measures the binary Scripts/install.sh installs: a release build
with the Swift runtime linked in (.build-static), which starts ~4 ms sooner and
validates ~20% faster than the everyday `swift build -c release` one, linked
to the toolchain's shared libraries; --dynamic measures that one instead, and
--fpctl any other.
Needs: bsdtar, openssl, /usr/bin/time (Scripts/install-deps.sh time).
"""
import argparse
import hashlib
import json
import os
import random
import struct
import shutil
import statistics
import subprocess
import zlib
import sys
import time
from pathlib import Path

from release_fpctl import release_fpctl

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "Benchmarks" / "work"


def png(idat: bytes) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def make_source(directory: Path, flows: int, images: int, fonts: int, seed: int):
    rng = random.Random(seed)
    if directory.exists():
        shutil.rmtree(directory)
    (directory / "flows").mkdir(parents=True)
    (directory / "assets").mkdir()
    assets = {}
    image_urls = []
    for i in range(images):
        url = f"https://cdn.example.com/bench/img{i:04d}.png"
        path = f"assets/img{i:04d}.png"
        # A whole PNG (media are checked to be what their name says, and whole) whose
        # IDAT is incompressible bytes, as compressed image data is.
        (directory / path).write_bytes(png(os.urandom(rng.randint(20_000, 200_000))))
        assets[url] = path
        image_urls.append(url)
    font_refs = []
    for i in range(fonts):
        url = f"https://cdn.example.com/bench/font{i}.ttf"
        path = f"assets/font{i}.ttf"
        # Fonts deflate (not in the stored list): make them compress like real ones, about 2:1.
        chunk = os.urandom(1024)
        body = b"".join(chunk if j % 2 else os.urandom(1024) for j in range(200))
        # A TrueType table directory with one table, the body, which lies within the file.
        data = b"\x00\x01\x00\x00" + struct.pack(">HHHH", 1, 16, 0, 0) + b"glyf" + struct.pack(">III", 0, 28, len(body))
        data += body
        (directory / path).write_bytes(data)
        assets[url] = path
        font_refs.append({"name": f"Font{i}", "url": url, "sha256": hashlib.sha256(data).hexdigest()})
    placements = {}
    per_flow = max(1, images // flows)
    for f in range(flows):
        mine = image_urls[f * per_flow:(f + 1) * per_flow]
        font = font_refs[f % fonts]
        screens = [{"id": f"s{s}", "components": [
            {"type": "image", "src": mine[s % len(mine)]},
            {"type": "text", "text": f"Screen {s} of flow {f}", "font": font["name"]},
            {"type": "button", "text": "Next", "action": {"type": "navigate", "screen": f"s{(s + 1) % 3}"}},
            {"type": "button", "text": "Buy", "action": {"type": "purchase", "product_id": "pro"}},
        ]} for s in range(3)]
        screens[0]["components"] += [{"type": "image", "src": u} for u in mine]
        flow = {"schema_version": 1, "id": f"flow_{f}", "version": "ver_1", "screens": screens, "fonts": [font]}
        canonical = json.dumps(flow, sort_keys=True, separators=(",", ":")).encode()
        flow["content_hash"] = "sha256:" + hashlib.sha256(canonical).hexdigest()
        (directory / f"flows/p{f:03d}.json").write_text(json.dumps(flow, indent=2))
        placements[f"p{f:03d}"] = f"flows/p{f:03d}.json"
    (directory / "bundle.json").write_text(json.dumps({"app_id": "bench", "placements": placements, "assets": assets}))
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def timed(cmd, shell=False):
    start = time.perf_counter()
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def paired_medians(runs, *commands):
    """Median seconds of each command, run in turns (a, b, c, a, b, c, ...) so
    that a slow spell of the machine falls on all. Each is (cmd, shell, before)."""
    samples = tuple([] for _ in commands)
    for _ in range(runs):
        for (cmd, shell, before), out in zip(commands, samples):
            if before:
                before()
            out.append(timed(cmd, shell))
    return tuple(statistics.median(s) for s in samples)


def peak_rss_mib(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr.strip().splitlines()[-1]
    return int(out) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fpctl", help="the fpctl binary to measure (default: the static release build of this tree)")
    ap.add_argument("--dynamic", action="store_true", help="measure `swift build -c release`'s binary instead")
    ap.add_argument("--against", help="another fpctl whose validate (bundle and --source) is measured in the same turns")
    args = ap.parse_args()

    fpctl = release_fpctl(args.fpctl, static=not args.dynamic)
    WORK.mkdir(parents=True, exist_ok=True)
    src, big_src = WORK / "source", WORK / "source-3x"
    size = make_source(src, flows=300, images=600, fonts=10, seed=1)
    big_size = make_source(big_src, flows=300, images=1800, fonts=10, seed=2)
    bundle, ref_zip, big_bundle = WORK / "bench.fpbundle", WORK / "ref.zip", WORK / "big.fpbundle"

    def clear(*paths):
        return lambda: [p.unlink() for p in paths if p.exists()]

    # Both builds start with no output file: removing the previous 67 MB one
    # (which --overwrite would do inside the timed run) is not part of either.
    build, ref_build, build_sarif = paired_medians(
        args.runs,
        ([fpctl, "bundle", "build", str(src), "-o", str(bundle)], False, clear(bundle)),
        (["bsdtar", "--format", "zip", "-cf", str(ref_zip), "-C", str(src), "."], False, clear(ref_zip)),
        ([fpctl, "bundle", "build", str(src), "-o", str(bundle), "--format", "sarif"], False, clear(bundle)))
    validate, ref_validate, validate_sarif = paired_medians(
        args.runs,
        ([fpctl, "bundle", "validate", str(bundle)], False, None),
        (f"bsdtar -xOf {bundle} | openssl dgst -sha256", True, None),
        ([fpctl, "bundle", "validate", str(bundle), "--format", "sarif"], False, None))
    against = None
    if args.against:
        against = paired_medians(
            args.runs,
            ([fpctl, "bundle", "validate", str(bundle)], False, None),
            ([args.against, "bundle", "validate", str(bundle)], False, None),
            ([fpctl, "bundle", "validate", "--source", str(src)], False, None),
            ([args.against, "bundle", "validate", "--source", str(src)], False, None))
    page = WORK / "preview.html"
    preview, ref_preview = paired_medians(
        args.runs,
        ([fpctl, "bundle", "preview", str(bundle), "-o", str(page), "--overwrite"], False, None),
        (f"bsdtar -xOf {bundle} | base64 > /dev/null", True, None))
    kinds = json.loads(subprocess.run([fpctl, "bundle", "inspect", str(bundle), "--format", "json"], check=True,
                                      capture_output=True, text=True).stdout)["kinds"]
    assets = sum(kinds.get(k, {}).get("bytes", 0) for k in ("media", "fonts"))
    subprocess.run([fpctl, "bundle", "build", str(big_src), "-o", str(big_bundle), "--overwrite"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rss = peak_rss_mib([fpctl, "bundle", "validate", str(bundle)])
    big_rss = peak_rss_mib([fpctl, "bundle", "validate", str(big_bundle)])

    mb = lambda n: f"{n / 1e6:.1f} MB"
    print(f"fpctl: {fpctl}")
    print(f"source: {mb(size)} ({mb(bundle.stat().st_size)} bundle); large source: {mb(big_size)}; median of {args.runs}")
    print(f"build     fpctl {build:.3f}s  bsdtar zip {ref_build:.3f}s  ratio {build / ref_build:.3f}x  (goal <= 0.15x)")
    print(f"  sarif   fpctl {build_sarif:.3f}s  ratio {build_sarif / ref_build:.3f}x  (goal <= 0.15x)")
    print(f"validate  fpctl {validate:.3f}s  bsdtar|openssl {ref_validate:.3f}s  ratio {validate / ref_validate:.3f}x  (goal <= 1.0x)")
    print(f"  sarif   fpctl {validate_sarif:.3f}s  ratio {validate_sarif / ref_validate:.3f}x  (goal <= 1.0x)")
    print(f"memory    validate peak RSS {rss:.1f} MiB ({mb(bundle.stat().st_size)}), {big_rss:.1f} MiB "
          f"({mb(big_bundle.stat().st_size)})  (goal < 64 MiB)")
    print(f"preview   fpctl {preview:.3f}s (goal < 2 s)  bsdtar|base64 {ref_preview:.3f}s  ratio "
          f"{preview / ref_preview:.3f}x; page {mb(page.stat().st_size)} = {page.stat().st_size / assets:.3f}x "
          f"the {mb(assets)} of media and fonts (goal <= 1.4x)")
    if against:
        bundle_this, bundle_other, source_this, source_other = against
        print(f"against   {args.against}")
        print(f"  bundle  this {bundle_this:.3f}s  other {bundle_other:.3f}s  ratio {bundle_this / bundle_other:.3f}x")
        print(f"  source  this {source_this:.3f}s  other {source_other:.3f}s  ratio {source_this / source_other:.3f}x")
    if not args.keep:
        shutil.rmtree(WORK)


if __name__ == "__main__":
    sys.exit(main())
