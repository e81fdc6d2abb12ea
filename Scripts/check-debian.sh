#!/usr/bin/env bash
# Scripts/check-debian.sh: the same bundle bytes on Debian 12 and 13, and the
# .deb installed as a user would (run by Scripts/test.sh; needs root).
#
#   - Scripts/package.sh writes dist/fpctl_VERSION_ARCH.deb; lintian checks it;
#   - the host builds bundles/demo, bundles/travel and a generated 300-flow
#     source with the packaged binary, and their SHA-256s must be the pinned ones
#     (Tests/fpctlTests/Fixtures/pinned-bundles.sha256);
#   - for Debian 12 (bookworm) and 13 (trixie), a minbase root made by
#     debootstrap, kept in $FPCTL_TEST_CACHE (default /var/cache/fpctl-test) so
#     a second run downloads nothing but what changed; each run works in a copy:
#       - `apt-get install ./fpctl_….deb` pulls libarchive and libdeflate;
#       - `man fpctl-warm` renders and the completions are where Debian looks;
#       - inside the root: build the three sources, validate each, compare each
#         byte for byte with the host's; validate and extract the host's bundles;
#       - without /proc mounted (a bare chroot), fpctl refuses with one line
#         and status 1: a missing bundle never "validates".
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "check-debian: needs root (debootstrap, chroot)" >&2; exit 1; }
Scripts/install-deps.sh deb
cache=${FPCTL_TEST_CACHE:-/var/cache/fpctl-test}
work=$(mktemp -d)
mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-debian: $*" >&2; exit 1; }
started=$SECONDS

# The package, and lintian's word on it.
Scripts/package.sh >/dev/null
deb=$(ls -t dist/fpctl_*.deb | head -1)
lintian --fail-on error,warning --suppress-tags-from-file packaging/debian/lintian-overrides.txt "$deb" ||
    fail "lintian finds errors or warnings in $deb"

# The host's bundles, from the packaged binary, against the pinned digests.
dpkg-deb -x "$deb" "$work/host"
fpctl=$work/host/usr/bin/fpctl
mkdir -p "$work/sources" "$work/bundles"
cp -r bundles/demo bundles/travel "$work/sources/"
python3 Tests/fpctlTests/Fixtures/make-large-source.py "$work/sources/large"
for name in demo travel large; do
    SOURCE_DATE_EPOCH= "$fpctl" bundle build "$work/sources/$name" -o "$work/bundles/$name.fpbundle" >/dev/null 2>&1
done
(cd "$work/bundles" && sha256sum --quiet -c "$OLDPWD/Tests/fpctlTests/Fixtures/pinned-bundles.sha256") ||
    fail "the host's bundles are not the pinned bytes"

# The pristine roots (made once, kept in $cache: Scripts/debian-roots.sh).
Scripts/debian-roots.sh bookworm trixie

# Runs a command inside the root with a clean environment.
inside() {
    local root=$1
    shift
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root \
        DEBIAN_FRONTEND=noninteractive "$@"
}

check_release() {
    local suite=$1 t0=$SECONDS
    local root=$work/$suite
    cp -a "$cache/$suite" "$root"
    mount --bind "$cache/$suite-apt" "$root/var/cache/apt/archives" && mounts+=("$root/var/cache/apt/archives")
    mount -t proc proc "$root/proc" && mounts+=("$root/proc")
    cp "$deb" "$root/tmp/"
    local debfile=/tmp/$(basename "$deb")
    # The lists the root was made with may name versions the archive has since
    # replaced: update them when an install cannot find its packages.
    if ! inside "$root" apt-get install -y -qq "$debfile" man-db >"$work/apt-$suite.log" 2>&1; then
        inside "$root" apt-get update -qq >>"$work/apt-$suite.log" 2>&1 || true
        inside "$root" apt-get install -y -qq "$debfile" man-db >>"$work/apt-$suite.log" 2>&1 ||
            fail "$suite: apt-get install ./$(basename "$deb") failed: $(tail -5 "$work/apt-$suite.log")"
    fi
    local libs
    libs=$(inside "$root" dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' 'libarchive13*' libdeflate0 zlib1g |
        awk '$1 == "ii" { print $2, $3 }')
    inside "$root" sh -c 'MANWIDTH=80 man fpctl-warm 2>/dev/null' | grep -q "Prefetch placements into a cache" ||
        fail "$suite: man fpctl-warm does not render"
    [ -f "$root/usr/share/bash-completion/completions/fpctl" ] || fail "$suite: no bash completion"

    mkdir -p "$root/work"
    cp -r "$work/sources" "$root/work/"
    cp -r "$work/bundles" "$root/work/host"
    mkdir -p "$root/work/out"
    for name in demo travel large; do
        inside "$root" fpctl bundle build "/work/sources/$name" -o "/work/out/$name.fpbundle" >/dev/null 2>&1 ||
            fail "$suite: bundle build $name failed"
        inside "$root" fpctl bundle validate "/work/out/$name.fpbundle" >/dev/null ||
            fail "$suite: its own $name bundle does not validate: $(inside "$root" fpctl bundle validate "/work/out/$name.fpbundle" | head -3)"
        cmp "$root/work/out/$name.fpbundle" "$work/bundles/$name.fpbundle" ||
            fail "$suite: $name.fpbundle differs from the host's build"
        inside "$root" fpctl bundle validate "/work/host/$name.fpbundle" >/dev/null ||
            fail "$suite: the host's $name bundle does not validate"
        inside "$root" fpctl bundle extract "/work/host/$name.fpbundle" -o "/work/extracted-$name" >/dev/null 2>&1 ||
            fail "$suite: the host's $name bundle does not extract"
        cmp "$root/work/extracted-$name/flows/$(ls "$work/sources/$name/flows" | head -1)" \
            "$work/sources/$name/flows/$(ls "$work/sources/$name/flows" | head -1)" ||
            fail "$suite: an extracted flow differs from its source"
    done

    # No /proc: the Swift runtime can neither read the arguments nor run its
    # thread pool safely, so fpctl refuses with one line; never help and 0.
    umount "$root/proc"
    local status
    for bundle in /work/no-such.fpbundle /work/out/demo.fpbundle; do
        status=0
        inside "$root" fpctl bundle validate "$bundle" >"$work/noproc.out" 2>&1 || status=$?
        [ "$status" = 1 ] && [ "$(wc -l <"$work/noproc.out")" = 1 ] &&
            grep -q "^fpctl: error: /proc is not mounted" "$work/noproc.out" ||
            fail "$suite without /proc: validate $bundle exits $status: $(head -3 "$work/noproc.out")"
    done

    echo "debian $suite: $(tr '\n' ',' <<<"$libs" | sed 's/,$//; s/,/, /g'); 3 bundles built byte-identical to the host's and validated, host's validated and extracted, man page, refuses without /proc ($((SECONDS - t0)) s)"
}

check_release bookworm
check_release trixie
echo "check-debian ok: $(basename "$deb"), lintian clean, pinned bytes on the host ($((SECONDS - started)) s in all)"
