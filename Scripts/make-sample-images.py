#!/usr/bin/env python3
"""Writes the small, valid PNG images the sample bundles carry.

Each image is a gradient with a stripe, drawn with zlib only, so the files are
real PNGs (any decoder opens them) yet tiny enough to commit. Run from the
project root; it rewrites bundles/*/assets/*.png deterministically.
"""
import struct
import zlib
from pathlib import Path


def png(width, height, rgb_at):
    rows = b"".join(
        b"\x00" + b"".join(bytes(rgb_at(x, y)) for x in range(width)) for y in range(height)
    )

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def gradient(r, g, b):
    return lambda x, y: ((r + x * 3) % 256, (g + y * 3) % 256, b if (x // 8 + y // 8) % 2 else (b + 80) % 256)


IMAGES = {
    "bundles/demo/assets/logo.png": (32, 32, gradient(20, 40, 200)),
    "bundles/demo/assets/welcome.png": (64, 48, gradient(200, 80, 40)),
    "bundles/demo/assets/step-sync.png": (64, 48, gradient(40, 180, 90)),
    "bundles/demo/assets/step-notify.png": (64, 48, gradient(120, 60, 220)),
    "bundles/demo/assets/paywall-hero.png": (96, 64, gradient(250, 200, 20)),
    "bundles/demo/assets/badge.png": (24, 24, gradient(10, 10, 10)),
    "bundles/travel/assets/map.png": (80, 60, gradient(30, 120, 160)),
    "bundles/travel/assets/plane.png": (48, 48, gradient(220, 220, 240)),
    "bundles/travel/assets/footer-wave.png": (96, 16, gradient(0, 90, 140)),
}

for path, (w, h, f) in IMAGES.items():
    Path(path).write_bytes(png(w, h, f))
    print(path)
