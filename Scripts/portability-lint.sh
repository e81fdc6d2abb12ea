#!/usr/bin/env bash
# Fails when Linux-only code sits outside Sources/FlowPilotCore/Files/Platform.swift,
# the one file that tests for the platform (docs/decisions.md, "Portability";
# docs/install.md, "macOS"): a `Glibc.` call, a glibc-only symbol or field, or a
# /proc path, in code (comments may name them). What it cannot see (an API
# Foundation has only on Linux) is for a build on a Mac.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='Glibc\.|__sigaction_handler|__rlimit_resource|"/proc|O_TMPFILE|syncfs\(|posix_fadvise|posix_fallocate|sched_getaffinity|st_mtim\b|st_atim\b|st_ctim\b|statx\(|memfd_create|copy_file_range|renameat2|SOCK_CLOEXEC|accept4|pipe2\(|epoll_|inotify_|prctl\(|malloc_trim|mallinfo'
found=$(grep -rnE "$pattern" Sources --include='*.swift' | grep -v '^Sources/FlowPilotCore/Files/Platform.swift:' |
    grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$found" ]; then
    echo "Linux-only code outside Sources/FlowPilotCore/Files/Platform.swift (put it there, with the Darwin branch beside it):" >&2
    echo "$found" >&2
    exit 1
fi
