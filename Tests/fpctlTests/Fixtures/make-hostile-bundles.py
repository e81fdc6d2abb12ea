#!/usr/bin/env python3
"""Writes malformed and malicious .fpbundle files for the validator tests.

Usage: make-hostile-bundles.py BASE.fpbundle OUTDIR

BASE is a valid bundle built by fpctl (the demo sample). Every file written to
OUTDIR breaks exactly one thing, named by the rule id `fpctl bundle validate` must
report; OUTDIR/expected.json maps each file name to that rule. The zips are made
with Python's zipfile (an implementation independent of libarchive) and, where a
zip writer would refuse, by patching bytes afterwards.
"""
import hashlib
import io
import json
import os
import random
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib

base_path, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
expected = {}

with zipfile.ZipFile(base_path) as z:
    BASE = [(i.filename, z.read(i.filename)) for i in z.infolist()]
BASE_MAP = dict(BASE)
MANIFEST = json.loads(BASE_MAP["manifest.json"])
ONBOARDING = json.loads(BASE_MAP["flows/onboarding.json"])


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def rehash(flow):
    flow = dict(flow)
    flow.pop("content_hash", None)
    flow["content_hash"] = "sha256:" + hashlib.sha256(canonical(flow)).hexdigest()
    return flow


def manifest_for(entries, manifest=None):
    m = json.loads(json.dumps(manifest or MANIFEST))
    m["files"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                  for n, d in entries if n not in ("manifest.json", "manifest.sig")}
    return json.dumps(m, indent=2, sort_keys=True).encode() + b"\n"


def with_manifest(entries, manifest=None):
    """Entries with a manifest.json first that agrees with them."""
    body = [(n, d) for n, d in entries if n != "manifest.json"]
    return [("manifest.json", manifest_for(body, manifest))] + body


def write_zip(name, entries, rule, mode=0o100644, system=3, method=zipfile.ZIP_DEFLATED, per_entry=None, comment=b""):
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w") as z:
        z.comment = comment
        for n, d in entries:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = system
            info.external_attr = mode << 16
            info.compress_type = method
            if per_entry and n in per_entry:
                for k, v in per_entry[n].items():
                    setattr(info, k, v)
            z.writestr(info, d)
    expected[name] = rule
    return path


def patch(name, source, rule, edit):
    data = bytearray(open(source, "rb").read())
    edit(data)
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    expected[name] = rule


def raw(name, data, rule):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    expected[name] = rule


def replace(entries, name, data):
    return [(n, data if n == name else d) for n, d in entries]


# --- paths and entry types -------------------------------------------------
write_zip("path-traversal.fpbundle", with_manifest(BASE + [("../escape.txt", b"x")]), "zip-path-traversal")
write_zip("path-traversal-nested.fpbundle", with_manifest(BASE + [("media/../../escape.txt", b"x")]), "zip-path-traversal")
write_zip("path-absolute.fpbundle", with_manifest(BASE + [("/etc/cron.d/evil", b"x")]), "zip-path-absolute")
write_zip("path-backslash.fpbundle", with_manifest(BASE + [("media\\..\\evil.png", b"x")]), "zip-path-backslash")
write_zip("path-uppercase.fpbundle", with_manifest(BASE + [("media/Evil.png", b"x")]), "zip-path-noncanonical")
write_zip("path-unicode.fpbundle", with_manifest(BASE + [("media/\u00e9vil.png", b"x")]), "zip-path-noncanonical")
write_zip("path-dot-component.fpbundle", with_manifest(BASE + [("media/./evil.png", b"x")]), "zip-path-noncanonical")
write_zip("symlink.fpbundle", with_manifest(BASE + [("media/link.png", b"/etc/passwd")]), "zip-entry-type",
          per_entry={"media/link.png": {"external_attr": 0o120777 << 16}})
write_zip("device.fpbundle", with_manifest(BASE + [("media/dev.png", b"")]), "zip-entry-type",
          per_entry={"media/dev.png": {"external_attr": 0o020644 << 16}})
write_zip("fifo.fpbundle", with_manifest(BASE + [("media/fifo.png", b"")]), "zip-entry-type",
          per_entry={"media/fifo.png": {"external_attr": 0o010644 << 16}})
write_zip("directory.fpbundle", with_manifest(BASE + [("media/sub/", b"")]), "zip-entry-type",
          per_entry={"media/sub/": {"external_attr": 0o040755 << 16}})
write_zip("mode-executable.fpbundle", with_manifest(BASE), "zip-entry-mode", mode=0o100755)
write_zip("mode-no-unix.fpbundle", with_manifest(BASE), "zip-entry-mode", system=0)
dup = with_manifest(BASE)
write_zip("duplicate-path.fpbundle", dup + [dup[1]], "zip-duplicate-path")
write_zip("case-collision.fpbundle", with_manifest(BASE + [("flows/PAYWALL.json", BASE_MAP["flows/paywall.json"])]),
          "zip-case-collision")
write_zip("prefix-conflict.fpbundle", with_manifest(BASE + [("media", b"x"), ("media/x/y.png", b"y")]), "zip-prefix-conflict")
unsorted = with_manifest(BASE)
write_zip("unsorted.fpbundle", [unsorted[0]] + list(reversed(unsorted[1:])), "zip-order")

# A tar with a hard link (zip has none): not a bundle at all.
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("manifest.json"); data = BASE_MAP["manifest.json"]; info.size = len(data)
    t.addfile(info, io.BytesIO(data))
    link = tarfile.TarInfo("flows/onboarding.json"); link.type = tarfile.LNKTYPE; link.linkname = "manifest.json"
    t.addfile(link)
raw("hardlink-tar.fpbundle", buf.getvalue(), "not-zip")

# --- structure: headers, layout, encryption ---------------------------------
good = write_zip("_good.fpbundle", with_manifest(BASE), None)
del expected["_good.fpbundle"]
good_bytes = open(good, "rb").read()
second_local = good_bytes.find(b"PK\x03\x04", 4)
cd_start = good_bytes.find(b"PK\x01\x02")
second_central = good_bytes.find(b"PK\x01\x02", cd_start + 4)


def set16(data, at, value): data[at:at + 2] = struct.pack("<H", value)
def set32(data, at, value): data[at:at + 4] = struct.pack("<I", value)


patch("local-name-mismatch.fpbundle", good, "zip-local-header-mismatch", lambda d: d.__setitem__(second_local + 30, ord("g")))
patch("local-size-mismatch.fpbundle", good, "zip-local-header-mismatch",
      lambda d: set32(d, second_local + 22, struct.unpack_from("<I", d, second_local + 22)[0] + 1))
patch("local-crc-mismatch.fpbundle", good, "zip-local-header-mismatch",
      lambda d: set32(d, second_local + 14, struct.unpack_from("<I", d, second_local + 14)[0] ^ 1))
patch("shared-local-header.fpbundle", good, "zip-overlap", lambda d: set32(d, second_central + 42, 0))


def encrypt(d):
    set16(d, 6, struct.unpack_from("<H", d, 6)[0] | 1)
    set16(d, cd_start + 8, struct.unpack_from("<H", d, cd_start + 8)[0] | 1)


patch("encrypted.fpbundle", good, "zip-encrypted", encrypt)
patch("method-unknown.fpbundle", good, "zip-method", lambda d: (set16(d, 8, 14), set16(d, cd_start + 10, 14)))
for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
    cut = int(len(good_bytes) * fraction)
    raw(f"truncated-{int(fraction * 100)}.fpbundle", good_bytes[:cut], "zip-truncated")
raw("truncated-last-byte.fpbundle", good_bytes[:-1], "zip-truncated")
raw("truncated-in-directory.fpbundle", good_bytes[:cd_start + 10], "zip-truncated")
raw("trailing-bytes.fpbundle", good_bytes + b"\x00hidden payload", "zip-trailing-bytes")
gap = bytearray(good_bytes[:second_local]) + b"HIDDEN" + good_bytes[second_local:]
# Shift every central-directory offset after the insertion so only the gap is wrong.
cd = gap.find(b"PK\x01\x02")
p = cd
while gap[p:p + 4] == b"PK\x01\x02":
    off = struct.unpack_from("<I", gap, p + 42)[0]
    if off >= second_local:
        set32(gap, p + 42, off + 6)
    p += 46 + sum(struct.unpack_from("<HHH", gap, p + 28))
set32(gap, p + 16, struct.unpack_from("<I", gap, p + 16)[0] + 6)
raw("hidden-gap.fpbundle", bytes(gap), "zip-gap")
write_zip("comment.fpbundle", with_manifest(BASE), "zip-comment", comment=b"hello")

# --- limits: bombs and counts -------------------------------------------------
def deflate_zeros(total, chunk=1 << 20):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = []
    block = bytes(chunk)
    for _ in range(total // chunk):
        parts.append(c.compress(block))
    parts.append(c.flush())
    return b"".join(parts)


def raw_entry_zip(name, entries_raw, rule):
    """entries_raw: (name, compressed bytes, crc, declared usize, method)."""
    body = bytearray()
    central = bytearray()
    for n, comp, crc, usize, method in entries_raw:
        nb = n.encode()
        offset = len(body)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(comp), usize, len(nb), 0) + nb + comp
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x0314, 20, 0, method, 0, 0x21, crc, len(comp), usize,
                               len(nb), 0, 0, 0, 0, 0o100644 << 16, offset) + nb
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries_raw), len(entries_raw), len(central), len(body), 0)
    raw(name, bytes(body + central + end), rule)


GIB = 1 << 30
bomb = deflate_zeros(GIB)
bomb_crc = 0
zero_mib = bytes(1 << 20)
for _ in range(1024):
    bomb_crc = zlib.crc32(zero_mib, bomb_crc)
stored_manifest = [(n, d, zlib.crc32(d), len(d), 0) for n, d in with_manifest(BASE)[:1]]
bomb_name = "media/" + "0" * 64 + ".bin"
raw_entry_zip("bomb-1gib.fpbundle", stored_manifest + [(bomb_name, bomb, bomb_crc, GIB - 1, 8)], "limit-entry-size")
raw_entry_zip("bomb-lying-size.fpbundle", stored_manifest + [(bomb_name, bomb, bomb_crc, 4096, 8)], "zip-size-mismatch")
ten_mib = deflate_zeros(10 << 20)
raw_entry_zip("bomb-ratio.fpbundle", stored_manifest + [(bomb_name, ten_mib, zlib.crc32(bytes(10 << 20)), 10 << 20, 8)],
              "limit-compression-ratio")
many = [(f"media/{i:05d}.txt", b"") for i in range(10_001)]
write_zip("too-many-entries.fpbundle", with_manifest(BASE + many), "limit-entries", method=zipfile.ZIP_STORED)

# --- manifest -----------------------------------------------------------------
write_zip("manifest-missing.fpbundle", [e for e in BASE if e[0] != "manifest.json"], "manifest-missing")
moved = with_manifest(BASE)
write_zip("manifest-not-first.fpbundle", moved[1:2] + moved[:1] + moved[2:], "manifest-order")
write_zip("manifest-not-json.fpbundle", [("manifest.json", b"{not json")] + BASE[1:], "manifest-json")
write_zip("manifest-unlisted-file.fpbundle", with_manifest(BASE) + [("zz-extra.txt", b"surprise")], "manifest-unlisted-file")
m = json.loads(manifest_for(BASE[1:]))
m["files"]["media/" + "f" * 64 + ".png"] = {"size": 1, "sha256": "f" * 64}
write_zip("manifest-missing-file.fpbundle", [("manifest.json", json.dumps(m).encode())] + BASE[1:], "manifest-missing-file")
m = json.loads(manifest_for(BASE[1:]))
m["files"]["flows/paywall.json"]["size"] += 1
write_zip("manifest-size-mismatch.fpbundle", [("manifest.json", json.dumps(m).encode())] + BASE[1:], "manifest-size-mismatch")
m = json.loads(manifest_for(BASE[1:]))
m["files"]["flows/paywall.json"]["sha256"] = "0" * 64
write_zip("manifest-hash-mismatch.fpbundle", [("manifest.json", json.dumps(m).encode())] + BASE[1:], "manifest-hash-mismatch")
m = dict(MANIFEST); m["format_version"] = 2
write_zip("manifest-format-version.fpbundle", with_manifest(BASE, m), "manifest-format-version")

# --- flows ----------------------------------------------------------------------
write_zip("flow-invalid-json.fpbundle", with_manifest(replace(BASE, "flows/onboarding.json", b'{"schema_version": 1,')),
          "flow-json")
flow = json.loads(json.dumps(ONBOARDING))
flow["screens"][0]["components"][3]["action"]["screen"] = "nowhere"
write_zip("flow-dangling-navigate.fpbundle", with_manifest(replace(BASE, "flows/onboarding.json", json.dumps(rehash(flow)).encode())),
          "flow-navigate")
flow = json.loads(json.dumps(ONBOARDING))
flow["screens"][1]["components"].append({"type": "image", "src": "https://cdn.example.com/demo/not-bundled.png"})
write_zip("flow-missing-image.fpbundle", with_manifest(replace(BASE, "flows/onboarding.json", json.dumps(rehash(flow)).encode())),
          "bundle-missing-media")
m = json.loads(json.dumps(MANIFEST)); font_path = m["fonts"].pop("DejaVuSans-Bold")
write_zip("flow-missing-font.fpbundle", with_manifest([e for e in BASE if e[0] != font_path], m), "bundle-missing-font")
flow = json.loads(json.dumps(ONBOARDING)); flow["content_hash"] = "sha256:" + "0" * 64
write_zip("flow-wrong-content-hash.fpbundle", with_manifest(replace(BASE, "flows/onboarding.json", json.dumps(flow).encode())),
          "flow-content-hash")
flow = json.loads(json.dumps(ONBOARDING)); flow["schema_version"] = 7
write_zip("flow-schema-version.fpbundle", with_manifest(replace(BASE, "flows/onboarding.json", json.dumps(rehash(flow)).encode())),
          "flow-schema-version")

# --- not zip at all -------------------------------------------------------------
raw("empty.fpbundle", b"", "not-zip")
rng = random.Random(7)
raw("random-bytes.fpbundle", bytes(rng.getrandbits(8) for _ in range(4096)), "not-zip")
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("manifest.json"); data = BASE_MAP["manifest.json"]; info.size = len(data)
    t.addfile(info, io.BytesIO(data))
raw("tar.fpbundle", buf.getvalue(), "not-zip")
import gzip
raw("gzip.fpbundle", gzip.compress(good_bytes, mtime=0), "not-zip")
seven = os.path.join(out, "7z.fpbundle")
subprocess.run(["bsdtar", "--format", "7zip", "-cf", seven, "-C", os.path.dirname(os.path.abspath(base_path)),
                os.path.basename(base_path)], check=True)
expected["7z.fpbundle"] = "not-zip"

# --- content that is not what its name says --------------------------------
png = next(n for n, _ in BASE if n.startswith("media/") and n.endswith(".png"))
write_zip("media-not-an-image.fpbundle", with_manifest(replace(BASE, png, b"root:x:0:0:root:/root:/bin/bash\n")),
          "media-type-mismatch")
ttf = next(n for n, _ in BASE if n.startswith("fonts/") and n.endswith(".ttf"))
write_zip("font-is-a-png.fpbundle", with_manifest(replace(BASE, ttf, BASE_MAP[png])), "media-type-mismatch")
# --- media that start right and are not whole (media-corrupt) --------------
whole = BASE_MAP[png]
write_zip("png-cut-to-a-third.fpbundle", with_manifest(replace(BASE, png, whole[: len(whole) // 3])), "media-corrupt")
flipped = bytearray(whole)
flipped[len(whole) // 2] ^= 0x01
write_zip("png-bad-crc.fpbundle", with_manifest(replace(BASE, png, bytes(flipped))), "media-corrupt")
write_zip("font-cut-short.fpbundle", with_manifest(replace(BASE, ttf, BASE_MAP[ttf][:4096])), "media-corrupt")

# --- found by the bundle fuzzer (Fuzz/Regressions/bundle) -------------------
# A byte of a stored image changed in transit: the CRC-32 in both headers no
# longer matches the data. libarchive reports that as a warning, which used to
# pass; the manifest's hash also catches it, but the CRC is the zip's own check.
with open(base_path, "rb") as f:
    canonical_bytes = bytearray(f.read())
with zipfile.ZipFile(base_path) as z:
    stored = next(i for i in z.infolist() if i.compress_type == zipfile.ZIP_STORED and i.file_size > 16)
    name_len, extra_len = struct.unpack("<HH", canonical_bytes[stored.header_offset + 26:stored.header_offset + 30])
    data_at = stored.header_offset + 30 + name_len + extra_len
canonical_bytes[data_at + stored.file_size // 2] ^= 0x01
raw("crc-mismatch.fpbundle", bytes(canonical_bytes), "zip-corrupt")
# The same for a deflated entry (the CRC is of the inflated bytes): its data
# descriptor and central record agree on a CRC-32 that is not the data's.
with open(base_path, "rb") as f:
    deflated_bytes = bytearray(f.read())
with zipfile.ZipFile(base_path) as z:
    flow = next(i for i in z.infolist() if i.filename.startswith("flows/") and i.compress_type == zipfile.ZIP_DEFLATED)
    name_len, extra_len = struct.unpack("<HH", deflated_bytes[flow.header_offset + 26:flow.header_offset + 30])
    descriptor_at = flow.header_offset + 30 + name_len + extra_len + flow.compress_size
    assert struct.unpack("<I", deflated_bytes[descriptor_at:descriptor_at + 4])[0] == 0x08074B50
    wrong_crc = struct.pack("<I", flow.CRC ^ 0x00010000)
    deflated_bytes[descriptor_at + 4:descriptor_at + 8] = wrong_crc
    central_at = struct.unpack("<I", deflated_bytes[-6:-2])[0]
    while True:
        n, m, k = struct.unpack("<HHH", deflated_bytes[central_at + 28:central_at + 34])
        if deflated_bytes[central_at + 46:central_at + 46 + n].decode() == flow.filename:
            deflated_bytes[central_at + 16:central_at + 20] = wrong_crc
            break
        central_at += 46 + n + m + k
raw("crc-mismatch-deflated.fpbundle", bytes(deflated_bytes), "zip-corrupt")
# created_at past 2107 cannot be a zip timestamp: validate trapped computing one.
m = json.loads(json.dumps(MANIFEST)); m["created_at"] = "2226-01-01T00:00:00Z"
write_zip("created-after-2107.fpbundle", with_manifest(BASE, m), "manifest-field")

os.remove(good)
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=2, sort_keys=True)
print(len(expected), "hostile bundles in", out)
