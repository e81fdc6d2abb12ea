#!/usr/bin/env bash
# Scripts/soak.sh: the long campaigns at full size, for a machine that can spare
# an hour or more (CONTRIBUTING.md, "Soak"). CI (Scripts/test.sh) runs the same
# three with the same checks, only shorter: every regression input and seed is
# replayed there too; what moves here is the length of the random exploration.
#
#   - every fuzz target for FPCTL_SOAK_FUZZ_SECONDS each (default 300: an hour
#     for the twelve), from the working corpus earlier runs grew;
#   - FPCTL_SOAK_POWER_CUTS power cuts of each command (default 200);
#   - the fault campaign at its full size: 10,000 identities, 50 kills
#     (FPCTL_SOAK_IDENTITIES, FPCTL_SOAK_KILLS);
#   - many writers on one cache (Tests/soak/many_writers.py): 8 cache put
#     processes over 100,000 keys, killed and restarted, with prunes and
#     verifies beside them (FPCTL_SOAK_WRITERS, FPCTL_SOAK_KEYS,
#     FPCTL_SOAK_CHAOS_SECONDS, default 300).
#
# Uses the release build (`swift build -c release`). Prints "stage NAME
# SECONDS" per campaign as Scripts/test.sh does; record the figures in
# docs/soak.md after a run.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh powercut
swift build -c release --product fpctl >/dev/null
fpctl=$(swift build -c release --show-bin-path)/fpctl
stage() {
    local name=$1 started=$SECONDS
    shift
    "$@"
    echo "stage $name $((SECONDS - started))"
}
stage fuzz Scripts/fuzz.sh all "${FPCTL_SOAK_FUZZ_SECONDS:-300}"
stage powercut /usr/bin/python3 Tests/powercut/powercut.py --fpctl "$fpctl" --cuts "${FPCTL_SOAK_POWER_CUTS:-200}"
stage blockcut /usr/bin/python3 Tests/powercut/blockcut.py --fpctl "$fpctl" --cuts "${FPCTL_SOAK_BLOCK_CUTS:-100}"
stage faults python3 Tests/faults/fault_campaign.py --fpctl "$fpctl" \
    --identities "${FPCTL_SOAK_IDENTITIES:-10000}" --kills "${FPCTL_SOAK_KILLS:-50}" --seed "${FPCTL_SOAK_SEED:-$RANDOM}"
stage writers python3 Tests/soak/many_writers.py --fpctl "$fpctl" --writers "${FPCTL_SOAK_WRITERS:-8}" \
    --keys "${FPCTL_SOAK_KEYS:-100000}" --chaos-seconds "${FPCTL_SOAK_CHAOS_SECONDS:-300}"
