#!/usr/bin/env bash
# Scripts/fuzz.sh [TARGET|all|build] [SECONDS]
#
# Builds the libFuzzer targets in Fuzz/ (libFuzzer + AddressSanitizer) and runs
# TARGET (default: all of them, one after another) for SECONDS each (default 60).
# Targets: json bundle flow rules identities cache keys units resolve proxy media preview paths options.
# `build` only builds them (Scripts/test.sh runs it beside the release build).
#
# Each target first replays, once each, every input that once failed
# (Fuzz/Regressions/TARGET) and every committed seed (Fuzz/Corpus/TARGET): what
# guards behaviour runs whatever SECONDS is. Then it mutates the seeds (never
# written to) into a working corpus under Fuzz/.build/corpus/TARGET that grows
# across runs, for SECONDS.
# A crash, leak, timeout or failed property stops the target and leaves its
# input in Fuzz/.build/artifacts/TARGET/; the script then exits 1. Copy such an
# input to Fuzz/Regressions/TARGET and add a unit test for it before fixing the
# bug (CONTRIBUTING.md, "Fuzzing").
#
# Prints one line per target: executions, coverage (edges), features and
# corpus size, from libFuzzer's final statistics.
set -euo pipefail
cd "$(dirname "$0")/../Fuzz"

all=(json bundle flow rules identities cache keys units resolve proxy media preview paths options)
which=${1:-all}
seconds=${2:-60}
case "$which" in
all | build) targets=("${all[@]}") ;;
*)
    if [[ " ${all[*]} " != *" $which "* ]]; then
        echo "fuzz.sh: unknown target '$which' (one of: ${all[*]}, all)" >&2
        exit 64
    fi
    targets=("$which")
    ;;
esac

binary() {
    case "$1" in
    json) echo FuzzJSON ;; bundle) echo FuzzBundle ;; flow) echo FuzzFlow ;; rules) echo FuzzRules ;;
    identities) echo FuzzIdentities ;; cache) echo FuzzCache ;; keys) echo FuzzKeys ;; units) echo FuzzUnits ;;
    resolve) echo FuzzResolveHandler ;; proxy) echo FuzzProxy ;; media) echo FuzzMedia ;; preview) echo FuzzPreview ;;
    paths) echo FuzzPaths ;; options) echo FuzzOptions ;;
    esac
}

# Largest input each target tries: a bundle needs room for a zip directory and
# a few entries; the others parse small documents.
max_len() {
    case "$1" in
    bundle) echo 16384 ;; resolve) echo 4096 ;; units | options) echo 64 ;; proxy) echo 512 ;; paths) echo 300 ;; *) echo 8192 ;;
    esac
}

# SwiftPM compiles in batch mode, where swiftc's -sanitize=fuzzer instruments C
# but leaves Swift code without coverage; naming the coverage kinds puts it back.
build=(swift build --sanitize=fuzzer --sanitize=address
    -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp)
mkdir -p .build
# FPCTL_FUZZ_BUILT=1: `fuzz.sh build` has just built them (Scripts/test.sh); do
# not build again. (With Fuzz/.build a link used from a clone's own path,
# SwiftPM compiled this package whole on every build; from the stable path
# Scripts/test.sh uses it builds incrementally, but once is enough.)
if [ "${FPCTL_FUZZ_BUILT:-0}" = 1 ] && [ "$which" != build ]; then
    :
elif ! "${build[@]}" >.build/fuzz-build.log 2>&1; then
    grep -E 'error' .build/fuzz-build.log >&2 || cat .build/fuzz-build.log >&2
    exit 1
fi
bin=$("${build[@]}" --show-bin-path 2>/dev/null)
[ "$which" != build ] || exit 0

# Swift's crash handler would otherwise sit on a crash instead of letting
# libFuzzer write the input out.
export SWIFT_BACKTRACE=enable=no
# Leaks are checked after every input that allocates more than it frees. Not at
# exit: what is still allocated then is the targets' globals (the demo server),
# whose tagged pointers LeakSanitizer cannot follow; lsan.supp explains the same
# for globals first touched by an input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:leak_check_at_exit=0}
export LSAN_OPTIONS=suppressions=$PWD/lsan.supp
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch

status=0
printf '%-11s %8s %8s %12s %8s %8s %8s  %s\n' target replayed seconds executions cov ft corpus result
for target in "${targets[@]}"; do
    work=.build/corpus/$target
    artifacts=.build/artifacts/$target
    mkdir -p "$work" "$artifacts"
    log=.build/fuzz-$target.log
    # Every input a fuzzer ever failed on (Regressions/TARGET), then every
    # committed seed (Corpus/TARGET), each run once.
    replay=()
    for dir in Regressions/"$target" Corpus/"$target"; do
        if [[ -d $dir ]]; then
            while IFS= read -r -d '' file; do replay+=("$file"); done < <(find "$dir" -type f -print0 | sort -z)
        fi
    done
    if [[ ${#replay[@]} -gt 0 ]] && ! "$bin/$(binary "$target")" -timeout=10 -rss_limit_mb=2048 "${replay[@]}" >"$log" 2>&1; then
        echo "$target: a regression or corpus input fails (log $PWD/$log): $(grep -m1 -E 'Running: |property failed|ERROR' "$log")" >&2
        status=1
        continue
    fi
    set +e
    "$bin/$(binary "$target")" "$work" "Corpus/$target" \
        -max_total_time="$seconds" -max_len="$(max_len "$target")" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
    corpus=$(find "$work" -type f | wc -l)
    if [[ $rc -eq 0 ]]; then
        result=ok
    else
        result="FAILED (exit $rc): $(ls -t "$artifacts" | head -1), log $PWD/$log"
        status=1
    fi
    printf '%-11s %8s %8s %12s %8s %8s %8s  %s\n' "$target" "${#replay[@]}" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" \
        "$result"
done
exit $status
