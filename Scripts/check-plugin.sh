#!/usr/bin/env bash
# The bundled default built by the app's own build (docs/app-build.md): writes
# the artifact bundle (Scripts/artifactbundle.sh, from the static release
# build), then builds and tests Examples/PluginApp, which uses the
# FlowPilotBundle plugin on a copy of bundles/demo and compiles no fpctl source.
# Checks that:
#   - the build works with the network off (unshare -n, as root);
#   - the resource's bytes are `fpctl bundle build`'s of the same source;
#   - a second build with nothing changed runs no fpctl (the output's mtime
#     stays), an edited flow builds again;
#   - a broken flow fails `swift build` at its FILE:LINE:COL, no bundle left;
#   - the command plugin pulls from `fpctl serve` on loopback into the source.
# Prints the timings of the first build and of the no-change rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
app=$root/Examples/PluginApp
source=$app/Sources/PaywallDefaults/flowpilot
work=$(mktemp -d)
serve=
cleanup() {
    [ -z "$serve" ] || kill "$serve" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-plugin: $*" >&2; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# FPCTL_ARTIFACT_BINARY: a binary built already (Scripts/artifactbundle.sh).
Scripts/artifactbundle.sh
fpctl=${FPCTL_ARTIFACT_BINARY:-$(swift build -c release --static-swift-stdlib --scratch-path .build-static \
    --product fpctl --show-bin-path)/fpctl}
# Offline: a network namespace of its own, with only a loopback, and that
# one up. Without it Foundation cannot make CFSocket's wakeup socket pair
# (a UDP pair on 127.0.0.1; "Could not create wakeup socket pair"), and
# SwiftPM may then never see its plugin process exit: a build that hangs,
# now and then, with the plugin a zombie.
offline=()
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
    offline=(unshare -n sh -c 'ip link set lo up && exec "$0" "$@"')
fi

rm -rf "$source" "$app/.build"
cp -R bundles/demo "$source"
"$fpctl" bundle build "$source" -o "$work/expected.fpbundle" >/dev/null 2>&1

cd "$app"
started=$(now)
"${offline[@]}" swift build >"$work/build1.log" 2>&1 || { cat "$work/build1.log"; fail "the example does not build"; }
first=$(took "$started")
grep -q "fpctl bundle build flowpilot" "$work/build1.log" || { cat "$work/build1.log"; fail "the plugin did not run"; }
! grep -q "Compiling FlowPilotCore" "$work/build1.log" || fail "the example compiled fpctl's sources"
EXPECTED_FPBUNDLE=$work/expected.fpbundle "${offline[@]}" swift test >"$work/test.log" 2>&1 ||
    { cat "$work/test.log"; fail "the example's tests fail"; }
output=$(find .build -path '*plugins/outputs*' -name flowpilot.fpbundle | head -1)
[ -n "$output" ] || fail "no flowpilot.fpbundle among the plugin's outputs"
cmp -s "$output" "$work/expected.fpbundle" || fail "the plugin's bundle differs from fpctl bundle build's"

# Nothing changed: no fpctl run, the output untouched.
before=$(stat -c %Y.%y "$output")
started=$(now)
"${offline[@]}" swift build >"$work/build2.log" 2>&1 || { cat "$work/build2.log"; fail "the rebuild failed"; }
again=$(took "$started")
! grep -q "fpctl bundle build" "$work/build2.log" || { cat "$work/build2.log"; fail "a no-change build ran fpctl again"; }
[ "$(stat -c %Y.%y "$output")" = "$before" ] || fail "a no-change build rewrote the bundle"

# An edited flow (its content_hash dropped: still valid) builds again.
python3 - "$source/flows/paywall.json" <<'PY'
import json, sys
flow = json.load(open(sys.argv[1])); flow.pop("content_hash", None); flow["version"] = "ver_pw_edited"
json.dump(flow, open(sys.argv[1], "w"), indent=2)
PY
"${offline[@]}" swift build >"$work/build3.log" 2>&1 || { cat "$work/build3.log"; fail "the edited source did not build"; }
grep -q "fpctl bundle build flowpilot" "$work/build3.log" || fail "an edited flow did not run fpctl again"
[ "$(stat -c %Y.%y "$output")" != "$before" ] || fail "an edited flow left the old bundle"

# A broken flow fails the build at its line, and leaves no bundle.
rm -f "$output"
sed -i 's/"screen": "sync"/"screen": "nowhere"/' "$source/flows/onboarding.json"
line=$(grep -n '"screen": "nowhere"' "$source/flows/onboarding.json" | cut -d: -f1)
column=$(($(grep '"screen": "nowhere"' "$source/flows/onboarding.json" | awk '{ print index($0, "\"nowhere\"") }')))
if "${offline[@]}" swift build >"$work/build4.log" 2>&1; then fail "a broken flow built"; fi
grep -q "flowpilot/flows/onboarding.json:$line:$column: error: flow-navigate: navigate targets screen 'nowhere'" \
    "$work/build4.log" || { cat "$work/build4.log"; fail "no FILE:LINE:COL: error: line for the broken flow"; }
[ ! -e "$output" ] || fail "a failed build left a bundle"
broken_line=$(grep -m1 "error: flow-navigate" "$work/build4.log")

# The command plugin pulls from a local backend into the package's source.
rm -rf "$source"
mkdir -p "$source"
echo '{"app_id": "demo", "placements": {}}' >"$source/bundle.json"
"$fpctl" serve "$root/bundles/demo" --port 0 -q --rewrite-asset-urls >"$work/serve.out" 2>"$work/serve.err" &
serve=$!
for _ in $(seq 100); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
url=$(head -1 "$work/serve.out")
[ -n "$url" ] || fail "fpctl serve did not start: $(cat "$work/serve.err")"
swift package --allow-writing-to-package-directory --allow-network-connections all \
    fpctl-pull --api-url "$url" --app-id demo onboarding paywall >"$work/pull.log" 2>&1 ||
    { cat "$work/pull.log"; fail "fpctl-pull failed"; }
[ -f "$source/flows/onboarding.json" ] && [ -f "$source/flows/paywall.json" ] || fail "fpctl-pull wrote no flows"
swift package --allow-writing-to-package-directory --allow-network-connections all fpctl-pull --diff --api-url "$url" --app-id demo \
    >"$work/diff.log" 2>&1 || { cat "$work/diff.log"; fail "the pulled source is not in sync"; }
"${offline[@]}" swift build >"$work/build5.log" 2>&1 || { cat "$work/build5.log"; fail "the pulled source did not build"; }

# Foundation's run loops worked in the offline namespace (see `offline` above).
! grep -l "Could not create wakeup socket pair" "$work"/build*.log "$work/test.log" ||
    fail "CFSocket had no wakeup socket pair in the offline namespace (its loopback down?)"

rm -rf "$source"
echo "check-plugin: first build ${first}s (no fpctl source compiled), no-change rebuild ${again}s; a broken flow:"
echo "  $broken_line"
