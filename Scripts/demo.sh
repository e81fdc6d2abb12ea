#!/usr/bin/env bash
# The main job, end to end, on the sample bundles: installs what is missing,
# builds fpctl, builds the demo and travel bundles, validates and inspects them,
# and extracts one. Output lands in .demo/ (ignored by git).
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
