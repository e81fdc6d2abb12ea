#!/usr/bin/env bash
# The main job, end to end, on the sample bundles: installs what is missing,
# builds fpctl, builds the demo and travel bundles, validates and inspects them,
# extracts one, then serves both bundles locally and resolves every placement for
# two identities against that server. Output lands in .demo/ (ignored by git).
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
echo "== fpctl bundle extract $out/travel.fpbundle"
"$fpctl" bundle extract "$out/travel.fpbundle" -o "$out/travel"
find "$out/travel" -type f | sort
cp bundles/travel/rules.json "$out/travel.rules.json"   # targeting rules sit beside the bundle
echo "== fpctl serve $out/demo.fpbundle $out/travel.fpbundle --port 0"
"$fpctl" serve "$out/demo.fpbundle" "$out/travel.fpbundle" --port 0 --ttl 300 -q > "$out/serve.url" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$out/serve.url" ] && break; sleep 0.1; done
url=$(head -n 1 "$out/serve.url")
echo "serving at $url"
printf '%-8s %-8s %-14s %-22s %s\n' app user placement flow version
for user in alice:US bob:DE; do
  for app in demo:onboarding,paywall travel:welcome,trip-upsell; do
    keys=$(echo "${app#*:}" | sed 's/[^,]*/"&"/g')
    curl -sS -X POST "$url/apps/${app%%:*}/placements/resolve-batch" \
      -d "{\"user_id\":\"${user%%:*}\",\"attributes\":{\"country\":\"${user#*:}\"},\"placement_keys\":[$keys]}" |
      python3 -c 'import json,sys
for r in json.load(sys.stdin)["results"]:
    f = r.get("flow") or {}
    print("%-8s %-8s %-14s %-22s %s" % (sys.argv[1], sys.argv[2], r["placement_key"], f.get("id", "-"), f.get("version", "-")))' "${app%%:*}" "${user%%:*}"
  done
done
