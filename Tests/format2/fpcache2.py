"""A reader of cache format 2 written from docs/cache-format.md ("Format 2")
alone, not from fpctl's code: the campaigns (faults, power cuts, many
writers) check what fpctl wrote with it, and `--self-test` (run by
Tests/fpctlTests/CacheFormatReaderTests.swift) checks it against a cache
fpctl wrote.

Usage as a program: fpcache2.py CACHE        one line per newest entry, and problems
"""
import hashlib
import json
import os
import struct
import sys
import time
import zlib
from pathlib import Path

SEGMENT_MAGIC = b"FPSEG\x002\n"
INDEX_MAGIC = b"FPIDX\x002\n"
TIERS = {0: "cache", 1: "network", 2: "stale_cache", 3: "bundled_default"}
MISSING_OBJECT = "0" * 64


class Torn(Exception):
    pass


def _string(body: bytes, at: int):
    length, shift = 0, 0
    while True:
        if at >= len(body) or shift > 28:
            raise ValueError("string length runs past the body")
        byte = body[at]
        at += 1
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    if at + length > len(body):
        raise ValueError("string runs past the body")
    return body[at:at + length].decode("utf-8"), at + length


def parse_body(body: bytes) -> dict:
    kind, tier = body[0], body[1]
    if kind not in (1, 2) or tier not in TIERS:
        raise ValueError("unknown kind or tier")
    resolved, unique, ttl = struct.unpack_from("<qQI", body, 2)
    at = 22
    record = {"kind": "entry" if kind == 1 else "alias", "tier": TIERS[tier], "resolved_at_ms": resolved,
              "unique": unique, "ttl_seconds": ttl, "fingerprint": body[at:at + 32].hex()}
    at += 32
    if kind == 1:
        record["flow_sha256"] = body[at:at + 32].hex()
        (record["flow_size"],) = struct.unpack_from("<I", body, at + 32)
        at += 36
        form = body[at]
        at += 1
        if form == 0:
            record["content_hash"] = None
        elif form == 1:
            record["content_hash"] = "sha256:" + body[at:at + 32].hex()
            at += 32
        elif form == 2:
            record["content_hash"], at = _string(body, at)
        else:
            raise ValueError("unknown content hash form")
    record["placement"], at = _string(body, at)
    record["user_id"], at = _string(body, at)
    if kind == 1:
        record["flow_id"], at = _string(body, at)
        record["version"], at = _string(body, at)
    if at != len(body):
        raise ValueError("the body is longer than its fields")
    return record


def records_in(data: bytes):
    """Every whole record of a segment's bytes, and the problem that ended the read (None at the end)."""
    if data[:8] != SEGMENT_MAGIC:
        return [], "no segment header" if data else None
    found, at = [], 8
    while at < len(data):
        if len(data) - at < 8:
            return found, f"torn record at {at}"
        length, crc = struct.unpack_from("<II", data, at)
        if length < 56 or length > 1 << 20:
            return found, f"record length {length} at {at}"
        body = data[at + 8:at + 8 + length]
        if len(body) < length:
            return found, f"torn record at {at}"
        if zlib.crc32(body) != crc:
            return found, f"CRC mismatch at {at}"
        try:
            record = parse_body(body)
        except (ValueError, UnicodeDecodeError, struct.error) as e:
            return found, f"unparsable record at {at}: {e}"
        record["offset"] = at
        found.append(record)
        at += 8 + length
    return found, None


def check_index(data: bytes):
    """The segment length an index covers, or None when it is not whole."""
    if len(data) < 8 + 8 + 4 + 1024 + 4 or data[:8] != INDEX_MAGIC:
        return None
    covered, count = struct.unpack_from("<QI", data, 8)
    if len(data) != 20 + 1024 + 12 * count + 4:
        return None
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    return covered if zlib.crc32(data[:-4]) == crc else None


def key(kind: str, placement: str, fingerprint: str = "") -> bytes:
    h = hashlib.sha256()
    if kind == "entry":
        h.update(b"\x01" + placement.encode() + b"\x00" + fingerprint.encode())
    else:
        h.update(b"\x02" + placement.encode())
    return h.digest()[:8]


def segments(cache: Path):
    log = Path(cache) / "log"
    if not log.is_dir():
        return []
    return sorted(p for p in log.iterdir() if p.name.endswith(".seg") and not p.name.startswith("."))


def read(cache: Path):
    """(every record of every segment with its segment's name, problems)."""
    records, problems = [], []
    for seg in segments(cache):
        found, problem = records_in(seg.read_bytes())
        for r in found:
            r["segment"] = seg.name
        records += found
        if problem:
            problems.append(f"{seg.name}: {problem}")
        index = seg.with_name(seg.name + ".idx")
        if index.exists():
            covered = check_index(index.read_bytes())
            if covered is None:
                problems.append(f"{index.name}: index not whole")
            elif covered > seg.stat().st_size:
                problems.append(f"{index.name}: covers {covered} bytes of a {seg.stat().st_size}-byte segment")
    return records, problems


SKEW_MS = 60_000


def wins(a: dict, b: dict, now_ms: int) -> bool:
    """Whether a reader takes record a over b: the newer, but a record from the future
    (more than the 60 s clock skew ahead of now) loses to any that is not."""
    a_future, b_future = a["resolved_at_ms"] > now_ms + SKEW_MS, b["resolved_at_ms"] > now_ms + SKEW_MS
    if a_future != b_future:
        return b_future
    return (a["resolved_at_ms"], a["unique"]) > (b["resolved_at_ms"], b["unique"])


def newest(records, now_ms=None):
    """The newest entry of each (placement, fingerprint) and alias of each placement."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    entries, aliases = {}, {}
    for r in records:
        table, k = (entries, (r["placement"], r["fingerprint"])) if r["kind"] == "entry" else (aliases, r["placement"])
        if k not in table or wins(r, table[k], now_ms):
            table[k] = r
    return entries, aliases


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_entry(cache: Path, record: dict):
    """An entry as the SDK would read it; None when sound."""
    if record["flow_sha256"] == MISSING_OBJECT:
        return "carried over unreadable by a migration"
    path = Path(cache) / "objects" / record["flow_sha256"]
    try:
        data = path.read_bytes()
    except OSError as e:
        return f"object unreadable: {e}"
    if hashlib.sha256(data).hexdigest() != record["flow_sha256"]:
        return "object does not hash to its name"
    if len(data) != record["flow_size"]:
        return "object size differs from the record's"
    flow = json.loads(data)
    if canonical(flow) != data:
        return "object is not canonical JSON"
    if flow.get("id") != record["flow_id"] or flow.get("version") != record["version"]:
        return "flow id or version differs from the record's"
    if record["content_hash"] is not None:
        body = {k: v for k, v in flow.items() if k != "content_hash"}
        if flow.get("content_hash") != record["content_hash"] or \
                record["content_hash"] != "sha256:" + hashlib.sha256(canonical(body)).hexdigest():
            return "content_hash does not match the flow"
    return None


def main():
    cache = Path(sys.argv[1])
    records, problems = read(cache)
    entries, aliases = newest(records)
    for (placement, fingerprint), r in sorted(entries.items()):
        print(json.dumps({"placement": placement, "fingerprint": fingerprint, "user_id": r["user_id"],
                          "flow_id": r["flow_id"], "version": r["version"], "ttl_seconds": r["ttl_seconds"],
                          "resolved_at_ms": r["resolved_at_ms"], "tier": r["tier"],
                          "problem": check_entry(cache, r)}, ensure_ascii=False))
    for placement, r in sorted(aliases.items()):
        print(json.dumps({"alias": placement, "fingerprint": r["fingerprint"], "user_id": r["user_id"]},
                         ensure_ascii=False))
    for p in problems:
        print(json.dumps({"problem": p}))


if __name__ == "__main__":
    main()
