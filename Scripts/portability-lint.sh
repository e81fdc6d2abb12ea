#!/usr/bin/env bash
# Fails when Linux-only code sits outside Sources/FlowPilotCore/Files/Platform.swift,
# the one file that tests for the platform (docs/decisions.md, "Portability";
# docs/install.md, "macOS"): a `Glibc.` call, a glibc-only symbol or field, or a
# /proc path, in code (comments may name them). What it cannot see (an API
# Foundation has only on Linux) is for a build on a Mac.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='Glibc\.|__sigaction_handler|__rlimit_resource|"/proc|O_TMPFILE|syncfs\(|posix_fadvise|posix_fallocate|sched_getaffinity|st_mtim\b|st_atim\b|st_ctim\b|statx\(|memfd_create|copy_file_range|renameat2|SOCK_CLOEXEC|accept4|pipe2\(|epoll_|inotify_|prctl\(|malloc_trim|mallinfo|mallopt'
found=$(grep -rnE "$pattern" Sources --include='*.swift' | grep -v '^Sources/FlowPilotCore/Files/Platform.swift:' |
    grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$found" ]; then
    echo "Linux-only code outside Sources/FlowPilotCore/Files/Platform.swift (put it there, with the Darwin branch beside it):" >&2
    echo "$found" >&2
    exit 1
fi
# The tests compile on macOS too: in Tests/, a glibc-only name is allowed only
# inside an `#if canImport(Glibc)` (or `#if os(Linux)`) branch, beside which an
# `#elseif canImport(Darwin)` gives the Mac's. (Runtime paths such as /proc are
# fine there: the tests that read them run on Linux.)
if [ -d Tests ]; then
    found=$(find Tests -name '*.swift' -print0 | sort -z | xargs -0 awk '
        FNR == 1 { depth = 0; linux = 0 }
        /^[[:space:]]*#if/ { depth++; if ($0 ~ /canImport\(Glibc\)|os\(Linux\)/) linux = depth }
        /^[[:space:]]*#(elseif|else)/ { if (linux == depth) linux = 0 }
        /^[[:space:]]*#endif/ { if (linux == depth) linux = 0; depth-- }
        # Code, not a comment, nor a string literal (an odd number of quotes before the name).
        !/^[[:space:]]*\/\// && !linux &&
            match($0, /Glibc\.|__sigaction_handler|__rlimit_resource|st_mtim[^a-z_]|st_atim[^a-z_]|st_ctim[^a-z_]/) {
            before = substr($0, 1, RSTART - 1)
            if (gsub(/"/, "", before) % 2 == 0) print FILENAME ":" FNR ": " $0
        }')
    if [ -n "$found" ]; then
        echo "glibc-only code in Tests/ outside an #if canImport(Glibc) branch (add the Darwin one beside it):" >&2
        echo "$found" >&2
        exit 1
    fi
fi
