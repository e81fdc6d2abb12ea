#!/usr/bin/env bash
# Regenerates the committed man pages (man/man1/*.1, man/man5/*.5) with
# Scripts/man.py, from the fpctl commands' own help, man/src/*.md and the two
# format documents in docs/. The date is pinned (man/DATE) so the pages are
# reproducible; change it when you mean to.
#   Scripts/update-man.sh          rewrite man/man1 and man/man5
#   Scripts/update-man.sh --check  exit 1, naming the stale pages, when they differ
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product fpctl >/dev/null
exec python3 Scripts/man.py "$(swift build --show-bin-path)/fpctl" "$@"
