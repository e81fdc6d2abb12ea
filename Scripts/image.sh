#!/usr/bin/env bash
# Scripts/image.sh [--tag NAME]
#
# Builds the fpctl container image from ./Containerfile with podman (buildah
# when podman is missing; `docker build` reads the same file): Debian 12 slim
# plus dist/fpctl_VERSION_ARCH.deb (made by Scripts/package.sh when missing),
# uid 65532, ENTRYPOINT fpctl. OCI labels: version (fpctl --version), revision
# (the commit), created (SOURCE_DATE_EPOCH, default the commit's time), source.
# Prints the image's name (default localhost/fpctl:VERSION).
#
# In a sandbox without CAP_SYS_RESOURCE or with hybrid cgroups (this project's
# CI), set CONTAINERS_CONF=packaging/container/containers.conf (runc,
# cgroupfs): crun fails there.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=
while [ $# -gt 0 ]; do
    case "$1" in
        --tag) tag=$2; shift 2 ;;
        *) echo "image.sh: unknown argument $1" >&2; exit 64 ;;
    esac
done
engine=$(command -v podman || command -v buildah || true)
[ -n "$engine" ] || { echo "image.sh: needs podman or buildah (Scripts/install-deps.sh image)" >&2; exit 1; }
version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/FlowPilotCore/FPVersion.swift)
[ -n "$version" ] || { echo "image.sh: no version in Sources/FlowPilotCore/FPVersion.swift" >&2; exit 1; }
arch=$(dpkg --print-architecture)
deb=dist/fpctl_${version}_$arch.deb
[ -f "$deb" ] || Scripts/package.sh >/dev/null
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
tag=${tag:-localhost/fpctl:$version}
build=(build)
[ "$(basename "$engine")" = buildah ] && build=(bud)
"$engine" "${build[@]}" --quiet --file Containerfile --tag "$tag" \
    --build-arg VERSION="$version" --build-arg ARCH="$arch" --build-arg REVISION="$revision" \
    --build-arg CREATED="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)" \
    --timestamp "$epoch" . >/dev/null
echo "$tag"
