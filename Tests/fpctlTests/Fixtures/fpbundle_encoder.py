#!/usr/bin/env python3
"""A .fpbundle encoder written from docs/bundle-format.md alone: zlib and struct,
none of fpctl's code.

Usage: fpbundle_encoder.py DIR OUT.fpbundle

DIR holds manifest.json (whose created_at sets every timestamp), manifest.sig
when signed, and the bundle's other files (flows/, media/, fonts/), as
`fpctl bundle extract` leaves them. The test feeds it an extracted bundle and
expects the bytes `fpctl bundle build` wrote.
"""
import datetime
import json
import os
import struct
import sys
import zlib

STORED = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".woff", ".woff2", ".mp4", ".zip")


def entries(root):
    paths = []
    for directory, _, files in os.walk(root):
        for name in files:
            paths.append(os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/"))
    first = [p for p in ("manifest.json", "manifest.sig") if p in paths]
    rest = sorted((p for p in paths if p not in first), key=lambda p: p.encode())
    return first + rest


def dos(created):
    time = created.hour << 11 | created.minute << 5 | created.second // 2
    date = (created.year - 1980) << 9 | created.month << 5 | created.day
    return time, date


def main(root, out):
    manifest = json.load(open(os.path.join(root, "manifest.json"), "rb"))
    created = datetime.datetime.strptime(manifest["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    seconds = int(created.timestamp())
    time, date = dos(created)
    extra = struct.pack("<HHBI", 0x5455, 5, 0x01, seconds & 0xFFFFFFFF)
    extra += struct.pack("<HHBBIBI", 0x7875, 11, 1, 4, 0, 4, 0)
    body, central = bytearray(), bytearray()
    names = entries(root)
    for path in names:
        data = open(os.path.join(root, path), "rb").read()
        name = path.encode()
        stored = path.endswith(STORED)
        method, needed = (0, 10) if stored else (8, 20)
        if stored:
            compressed = data
        else:
            deflater = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
            compressed = deflater.compress(data) + deflater.flush()
        crc = zlib.crc32(data) & 0xFFFFFFFF
        size, csize = len(data), len(compressed)
        offset = len(body)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, needed, 0x0008, method, time, date, 0,
                            size if stored else 0, size, len(name), len(extra)) + name + extra
        body += compressed
        body += struct.pack("<IIII", 0x08074B50, crc, csize, size)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x0300 | needed, needed, 0x0008, method, time,
                               date, crc, csize, size, len(name), len(extra), 0, 0, 0, 0o100644 << 16,
                               offset) + name + extra
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(names), len(names), len(central), len(body), 0)
    with open(out, "wb") as f:
        f.write(body + central + end)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
