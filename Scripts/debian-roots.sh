#!/usr/bin/env bash
# Scripts/debian-roots.sh [SUITE…]   (default: bookworm trixie)
#
# Makes the pristine Debian roots the tests use (minbase, debootstrap), once:
# each is kept in $FPCTL_TEST_CACHE/SUITE (default /var/cache/fpctl-test) and
# reused while it has apt-get, so only the first run on a machine downloads it.
# A root is made in SUITE.partial and renamed when whole, so an interrupted run
# never leaves half a root behind. A lock lets Scripts/test.sh start this in the
# background, while it compiles, and Scripts/check-debian.sh call it again.
# Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "debian-roots: needs root (debootstrap)" >&2; exit 1; }
Scripts/install-deps.sh deb
cache=${FPCTL_TEST_CACHE:-/var/cache/fpctl-test}
mirror=${FPCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"
exec 8>"$cache/roots.lock"
flock 8
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie)
for suite in "${suites[@]}"; do
    root=$cache/$suite
    mkdir -p "$cache/$suite-apt/partial"
    [ -x "$root/usr/bin/apt-get" ] && continue
    started=$SECONDS
    rm -rf "$root.partial"
    if ! debootstrap --variant=minbase "$suite" "$root.partial" "$mirror" >"$cache/debootstrap-$suite.log" 2>&1; then
        echo "debian-roots: debootstrap $suite failed (log: $(tail -3 "$cache/debootstrap-$suite.log"))" >&2
        exit 1
    fi
    mv "$root.partial" "$root"
    echo "debian-roots: $suite made in $((SECONDS - started)) s"
done
