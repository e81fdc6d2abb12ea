#!/usr/bin/env bash
# Tests/fleet/base-image.sh: gives podman the base image the Containerfile
# names (docker.io/library/debian:bookworm-slim) without a registry, made from
# the Debian 12 root Scripts/debian-roots.sh keeps (debootstrap --variant=minbase
# from Debian's archive), so the file the tests build is the file users build.
# Once per machine: an image already there is kept. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$(sed -n 's/^ARG BASE=//p' Containerfile)
[ -n "$base" ] || { echo "base-image: no ARG BASE in Containerfile" >&2; exit 1; }
if podman image exists "$base"; then
    exit 0
fi
Scripts/debian-roots.sh bookworm >/dev/null
root=${FPCTL_TEST_CACHE:-/var/cache/fpctl-test}/bookworm
tar --numeric-owner -C "$root" -cf - . | podman import --quiet - "$base" >/dev/null
echo "base-image: $base from $root ($(du -sh "$root" | cut -f1))"
