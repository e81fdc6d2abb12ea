#!/usr/bin/env python3
"""Writes a bundle source of 300 flows whose every byte is fixed: the same on
any machine, any Python 3, any zlib (no random module, no compression; pixel
and word choices come from SHA-256 of a counter). The pinned-bytes test and
the Debian 13 check build it and compare the bundle's SHA-256 with a pinned one.

It has what the sample bundles lack: 300 deflated flows, one of them ~300 KB of hex codes
(its deflate output spans many 64 KiB pieces), 40 stored PNGs and the two
sample fonts.

Usage: make-large-source.py DIR    (DIR is created; it must not exist)
"""
import hashlib
import json
import shutil
import struct
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WORDS = ("trip plan offer save pro month year sync note map seat bag gate sun sea city train "
         "hotel pass club gold plus free try now best deal route fare kids pets view").split()


def stream(label: str):
    """Bytes derived from SHA-256(label, counter): the same everywhere."""
    counter = 0
    while True:
        yield from hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1


def png(label: str, width: int, height: int) -> bytes:
    """A valid RGB PNG; its zlib stream uses stored blocks, written by hand, so
    no compressor's version can change it."""
    source = stream(label)
    raw = b"".join(b"\x00" + bytes(next(source) for _ in range(width * 3)) for _ in range(height))
    blocks = bytearray(b"\x78\x01")
    for start in range(0, len(raw), 65535):
        piece = raw[start:start + 65535]
        final = 1 if start + 65535 >= len(raw) else 0
        blocks += struct.pack("<BHH", final, len(piece), len(piece) ^ 0xFFFF) + piece
    blocks += struct.pack(">I", zlib.adler32(raw))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", bytes(blocks)) + chunk(b"IEND", b"")


def sentence(source, words: int, codes: bool = False) -> str:
    """Words from WORDS, or (with codes) 6-digit hex codes, which deflate far less."""
    if codes:
        return " ".join(f"{next(source):02x}{next(source):02x}{next(source):02x}" for _ in range(words))
    return " ".join(WORDS[next(source) % len(WORDS)] for _ in range(words))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    directory = Path(sys.argv[1])
    (directory / "flows").mkdir(parents=True)
    (directory / "assets").mkdir()
    assets = {}
    images = []
    for i in range(40):
        url = f"https://cdn.example.com/large/img{i:02d}.png"
        (directory / f"assets/img{i:02d}.png").write_bytes(png(f"img{i}", 16 + i, 12 + i % 7))
        assets[url] = f"assets/img{i:02d}.png"
        images.append(url)
    fonts = []
    for name, sample in (("DejaVuSans-Bold", "demo"), ("DejaVuSerif", "travel")):
        shutil.copy(ROOT / f"bundles/{sample}/assets/{name}.ttf", directory / f"assets/{name}.ttf")
        url = f"https://cdn.example.com/large/{name}.ttf"
        assets[url] = f"assets/{name}.ttf"
        digest = hashlib.sha256((directory / f"assets/{name}.ttf").read_bytes()).hexdigest()
        fonts.append({"name": name, "url": url, "sha256": digest})
    placements = {}
    for f in range(300):
        source = stream(f"flow{f}")
        big = f == 7
        screen_count = 100 if big else 3
        words = 400 if big else 12
        screens = [{"id": f"s{s}", "components": [
            {"type": "image", "src": images[(f + s) % len(images)]},
            {"type": "text", "text": sentence(source, words, codes=big), "font": fonts[f % 2]["name"]},
            {"type": "button", "text": "Next", "action": {"type": "navigate", "screen": f"s{(s + 1) % screen_count}"}},
            {"type": "button", "text": "Buy", "action": {"type": "purchase", "product_id": f"pro_{f % 5}"}},
        ]} for s in range(screen_count)]
        flow = {"schema_version": 1, "id": f"flow_{f:03d}", "version": f"ver_{f % 9}", "screens": screens,
                "fonts": [fonts[f % 2]]}
        canonical = json.dumps(flow, sort_keys=True, separators=(",", ":")).encode()
        flow["content_hash"] = "sha256:" + hashlib.sha256(canonical).hexdigest()
        (directory / f"flows/p{f:03d}.json").write_text(json.dumps(flow, indent=2) + "\n")
        placements[f"p{f:03d}"] = f"flows/p{f:03d}.json"
    manifest = {"app_id": "large", "created_at": "2026-11-24T12:00:00Z", "placements": placements, "assets": assets}
    (directory / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
