#!/usr/bin/env python3
"""Fuzz/make-media-seeds.py OUT PNG: the seeds of the media target (run by
make-seeds.sh). Each is a type byte (MediaType.allCases order: png jpeg gif webp
mp4 ttf otf woff woff2), a chunk-size byte, then a small whole file."""
import struct
import sys

out, png = sys.argv[1], open(sys.argv[2], "rb").read()


def seg(marker, body):
    return b"\xff" + bytes([marker]) + struct.pack(">H", len(body) + 2) + body


jpeg = b"\xff\xd8" + seg(0xE0, b"JFIF\0\1\1\0\0\1\0\1\0\0") + seg(0xC0, bytes([8, 0, 1, 0, 1, 1, 1, 0x11, 0]))
jpeg += seg(0xDA, bytes([1, 1, 0, 0, 63, 0])) + b"\x12\xff\x00\x34\xff\xd0\x56\xff\xd9"
gif = b"GIF89a\1\0\1\0\x80\0\0" + bytes(3) + b"\xff" * 3 + b"\x21\xf9\4\0\0\0\0\0"
gif += b"\x2c" + bytes(4) + b"\1\0\1\0\0" + b"\2\2\x44\x01\0\x3b"
vp8l = b"VP8L" + struct.pack("<I", 14) + bytes([0x2F, 0, 0, 0, 0x10, 7, 0x10, 0x11, 0x11, 0x88, 0x88, 0xFE, 7, 0])
webp = b"RIFF" + struct.pack("<I", 4 + len(vp8l)) + b"WEBP" + vp8l
mp4 = struct.pack(">I", 16) + b"ftypisom" + struct.pack(">I", 0x200) + struct.pack(">I", 12) + b"free\1\2\3\4"
table = b"\7" * 12
ttf = b"\0\1\0\0" + struct.pack(">HHHH", 1, 16, 0, 0) + b"head" + struct.pack(">III", 0, 28, len(table)) + table
woff = b"wOFF\0\1\0\0" + struct.pack(">IHH", 44 + 20 + 12, 1, 0) + struct.pack(">I", 200) + b"\0\1\0\0" + bytes(20)
woff += b"head" + struct.pack(">IIII", 64, 12, 12, 0) + table
woff2 = b"wOF2\0\1\0\0" + struct.pack(">IHH", 48, 1, 0) + bytes(36)
files = [("png", png), ("jpeg", jpeg), ("gif", gif), ("webp", webp), ("mp4", mp4), ("ttf", ttf),
         ("otf", b"OTTO" + ttf[4:]), ("woff", woff), ("woff2", woff2)]
for i, (name, data) in enumerate(files):
    with open(f"{out}/{name}", "wb") as f:
        f.write(bytes([i, 63]) + data)
