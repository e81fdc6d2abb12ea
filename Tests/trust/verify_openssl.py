#!/usr/bin/env python3
"""An independent verifier of fpctl's trust-root signatures, written from
fpctl-bundle(5) ("Signatures") alone: Python's standard library reads the zip
and JSON, openssl checks every Ed25519 signature.

    verify_openssl.py BUNDLE APP-TRUST.json [NOW]

Checks, as the page says: manifest.sig's statement is signed by the key it
names over its canonical JSON (keys sorted, no whitespace); its manifest_sha256
is the SHA-256 of manifest.json's bytes; the app copy's newest version is signed
by a threshold of its own root keys; each carried root version newer than it
follows the one before by 1 and is signed by a threshold of the previous
version's root keys and of its own; the newest delegates the statement's key.
And the page's "Exact values" and "Times": the statement's and manifest.json's
app_id are the root's, as their bytes (Python compares code points and never
normalizes); sequence, version, min_sequence and threshold are integers
written as digits, at most 2^53 - 1; expires is after signed_at; with NOW
(RFC 3339), signed_at is at most 300 seconds after it and expires not before
it. Prints "verified: ..." and exits 0, or names the first failure and exits 1.
Delegation windows and rollback are fpctl's to check.
"""
import base64
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(raw):
    return hashlib.sha256(raw).hexdigest()[:16]


def openssl_verify(raw_key, message, signature):
    with tempfile.TemporaryDirectory() as tmp:
        der = os.path.join(tmp, "key.der")
        msg = os.path.join(tmp, "msg")
        sig = os.path.join(tmp, "sig")
        with open(der, "wb") as f:
            f.write(SPKI_ED25519 + raw_key)
        with open(msg, "wb") as f:
            f.write(message)
        with open(sig, "wb") as f:
            f.write(signature)
        r = subprocess.run(
            ["openssl", "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey", der, "-rawin",
             "-in", msg, "-sigfile", sig],
            capture_output=True)
        return r.returncode == 0


def signers(signed_root, keys):
    message = canonical(signed_root["signed"])
    found = set()
    for s in signed_root["signatures"]:
        raw = keys.get(s["key_id"])
        if raw is None or s["key_id"] in found:
            continue
        if openssl_verify(raw, message, base64.b64decode(s["signature"])):
            found.add(s["key_id"])
    return found


def root_keys(signed):
    keys = {}
    for kid, b64 in signed["root_keys"].items():
        raw = base64.b64decode(b64)
        if key_id(raw) != kid:
            fail(f"root key {kid} is not the id of its bytes")
        keys[kid] = raw
    return keys


LARGEST = 2**53 - 1


def whole(value, lowest, what):
    # json.loads reads digits alone as int, anything with a fraction or exponent as float.
    if type(value) is not int or not lowest <= value <= LARGEST:
        fail(f"{what} is not an integer from {lowest} to 2^53 - 1 written as digits: {value!r}")
    return value


def instant(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def fail(message):
    print(f"failed: {message}")
    sys.exit(1)


def main():
    bundle, app = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        if names[:2] != ["manifest.json", "manifest.sig"]:
            fail("manifest.json and manifest.sig are not the first two entries")
        manifest = z.read("manifest.json")
        block = json.loads(z.read("manifest.sig"))
    with open(app, "rb") as f:
        anchor = json.load(f)["roots"][-1]
    current = anchor["signed"]
    for field, lowest in (("version", 1), ("min_sequence", 0), ("threshold", 1)):
        whole(current[field], lowest, f"the app's root {field}")
    if len(signers(anchor, root_keys(current))) < current["threshold"]:
        fail("the app's root is not signed by a threshold of its own keys")
    first = current["version"]
    for entry in block["roots"]:
        new = entry["signed"]
        for field, lowest in (("version", 1), ("min_sequence", 0), ("threshold", 1)):
            whole(new[field], lowest, f"a carried root's {field}")
        if new["version"] <= first:
            continue
        if new["version"] != current["version"] + 1:
            fail(f"root version {new['version']} follows {current['version']}")
        if len(signers(entry, root_keys(current))) < current["threshold"]:
            fail(f"root version {new['version']} lacks the previous version's threshold")
        if len(signers(entry, root_keys(new))) < new["threshold"]:
            fail(f"root version {new['version']} lacks its own threshold")
        if new["app_id"] != current["app_id"]:
            fail(f"root version {new['version']} changes the app id")
        current = new
    statement = block["signed"]
    if statement["type"] != "fpctl-bundle-signature":
        fail("the statement's type")
    if statement["manifest_sha256"] != hashlib.sha256(manifest).hexdigest():
        fail("the statement's manifest sha256 is not manifest.json's")
    whole(statement["sequence"], 0, "the statement's sequence")
    for what, app_id in (("the statement", statement["app_id"]), ("manifest.json", json.loads(manifest)["app_id"])):
        if app_id.encode() != current["app_id"].encode():
            fail(f"{what} is for app {app_id!r}, the root for {current['app_id']!r}")
    signed_at, expires = instant(statement["signed_at"]), instant(statement["expires"])
    if expires <= signed_at:
        fail("the statement expires before it was signed")
    if len(sys.argv) > 3:
        now = instant(sys.argv[3])
        if expires < now:
            fail(f"the statement expired at {statement['expires']}")
        if (signed_at - now).total_seconds() > 300:
            fail(f"the statement was signed at {statement['signed_at']}, after now")
    delegation = current["signing_keys"].get(statement["key_id"])
    if delegation is None:
        fail(f"key {statement['key_id']} is not delegated by root version {current['version']}")
    raw = base64.b64decode(delegation["public_key"])
    if key_id(raw) != statement["key_id"]:
        fail("the delegated key's id is not the id of its bytes")
    if not openssl_verify(raw, canonical(statement), base64.b64decode(block["signature"])):
        fail("the statement's signature does not verify")
    print(
        f"verified: statement by {statement['key_id']}, sequence {statement['sequence']}, "
        f"roots {first}..{current['version']}")


main()
