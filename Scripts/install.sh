#!/usr/bin/env bash
# Scripts/install.sh [--prefix DIR]   (default /usr/local)
# Scripts/install.sh --build-only     (the build, nothing installed)
#
# Builds a release fpctl with the Swift standard library and Foundation linked
# in statically (--static-swift-stdlib), so the binary needs no Swift toolchain:
# only the C library and Debian's libarchive with its dependencies
# (docs/install.md). Installs
#   PREFIX/bin/fpctl
#   PREFIX/share/man/man1/*.1        every command's page, named as git names its own (fpctl-warm.1)
#   PREFIX/share/man/man5/*.5        fpctl-bundle(5) and fpctl-cache(5), the two file formats
#   PREFIX/share/bash-completion/completions/fpctl
#   PREFIX/share/zsh/site-functions/_fpctl
#   PREFIX/share/fish/vendor_completions.d/fpctl.fish
# The build lives in .build-static, apart from the everyday one.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local
build_only=false
while [ $# -gt 0 ]; do
    case "$1" in
    --build-only) build_only=true; shift ;;
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (usage: Scripts/install.sh [--prefix DIR | --build-only])" >&2; exit 64 ;;
    esac
done
Scripts/install-deps.sh
build=(swift build -c release --static-swift-stdlib --scratch-path .build-static --product fpctl)
"${build[@]}" >/dev/null
[ "$build_only" = false ] || exit 0
binary=$("${build[@]}" --show-bin-path)/fpctl

install -d "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/man/man5" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
install -m 0755 -s "$binary" "$prefix/bin/fpctl"  # stripped: 168 MB of symbols otherwise
install -m 0644 man/man1/*.1 "$prefix/share/man/man1/"
install -m 0644 man/man5/*.5 "$prefix/share/man/man5/"
"$prefix/bin/fpctl" --generate-completion-script bash >"$prefix/share/bash-completion/completions/fpctl"
"$prefix/bin/fpctl" --generate-completion-script zsh >"$prefix/share/zsh/site-functions/_fpctl"
"$prefix/bin/fpctl" --generate-completion-script fish >"$prefix/share/fish/vendor_completions.d/fpctl.fish"
echo "installed fpctl $("$prefix/bin/fpctl" --version) into $prefix"
