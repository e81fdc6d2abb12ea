#!/usr/bin/env bash
# Regenerates the committed man pages (man/man1/*.1) from the fpctl commands with
# swift-argument-parser's generate-manual plugin. The date is pinned (man/DATE) so
# the pages are reproducible; change it when you mean to.
#   Scripts/update-man.sh          rewrite man/man1
#   Scripts/update-man.sh --check  exit 1, naming the stale pages, when they differ
set -euo pipefail
cd "$(dirname "$0")/.."
date=$(cat man/DATE)
# generate-manual builds fpctl and runs it with --experimental-dump-help.
swift package plugin generate-manual --multi-page --date "$date" --configuration debug >/dev/null
generated=.build/plugins/GenerateManual/outputs/fpctl
if [ "${1:-}" = "--check" ]; then
  if ! diff -r -q "$generated" man/man1; then
    echo "man pages are stale: run Scripts/update-man.sh" >&2
    exit 1
  fi
  exit 0
fi
rm -rf man/man1 && mkdir -p man/man1 && cp "$generated"/*.1 man/man1/
echo "man/man1: $(ls man/man1 | wc -l) pages"
