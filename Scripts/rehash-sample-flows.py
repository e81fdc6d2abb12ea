#!/usr/bin/env python3
"""Fills in the hashes of the sample flows after an edit.

For every bundles/*/flows/*.json: each declared font's `sha256` (from the local
copy bundle.json maps its URL to) and the flow's `content_hash` ("sha256:" + hex of
the canonical JSON without content_hash: keys sorted, no whitespace). Run from the
project root after changing a sample flow; `fpctl bundle validate` checks the result.
"""
import hashlib
import json
from pathlib import Path


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


for source in sorted(Path("bundles").glob("*/bundle.json")):
    root = source.parent
    assets = json.loads(source.read_text())["assets"]
    for flow_path in sorted((root / "flows").glob("*.json")):
        flow = json.loads(flow_path.read_text())
        for font in flow.get("fonts", []):
            font["sha256"] = hashlib.sha256((root / assets[font["url"]]).read_bytes()).hexdigest()
        flow.pop("content_hash", None)
        flow["content_hash"] = "sha256:" + hashlib.sha256(canonical(flow)).hexdigest()
        flow_path.write_text(json.dumps(flow, indent=2, ensure_ascii=False) + "\n")
        print(flow_path, flow["content_hash"])
