#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: installs the Debian packages the
# build and the tests need when they are missing, lints with swift format,
# builds (warnings are errors in the project's own targets), runs `swift test`
# (which checks the man pages against the commands and runs their EXAMPLES), checks the
# install, the release tarball and the .deb, builds the samples in Debian 12 and 13
# roots and compares the bytes, builds the container image and runs the
# Kubernetes Job and GitHub Actions workflow of deploy/ in it (Tests/fleet),
# replays every fuzz target's regression inputs and
# committed corpus and fuzzes each briefly, then cuts the power on a FUSE file
# system and runs a short fault campaign. The long campaigns are Scripts/soak.sh.
#
# Each stage prints "stage NAME SECONDS" when it ends, and the run ends with
# "stage total SECONDS"; the same lines are kept in .build/stage-times.txt
# (with the build cache below, in the cached .build the link pointed at).
#
# What is fetched or built from what does not change is kept between runs, under
# $FPCTL_TEST_CACHE (default /var/cache/fpctl-test), when that can be written:
#   - the Debian roots (Scripts/debian-roots.sh), fetched in the background
#     while the first build runs;
#   - as root, in a checkout with no .build, .build-static or Fuzz/.build yet
#     (a fresh clone), those three are links into builds/KEY for the run
#     (removed when it ends), used from the stable path below, KEY being a digest of the
#     toolchain's version and the dependencies both Package.swift files declare
#     (their .package lines): the dependencies build once per key, the
#     project's own modules build again from the clone (SwiftPM rebuilds what
#     a changed manifest or source asks for, as in any checkout). One
#     run at a time holds a key (flock); the three newest keys are kept.
#     FPCTL_BUILD_CACHE=0 builds in the clone instead.
# FPCTL_FUZZ_SECONDS sets the fuzzing time per target (default 5),
# FPCTL_POWER_CUTS the power cuts per command on LazyFS (default 20) and
# FPCTL_BLOCK_CUTS those under ext4 (default 8).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${FPCTL_TEST_CACHE:-/var/cache/fpctl-test}

# Builds record absolute paths (clang's module cache refuses a moved one), so
# the cached builds are used from one stable path: as root, the run goes on in
# a mount namespace of its own, with the clone bound at $cache/checkout (gone
# when the run ends; concurrent runs each see their own clone there).
# Only a checkout whose build directories are missing (a fresh clone) or are
# already links into the cache: a checkout's own .build knows its own path.
cacheable() {
    local build
    for build in .build .build-static Fuzz/.build; do
        if [ -e "$build" ] || [ -L "$build" ]; then
            [ -L "$build" ] && [[ "$(readlink "$build")" == "$cache/builds/"* ]] || return 1
        fi
    done
}
# The links are removed when the run ends, whatever its end: the cached builds
# know the stable path, not this one, so a plain `swift build` here would fail
# on them ("precompiled file ... was compiled with module cache path ...");
# without the links it builds in the checkout's own .build, as in any clone.
# The next run of this script makes the links again.
if [ "${FPCTL_BUILD_CACHE:-1}" != 0 ] && [ -z "${FPCTL_STABLE_CHECKOUT:-}" ] && [ "$(id -u)" = 0 ] &&
    command -v unshare >/dev/null && cacheable && mkdir -p "$cache/checkout" 2>/dev/null; then
    status=0
    unshare --mount --propagation private bash -c \
        'mount --bind "$1" "$2" && cd "$2" && FPCTL_STABLE_CHECKOUT=1 exec bash Scripts/test.sh' _ "$PWD" "$cache/checkout" ||
        status=$?
    for build in .build .build-static Fuzz/.build; do
        if [ -L "$build" ] && [[ "$(readlink "$build")" == "$cache/builds/"* ]]; then rm "$build"; fi
    done
    # Nothing in the checkout may point into the cache any more (a link a later
    # change adds and forgets to remove would break the next plain build here).
    left=$(find . -path ./.git -prune -o -type l -lname "$cache/*" -print)
    if [ -n "$left" ]; then
        echo "test.sh: links into the build cache left in the checkout: $left" >&2
        status=1
    fi
    exit "$status"
fi

use_build_cache() {
    [ "${FPCTL_STABLE_CHECKOUT:-}" = 1 ] && mkdir -p "$cache/builds" 2>/dev/null && [ -w "$cache/builds" ] || return 0
    local key dir build
    key=$({ swift --version 2>&1; grep -h '\.package(' Package.swift Fuzz/Package.swift; } | sha256sum | cut -c1-16)
    dir=$cache/builds/$key
    for build in .build .build-static Fuzz/.build; do
        if [ ! -e "$build" ] && [ ! -L "$build" ]; then
            mkdir -p "$dir/${build//\//-}"
            ln -s "$dir/${build//\//-}" "$build"
        fi
    done
    exec 9>"$dir.lock"
    flock 9
    touch "$dir"
    # Keys beyond the three newest go, unless a run holds them.
    local old
    for old in $(ls -1dt "$cache"/builds/*/ | tail -n +4); do
        (flock -n 7 && rm -rf "$old") 7>"${old%/}.lock" || true
    done
}
use_build_cache

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
    swift format lint --strict --recursive Sources Tests Package.swift Fuzz/Sources Fuzz/Package.swift \
        FlowPilotPlugins/Package.swift FlowPilotPlugins/Plugins Examples/PluginApp/Package.swift \
        Examples/PluginApp/Sources Examples/PluginApp/Tests Benchmarks/HTTPFloor/Package.swift Benchmarks/HTTPFloor/Sources
    # Linux-only code stays in Platform.swift, so the code builds on macOS too (Tests/ in #if branches).
    Scripts/portability-lint.sh
    # A test waits for a condition, never for time to pass (CONTRIBUTING.md, "Tests that force").
    python3 Scripts/sleep-lint.py Tests
    python3 Scripts/bytes-lint.py Sources Fuzz/Sources
    # The core's folders depend on each other without a cycle (CONTRIBUTING.md, "Layout").
    python3 Scripts/folder-cycles.py Sources/FlowPilotCore
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
# The static release build (the install, the packages, the Debian roots) and the
# fuzz targets' sanitizer build, side by side: a release build compiles each
# module whole on one core for much of its time, which leaves the other to the
# fuzz build.
release_and_fuzz_builds() {
    local release fuzz status=0
    Scripts/install.sh --build-only >.build/release-build.log 2>&1 &
    release=$!
    Scripts/fuzz.sh build &
    fuzz=$!
    wait "$release" || { status=1; tail -40 .build/release-build.log >&2; }
    wait "$fuzz" || status=1
    return $status
}
debian() {
    Scripts/check-debian.sh
}
# The image (Containerfile, Scripts/image.sh) and the fleet path as docs/fleet.md
# shows it: the Kubernetes manifests validated and their Job run under podman,
# SIGTERM mid-run, the GitHub Actions workflow (Tests/fleet/fleet.py).
fleet() {
    Scripts/install-deps.sh image fleet
    export CONTAINERS_CONF=$PWD/packaging/container/containers.conf
    Tests/fleet/base-image.sh
    local image
    image=$(Scripts/image.sh)
    python3 Tests/fleet/fleet.py --fpctl .build/debug/fpctl --image "$image"
}
release_binary() {
    echo "$(swift build -c release --static-swift-stdlib --scratch-path .build-static --show-bin-path)/fpctl"
}
powercut() {
    /usr/bin/python3 Tests/powercut/powercut.py --fpctl .build/debug/fpctl --cuts "${FPCTL_POWER_CUTS:-20}" --identities 300
    # Cache format 1 (FPCTL_CACHE_FORMAT=1): warm and put cut the same ways.
    /usr/bin/python3 Tests/powercut/powercut.py --fpctl .build/debug/fpctl --cuts "${FPCTL_POWER_CUTS_1:-10}" \
        --format 1 --skip-build
}
blockcut() {
    /usr/bin/python3 Tests/powercut/blockcut.py --fpctl .build/debug/fpctl --cuts "${FPCTL_BLOCK_CUTS:-8}"
}

stage deps Scripts/install-deps.sh deb powercut man findings
if [ "$(id -u)" = 0 ]; then
    Scripts/debian-roots.sh >.build/debian-roots.log 2>&1 &
    roots=$!
    trap 'kill "$roots" 2>/dev/null || true' EXIT
fi
stage lint lint
# The project's targets treat warnings as errors (Package.swift), so this build is warning-free.
stage build swift build --build-tests
# The release and fuzz builds start now, at the lowest CPU priority, and take
# what the tests leave idle (the tests wait on servers and processes for much
# of their time); the builds stage then waits for what is left of them.
(renice -n 19 "$BASHPID" >/dev/null && release_and_fuzz_builds) &
builds_job=$!
trap 'kill ${roots:-} "$builds_job" 2>/dev/null || true' EXIT
stage test unit_tests
stage builds wait "$builds_job"
# The install and the release tarball (docs/install.md), from the static release build.
stage install Scripts/check-install.sh
# The rest runs in three lines beside each other: the checks that mostly wait
# (containers, a backend's latency, an example app's build; apt in the Debian
# roots) beside the CPU-bound fuzzing, power cuts and faults. Each background
# line's log is printed when it ends. (dist/'s files are renamed into place,
# so the image build reads a whole .deb while check-debian.sh packages again.)
# The image (Containerfile, Scripts/image.sh) and the fleet path as docs/fleet.md
# shows it, then the artifact bundle and the SwiftPM plugins in an app's build
# (docs/app-build.md: Examples/PluginApp built offline with the build-tool
# plugin, no fpctl source compiled).
waiting_checks() {
    stage fleet fleet
    stage plugin Scripts/check-plugin.sh
}
# The Debian roots' fetch (long done by now) is waited for here: a background
# line cannot wait for its parent's job. A failed fetch is retried, and
# reported, by check-debian.sh.
[ -z "${roots:-}" ] || wait "$roots" || true
(waiting_checks >.build/waiting.log 2>&1) &
waiting_job=$!
# The same bundle bytes on Debian 12 and 13, and the .deb installed there (docs/install.md).
(stage debian debian >.build/debian.log 2>&1) &
debian_job=$!
trap 'kill ${roots:-} "$waiting_job" "$debian_job" 2>/dev/null || true' EXIT
# Fuzzing (CONTRIBUTING.md, "Fuzzing"): every regression input and committed seed, then a short run of each target.
stage fuzz env FPCTL_FUZZ_BUILT=1 Scripts/fuzz.sh all "${FPCTL_FUZZ_SECONDS:-5}"
# Power cuts during warm, put and bundle build on a FUSE file system that drops
# whatever was not synced (docs/cache-format.md, "Durability"): nothing reported may be lost.
stage powercut powercut
# The same under ext4 on a disk that forgets unflushed writes: the syncfs commit,
# which a FUSE file system never sees (docs/cache-format.md, "Group commit").
stage blockcut blockcut
# The fault campaign, small (CONTRIBUTING.md, "Fault campaign", has a full run's figures),
# with the release build the packages ship, once the Debian line is done (as
# it used to run, beside the fleet line only): with apt and the chroots'
# builds beside it, its last warm once missed 54 of 2,000 rows' images under
# the 2 s limit it then had (it has 30 s now: it checks what is kept).
debian_status=0
wait "$debian_job" || debian_status=$?
stage faults python3 Tests/faults/fault_campaign.py --fpctl "$(release_binary)" --identities 1000 --kills 5
waiting_status=0
wait "$waiting_job" || waiting_status=$?
cat .build/waiting.log
cat .build/debian.log
[ "$waiting_status" = 0 ] || { echo "stage fleet or plugin failed" >&2; exit "$waiting_status"; }
[ "$debian_status" = 0 ] || { echo "stage debian failed" >&2; exit "$debian_status"; }
awk -v a="$run_started" -v b="$(now)" 'BEGIN { printf "stage total %.1f\n", b - a }' | tee -a .build/stage-times.txt
