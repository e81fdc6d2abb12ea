#!/usr/bin/env bash
# Fuzz/make-seeds.sh FPCTL
#
# Writes the committed seed corpora (Fuzz/Corpus/TARGET) from the sample
# bundles and a built fpctl: small, valid examples of every input, plus the
# hostile archives the validator tests use. Rerun it when a format changes;
# the seeds are kept small so every mutation stays cheap.
set -euo pipefail
fpctl=$(realpath "$1")
cd "$(dirname "$0")"
root=$(cd .. && pwd)
out=$PWD/Corpus
rm -rf "$out"
mkdir -p "$out"/{json,bundle,flow,rules,identities,cache,keys,units,resolve,proxy,media}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A small bundle (two flows, a 1x1 PNG, a stub font), so mutations reach every part of it.
mkdir -p "$work/bundles/src/flows" "$work/bundles/src/assets"
src=$work/bundles/src
python3 - "$src/assets/dot.png" <<'EOF'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
EOF
# The demo's flows, every image pointing at the one PNG and the font at a
# 16-byte TrueType stub: the hostile-archive generator edits these flows.
python3 - "$root/bundles/demo" "$src" <<'EOF'
import json, re, sys
demo, src = sys.argv[1], sys.argv[2]
open(f"{src}/assets/tiny.ttf", "wb").write(b"\x00\x01\x00\x00" + bytes(12))
for name in ("onboarding", "paywall"):
    text = open(f"{demo}/flows/{name}.json").read()
    text = re.sub(r"https://cdn\.example\.com/demo/[a-z-]+\.png", "https://cdn.example.com/dot.png", text)
    text = text.replace("https://cdn.example.com/fonts/DejaVuSans-Bold.ttf", "https://cdn.example.com/tiny.ttf")
    open(f"{src}/flows/{name}.json", "w").write(text)
json.dump({"app_id": "seed", "created_at": "2026-01-01T00:00:00Z",
           "placements": {"onboarding": "flows/onboarding.json", "paywall": "flows/paywall.json"},
           "assets": {"https://cdn.example.com/dot.png": "assets/dot.png",
                      "https://cdn.example.com/tiny.ttf": "assets/tiny.ttf"}}, open(f"{src}/bundle.json", "w"))
EOF
(cd "$work" && python3 "$root/Scripts/rehash-sample-flows.py" >/dev/null)
"$fpctl" bundle build "$src" -o "$out/bundle/small.fpbundle" >/dev/null
"$fpctl" bundle keygen -o "$work/seed" >/dev/null
"$fpctl" bundle sign "$out/bundle/small.fpbundle" --key "$work/seed.key" -o "$out/bundle/signed.fpbundle" >/dev/null
python3 "$root/Tests/fpctlTests/Fixtures/make-hostile-bundles.py" "$out/bundle/small.fpbundle" "$work/hostile" \
    >/dev/null 2>&1
find "$work/hostile" -name '*.fpbundle' -size -12k -exec cp {} "$out/bundle/" \;

# JSON documents and flows.
cp "$src/flows/onboarding.json" "$out/flow/onboarding.json"
cp "$root/bundles/demo/flows/paywall.json" "$out/flow/paywall.json"
cp "$root/bundles/demo/flows/paywall.json" "$out/json/paywall.json"
cp "$root/bundles/demo/bundle.json" "$out/json/bundle.json"
printf '%s' '[1, -0.5, 2e10, "\u00e9\ud83d\ude00", true, false, null, {"a": {}}]' >"$out/json/scalars.json"

# Targeting rules.
cp "$root/bundles/travel/rules.json" "$out/rules/travel.json"
cat >"$out/rules/conditions.json" <<'EOF'
{"placements": {"home": [
  {"audience": {"country": {"equals": "DE"}, "beta": {"exists": true}}, "flow": "paywall"},
  {"audience": {"plan": {"in": ["pro", "team"]}}, "flow": null},
  {"experiment": {"id": "exp", "variants": [{"name": "a", "weight": 1, "flow": "home"},
                                          {"name": "b", "weight": 3, "flow": "upsell"}]}}]}}
EOF

# Identities: the first byte picks the read chunk size (FuzzIdentities).
printf '\x05{"user_id":"u1"}\n\n{"user_id":"u2","attributes":{"country":"DE","beta":true}}\n{"user_id":"u3"}' \
    >"$out/identities/three.jsonl"

# Cache entries, written by `cache put`: "<key dir>/<name>" then the entry file.
printf '{"placement":"home","user_id":"u1","ttl_seconds":3600,"flow_file":"%s"}\n' "$src/flows/onboarding.json" |
    "$fpctl" cache put --cache-dir "$work/cache" >/dev/null
for entry in "$work"/cache/flows/*/*/*.json; do
    keydir=$(basename "$(dirname "$entry")")
    { printf '%s/%s\n' "$keydir" "$(basename "$entry")"; cat "$entry"; } >"$out/cache/entry"
done
printf 'caf%%C3%%A9~%%7E/x\n' >"$out/cache/names"

# Key and signature files.
cp "$work/seed.key" "$out/keys/private.key"
cp "$work/seed.pub" "$out/keys/public.pub"
unzip -p "$out/bundle/signed.fpbundle" manifest.sig >"$out/keys/manifest.sig"

# Durations, sizes, times.
for v in 90s 1h30m 250ms 2w 1.5d 200MiB 10GB 4096 2026-11-23T07:50:49Z 2026-11-23T07:50:49.123+01:00; do
    printf '%s' "$v" >"$out/units/$v"
done

# Proxy settings: lines are --proxy, HTTPS_PROXY, HTTP_PROXY, NO_PROXY and a host.
printf '\nhttp://proxy.corp:3128\nproxy.corp:8080\nlocalhost,.internal.corp,10.0.0.0/8\napi.internal.corp' >"$out/proxy/env"
printf 'http://user:p%%40ss@[fd00::1]:8080\n\n\n*\nexample.com' >"$out/proxy/override-ipv6"
printf '\nsocks5://x:1080\n\n::1/128, 192.168.0.0/16\n192.168.4.7' >"$out/proxy/cidr"

# HTTP requests for the resolve handler (the first byte also picks where the input is cut).
body='{"user_id":"u1","attributes":{"country":"DE"}}'
printf 'POST /apps/demo/placements/onboarding/resolve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-key\r\nContent-Length: %d\r\n\r\n%s' \
    ${#body} "$body" >"$out/resolve/resolve"
batch='{"user_id":"u1","placements":["onboarding","paywall"]}'
printf 'POST /apps/demo/placements/resolve-batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-key\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' \
    ${#batch} "$batch" >"$out/resolve/batch-chunked"
printf 'POST /apps/demo/placements/paywall/resolve HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}POST /apps/demo/placements/paywall/resolve HTTP/1.1\r\nAuthorization: Bearer no\r\nContent-Length: 0\r\n\r\n' \
    >"$out/resolve/pipelined"
printf 'GET /_admin/stats HTTP/1.1\r\nHost: x\r\n\r\n' >"$out/resolve/get"
# Media files for the structure check (media-corrupt).
python3 make-media-seeds.py "$out/media" "$root/bundles/demo/assets/badge.png"
ls "$out"/* | wc -l
