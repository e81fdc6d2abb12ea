#!/usr/bin/env bash
# Scripts/package.sh
#
# Writes dist/fpctl-VERSION-linux-ARCH.tar.gz and its .sha256: what
# Scripts/install.sh installs, under fpctl-VERSION/ (bin/, share/man, the
# completions), for a build pipeline to pin and check. Reproducible: two runs
# from the same commit give the same bytes (entries sorted by name, owner and
# group 0, modes as installed, every mtime the commit's time, gzip without a
# name or time stamp).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
Scripts/install.sh --prefix "$stage/root" >/dev/null
version=$("$stage/root/bin/fpctl" --version)
arch=$(uname -m)
name=fpctl-$version-linux-$arch
mv "$stage/root" "$stage/$name"
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 315532800)
mkdir -p dist
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$stage" -cf - "$name" | gzip -9 -n >"dist/$name.tar.gz"
(cd dist && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
cat "dist/$name.tar.gz.sha256"
