#!/usr/bin/env bash
# Tests/orphans.sh FPCTL: the servers a test starts die with the test run, even
# when the test process crashes. Scripts/test.sh runs `swift test` in a PID
# namespace of its own (unshare --pid --kill-child): when the run ends, the
# kernel kills everything left in it, so no `fpctl serve` outlives a crashed
# test holding its port. This check crashes a shell that started a server, in
# such a namespace and outside one, and expects an orphan only outside.
set -euo pipefail
fpctl=$(realpath "$1")
# A TTL no other server uses marks this check's servers.
ttl=$((700000 + $$ % 100000))
bundle=$(realpath "$(dirname "$0")/../bundles/demo")
start() { "$fpctl" serve "$bundle" --port 0 -q --ttl "$ttl" >/dev/null 2>&1 & sleep 1; kill -SEGV $$; }
export -f start
export fpctl ttl bundle
# Inside a namespace, as test.sh runs the tests: nothing is left.
unshare --pid --fork --mount-proc --kill-child bash -c start >/dev/null 2>&1 || true
sleep 0.5
if pgrep -f -- "$fpctl serve .*--ttl $ttl" >/dev/null; then
    pkill -f -- "$fpctl serve .*--ttl $ttl" || true
    echo "orphans: a server outlived its crashed test run inside the namespace" >&2
    exit 1
fi
# Outside one, the same crash leaves the server running: the check can fail.
bash -c start >/dev/null 2>&1 || true
sleep 0.5
if ! pgrep -f -- "$fpctl serve .*--ttl $ttl" >/dev/null; then
    echo "orphans: the control crash left no server, so the check proves nothing" >&2
    exit 1
fi
pkill -f -- "$fpctl serve .*--ttl $ttl" || true
echo "orphans ok: a crashed run leaves no server inside its PID namespace (and one outside it)"
