#!/usr/bin/env bash
# Writes dist/fpctl-VERSION.artifactbundle.zip, an SE-0305 artifact bundle of
# the fpctl executable, for SwiftPM plugins to run without building fpctl
# (FlowPilotPlugins/, docs/app-build.md), and prints the zip's
# `swift package compute-checksum`.
#
# The variant is the one this machine builds: on Linux the static release build
# Scripts/install.sh makes (.build-static; the Swift runtime linked in, the C
# libraries of docs/install.md needed at run time), x86_64-unknown-linux-gnu or
# aarch64-unknown-linux-gnu; on a Mac, the same command builds the
# arm64-apple-macosx and x86_64-apple-macosx variants (`swift build --arch`),
# one universal binary. Variants built elsewhere are added with
# --add DIR (a directory holding bin/fpctl and a file `triples`, one per line).
# FPCTL_ARTIFACT_BINARY=PATH (and FPCTL_ARTIFACT_TRIPLES) packs a binary built already.
# The zip's bytes depend only on the binaries: entries sorted, fixed times.
#
# Scripts/artifactbundle.sh [--add DIR]...   also copies the zip to
#   FlowPilotPlugins/Binaries/fpctl.artifactbundle.zip, where the plugin
#   package's local binaryTarget finds it (a release points it at a URL).
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --add) extra+=("${2:?--add needs a directory}"); shift 2 ;;
    *) echo "artifactbundle.sh: unknown argument '$1'" >&2; exit 64 ;;
    esac
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
case "${FPCTL_ARTIFACT_BINARY:+given}-$(uname -s)" in
given-*)
    # A binary built already (a CI's static build, a Mac's universal one).
    binary=$FPCTL_ARTIFACT_BINARY
    triple=${FPCTL_ARTIFACT_TRIPLES:-"$(uname -m)-unknown-linux-gnu"}
    ;;
-Linux)
    build=(swift build -c release --static-swift-stdlib --scratch-path .build-static --product fpctl)
    "${build[@]}" >/dev/null
    binary=$("${build[@]}" --show-bin-path)/fpctl
    triple="$(uname -m)-unknown-linux-gnu"
    ;;
-Darwin)
    build=(swift build -c release --arch arm64 --arch x86_64 --product fpctl)
    "${build[@]}" >/dev/null
    binary=$("${build[@]}" --show-bin-path)/fpctl
    triple="arm64-apple-macosx x86_64-apple-macosx"
    ;;
*) echo "artifactbundle.sh: no variant for $(uname -s)" >&2; exit 1 ;;
esac
version=$("$binary" --version)
root=$stage/fpctl-$version.artifactbundle
variant=fpctl-$version-$(uname -s | tr A-Z a-z)-$(uname -m)
install -d "$root/$variant/bin"
install -m 0755 -s "$binary" "$root/$variant/bin/fpctl" 2>/dev/null || install -m 0755 "$binary" "$root/$variant/bin/fpctl"
cp LICENSE "$root/" 2>/dev/null || true
variants=("$variant|$triple")
for dir in "${extra[@]}"; do
    name=fpctl-$version-$(basename "$dir")
    install -d "$root/$name/bin"
    install -m 0755 "$dir/bin/fpctl" "$root/$name/bin/fpctl"
    variants+=("$name|$(tr '\n' ' ' <"$dir/triples")")
done
python3 - "$root" "$version" "${variants[@]}" <<'PY'
import json, sys
root, version, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
info = {"schemaVersion": "1.0", "artifacts": {"fpctl": {"type": "executable", "version": version, "variants": [
    {"path": f"{path}/bin/fpctl", "supportedTriples": triples.split()}
    for path, triples in (v.split("|", 1) for v in variants)]}}}
with open(f"{root}/info.json", "w") as f:
    json.dump(info, f, indent=2, sort_keys=True)
    f.write("\n")
PY
mkdir -p dist FlowPilotPlugins/Binaries
zip=dist/fpctl-$version.artifactbundle.zip
python3 - "$stage" "$zip" <<'PY'
import os, sys, zipfile
stage, out = sys.argv[1], sys.argv[2]
tmp = out + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
    paths = []
    for dirpath, dirs, files in os.walk(stage):
        for name in dirs + files:
            paths.append(os.path.join(dirpath, name))
    for path in sorted(paths):
        rel = os.path.relpath(path, stage) + ("/" if os.path.isdir(path) else "")
        info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
        info.create_system = 3
        mode = 0o40755 if os.path.isdir(path) else (0o100755 if os.access(path, os.X_OK) else 0o100644)
        info.external_attr = mode << 16
        if os.path.isdir(path):
            z.writestr(info, b"")
        else:
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as f:
                z.writestr(info, f.read())
os.replace(tmp, out)
PY
cp "$zip" FlowPilotPlugins/Binaries/fpctl.artifactbundle.zip
checksum=$(cd FlowPilotPlugins && swift package compute-checksum "../$zip")
echo "$checksum" >"$zip.checksum"
echo "$zip $checksum"
