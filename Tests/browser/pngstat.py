#!/usr/bin/env python3
"""What a browser's screenshot shows, for BundlePreviewTests.

    pngstat.py SCREENSHOT.png [IMAGE.png ...]

Prints JSON: the screenshot's width, height and number of distinct colours, and
for each IMAGE (a PNG from the bundle) how many of its pixels have a colour no
other image's and the page's own palette share ("marker" colours), and how many
screenshot pixels have one of them ({"images": {path: [markers_in_image,
found_in_screenshot]}}). A preview that draws an image at its natural size
shows every marker pixel. Only what the standard library has: zlib.
"""
import json
import struct
import sys
import zlib


def decode(path):
    """Returns (width, height, rows of (r, g, b) tuples) for an 8-bit, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, palette = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = [tuple(body[i:i + 3]) for i in range(0, len(body), 3)]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if depth != 8 or interlace:
        raise SystemExit(f"{path}: only 8-bit non-interlaced PNGs")
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        previous = line
        if color == 3:
            rows.append([palette[v] for v in line])
        elif color in (0, 4):
            rows.append([(line[i],) * 3 for i in range(0, stride, channels)])
        else:
            rows.append([tuple(line[i:i + 3]) for i in range(0, stride, channels)])
    return width, height, rows


def main():
    shot_w, shot_h, shot = decode(sys.argv[1])
    counts = {}
    for row in shot:
        for px in row:
            counts[px] = counts.get(px, 0) + 1
    images = {p: decode(p)[2] for p in sys.argv[2:]}
    colours = {p: {px for row in rows for px in row} for p, rows in images.items()}
    result = {}
    for path, rows in images.items():
        others = set().union(*(c for q, c in colours.items() if q != path)) if len(colours) > 1 else set()
        # Colours a page draws itself (white, greys, text, borders) are not markers either.
        markers = {c for c in colours[path] - others if max(c) - min(c) > 24}
        in_image = sum(1 for row in rows for px in row if px in markers)
        result[path] = [in_image, sum(counts.get(c, 0) for c in markers)]
    print(json.dumps({"width": shot_w, "height": shot_h, "distinct": len(counts), "images": result}))


main()
