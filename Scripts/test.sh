#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: installs the Debian packages the
# build and the tests need when they are missing, lints with swift format,
# builds (warnings are errors in the project's own targets), refreshes the
# generate-manual tool the man page test uses, and runs `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
# Style: .swift-format (Sources forbid force unwraps; Tests/.swift-format allows them).
swift format lint --strict --recursive Sources Tests Package.swift
# The project's targets treat warnings as errors (Package.swift), so this build is warning-free.
swift build --build-tests
# Builds generate-manual-tool for the man page staleness test (pages land in .build only).
swift package plugin generate-manual --multi-page --date "$(cat man/DATE)" --configuration debug >/dev/null
swift test
