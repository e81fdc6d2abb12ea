#!/usr/bin/env bash
# Scripts/check-install.sh: the install and the release tarball, checked as a
# user would meet them (run by Scripts/test.sh).
#   - Scripts/install.sh into a temporary prefix;
#   - the installed fpctl --version, with an empty environment;
#   - ldd of it lists nothing from the Swift toolchain;
#   - MANPATH=PREFIX/share/man man fpctl-warm and man 5 fpctl-bundle render;
#   - bash completion of `fpctl bundle va` offers validate;
#   - Scripts/package.sh twice gives the same bytes (the tarball and the .deb).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "check-install: $*" >&2; exit 1; }

Scripts/install-deps.sh man deb
Scripts/install.sh --prefix "$prefix" >/dev/null
version=$(env -i "$prefix/bin/fpctl" --version) || fail "the installed fpctl does not run with an empty environment"
[ "$version" = "$(.build/debug/fpctl --version 2>/dev/null || echo "$version")" ] || fail "version $version differs"

toolchain=$(dirname "$(dirname "$(command -v swift)")")
libraries=$(ldd "$prefix/bin/fpctl")
if grep -q -e "$toolchain" -e "libswift" -e "libFoundation" -e "libdispatch" <<<"$libraries"; then
    fail "the installed fpctl links the Swift toolchain:
$libraries"
fi
grep -q "not found" <<<"$libraries" && fail "missing libraries:
$libraries"

page=$(MANPATH="$prefix/share/man" MANWIDTH=80 man fpctl-warm 2>/dev/null | col -b) || fail "man fpctl-warm does not render"
grep -q "Prefetch placements into a cache directory" <<<"$page" || fail "man fpctl-warm is not warm's page"
grep -q "^EXIT STATUS" <<<"$page" || fail "man fpctl-warm has no EXIT STATUS"
format=$(MANPATH="$prefix/share/man" MANWIDTH=80 man 5 fpctl-bundle 2>/dev/null | col -b) || fail "man 5 fpctl-bundle does not render"
grep -q "central" <<<"$format" || fail "man 5 fpctl-bundle is not the bundle format"

offered=$(bash -c '
    source "$1/share/bash-completion/completions/fpctl"
    COMP_WORDS=(fpctl bundle va); COMP_CWORD=2; COMP_LINE="fpctl bundle va"; COMP_POINT=${#COMP_LINE}
    _fpctl fpctl va bundle
    printf "%s\n" "${COMPREPLY[@]}"' _ "$prefix")
grep -qx "validate" <<<"$offered" || fail "bash completion of 'fpctl bundle va' offers: $offered"

first=$(Scripts/package.sh)
second=$(Scripts/package.sh)
[ "$first" = "$second" ] || fail "two packages from one commit differ: $first / $second"
echo "install ok: fpctl $version, $(wc -l <<<"$libraries") libraries (none from the toolchain), man page, completion; packages:
$first"
