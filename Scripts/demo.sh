#!/usr/bin/env bash
# The main job, end to end, on the sample bundles. Installs what is missing, builds
# fpctl, builds and validates the demo and travel bundles, serves them locally with
# `fpctl serve`, warms a cache for three identities against it and for a fourth with
# the backend unreachable (served from the bundled default), prints the outcome
# tables, then `cache info`. Everything lands in .demo/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build -c release --product fpctl
fpctl=$(swift build -c release --show-bin-path)/fpctl
out=.demo
rm -rf "$out" && mkdir -p "$out"

for sample in demo travel; do
  echo "== fpctl bundle build bundles/$sample"
  "$fpctl" bundle build "bundles/$sample" -o "$out/$sample.fpbundle"
done
echo "== fpctl bundle validate"
"$fpctl" bundle validate "$out"/*.fpbundle
echo "== fpctl bundle inspect $out/demo.fpbundle"
"$fpctl" bundle inspect "$out/demo.fpbundle"
echo "== fpctl bundle preview $out/demo.fpbundle -o $out/demo.html (open it in a browser)"
"$fpctl" bundle preview "$out/demo.fpbundle" -o "$out/demo.html"

echo "== fpctl serve $out/demo.fpbundle --port 0 --ttl 300 --rewrite-asset-urls"
"$fpctl" serve "$out/demo.fpbundle" --port 0 --ttl 300 --rewrite-asset-urls -q > "$out/serve.url" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$out/serve.url" ] && break; sleep 0.1; done
url=$(head -n 1 "$out/serve.url")
echo "serving at $url"

cat > "$out/identities.jsonl" <<'IDS'
{"user_id": "alice", "attributes": {"plan": "free", "country": "US"}}
{"user_id": "bob", "attributes": {"plan": "pro", "country": "DE"}}
{"user_id": "carol", "attributes": {}}
IDS
echo "== fpctl warm onboarding paywall --identities $out/identities.jsonl"
"$fpctl" warm onboarding paywall --cache-dir "$out/cache" --api-url "$url" --app-id demo \
  --identities "$out/identities.jsonl" --media all-screens
echo "== fpctl warm onboarding paywall --user-id dave (backend unreachable, bundled default)"
"$fpctl" warm onboarding paywall --cache-dir "$out/offline-cache" --api-url http://127.0.0.1:9 --app-id demo \
  --user-id dave --bundle "$out/demo.fpbundle" --retries 0 --fail-on never
echo "== fpctl cache info --cache-dir $out/cache"
"$fpctl" cache info --cache-dir "$out/cache"
