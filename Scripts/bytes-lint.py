#!/usr/bin/env python3
"""Fails where Sources compare an identity or a name with Swift's `==`.

Swift's `==` (and `!=`, `Set`, a `Dictionary` key) on `String` is Unicode
canonical equivalence: "café" written precomposed equals "cafe" plus a
combining accent. Identities and names are the backend's or the signer's
bytes, hashed byte for byte into fingerprints and keys, so fpctl compares them
with `sameBytes(as:)` (Sources/FlowPilotCore/Text/SameBytes.swift) and keys
collections of them by `ExactName` (docs/decisions.md, "Bytes are identity").

This finds `==` and `!=` with an operand named for such a value: app ids, user
ids, placements, flow ids, key ids, fingerprints, content hashes, rule ids;
and a JSON object keyed by `String` (`[String: JSONValue]`), where two
members whose keys differ only in their bytes would be one: `JSONValue.object`
is keyed by `ExactName`.
(`version` is left out: it names integers as often as strings.) A line, or
the line before it, may carry `// bytes-lint: <why>` where the comparison is
of something else.

    Scripts/bytes-lint.py [DIR...]   prints each offending FILE:LINE and exits 1
"""
import pathlib
import re
import sys

NAMES = r"(?:appID|userID|user_id|placement|placementKey|flowID|keyID|fingerprint|contentHash|ruleID|rule)"
OPERAND = rf"[\w.?!]*\b{NAMES}\b[?!]?"
COMPARE = re.compile(rf"({OPERAND}\s*[!=]=\s*[^=]|[^=!<>]\s*[!=]=\s*{OPERAND})")
EXEMPT = "bytes-lint:"
# Comparisons with nil or a literal of plain ASCII are exact either way.
STRING_KEYED_JSON = re.compile(r"\[String:\s*JSONValue\]")
HARMLESS = re.compile(rf"({OPERAND}\s*[!=]=\s*(nil|\"[\x20-\x7e]*\")|(nil|\"[\x20-\x7e]*\")\s*[!=]=\s*{OPERAND})")


def code(line: str) -> str:
    # Drop string literals' contents and comments, keep the shape.
    line = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: '"' + re.sub(r"[^\x20-\x7e]", "?", m.group(0)[1:-1]) + '"', line)
    return line.split("//", 1)[0]


def main() -> int:
    roots = [pathlib.Path(a) for a in sys.argv[1:]] or [pathlib.Path("Sources")]
    bad = []
    for root in roots:
        for path in sorted(root.rglob("*.swift")):
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                if EXEMPT in line or (number > 1 and EXEMPT in lines[number - 2]):
                    continue
                text = code(line)
                if STRING_KEYED_JSON.search(text):
                    bad.append(f"{path}:{number}: {line.strip()}")
                    continue
                if not COMPARE.search(text):
                    continue
                stripped = HARMLESS.sub("", text)
                if COMPARE.search(stripped):
                    bad.append(f"{path}:{number}: {line.strip()}")
    for b in bad:
        print(b)
    if bad:
        print(f"bytes-lint: {len(bad)} comparison(s) of identities with ==, or JSON objects keyed by String (use sameBytes(as:) and ExactName, or mark `// bytes-lint: why`)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
