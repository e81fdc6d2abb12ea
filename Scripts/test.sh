#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: installs the Debian packages the
# build and the tests need when they are missing, lints with swift format,
# builds (warnings are errors in the project's own targets), runs `swift test`
# (which checks the man pages against the commands and runs their EXAMPLES), checks the
# install, the release tarball and the .deb, builds the samples in Debian 12 and 13
# roots (debootstrap, cached in /var/cache/fpctl-test) and compares the bytes, then runs every fuzz target briefly (after its
# regression inputs), power cuts on a FUSE file system and a short fault campaign.
# FPCTL_FUZZ_SECONDS sets the time per fuzz target (default 30).
#
# Each stage prints "stage NAME SECONDS" when it ends, and the run ends with
# "stage total SECONDS"; the same lines are kept in .build/stage-times.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .build
: >.build/stage-times.txt
now() { date +%s.%N; }
run_started=$(now)
stage() {
    local name=$1 started
    shift
    started=$(now)
    "$@"
    awk -v name="$name" -v a="$started" -v b="$(now)" 'BEGIN { printf "stage %s %.1f\n", name, b - a }' |
        tee -a .build/stage-times.txt
}

lint() {
    # Style: .swift-format (Sources forbid force unwraps; Tests/.swift-format allows them).
    swift format lint --strict --recursive Sources Tests Package.swift Fuzz/Sources Fuzz/Package.swift
}
unit_tests() {
    # In a PID namespace of its own when root: whatever a test started (fpctl serve,
    # nginx, tinyproxy) dies with the run, even if the test process crashes.
    if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        unshare --pid --fork --mount-proc --kill-child swift test
        Tests/orphans.sh .build/debug/fpctl
    else
        swift test
    fi
}
powercut() {
    Scripts/install-deps.sh powercut
    /usr/bin/python3 Tests/powercut/powercut.py --fpctl .build/debug/fpctl --cuts "${FPCTL_POWER_CUTS:-20}"
}

stage deps Scripts/install-deps.sh
stage lint lint
# The project's targets treat warnings as errors (Package.swift), so this build is warning-free.
stage build swift build --build-tests
stage test unit_tests
# The install and the release tarball (docs/install.md): a static release build.
stage install Scripts/check-install.sh
# The same bundle bytes on Debian 12 and 13, and the .deb installed there (docs/install.md).
stage debian Scripts/check-debian.sh
# Fuzzing (CONTRIBUTING.md, "Fuzzing"): a separate sanitizer build, then each target.
stage fuzz Scripts/fuzz.sh all "${FPCTL_FUZZ_SECONDS:-30}"
# Power cuts during warm, put and bundle build on a FUSE file system that drops
# whatever was not synced (docs/cache-format.md, "Durability"): nothing reported may be lost.
stage powercut powercut
# The fault campaign, small (CONTRIBUTING.md, "Fault campaign", has a full run's figures).
stage faults python3 Tests/faults/fault_campaign.py --fpctl .build/debug/fpctl --identities 1000 --kills 5
awk -v a="$run_started" -v b="$(now)" 'BEGIN { printf "stage total %.1f\n", b - a }' | tee -a .build/stage-times.txt
