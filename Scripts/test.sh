#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: installs the Debian packages the
# build and the tests need when they are missing, builds, refreshes the
# generate-manual tool the man page test uses, and runs `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build --build-tests
# Builds generate-manual-tool for the man page staleness test (pages land in .build only).
swift package plugin generate-manual --multi-page --date "$(cat man/DATE)" --configuration debug >/dev/null
swift test
