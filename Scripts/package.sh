#!/usr/bin/env bash
# Scripts/package.sh
#
# Writes, from one static release build (Scripts/install.sh):
#   dist/fpctl-VERSION-linux-ARCH.tar.gz and its .sha256: bin/, share/man, the
#     completions under fpctl-VERSION/, for a build pipeline to pin and check;
#   dist/fpctl_VERSION_DEBARCH.deb and its .sha256: the same files where Debian
#     puts them (/usr/bin, gzipped man pages, Debian's completion directories),
#     for `apt-get install ./fpctl_VERSION_DEBARCH.deb`, which pulls libarchive and
#     libdeflate by itself (Depends from dpkg-shlibdeps: libarchive13, which
#     Debian 13's libarchive13t64 provides).
# Both are reproducible: two runs from the same commit give the same bytes
# (entries sorted by name, owner and group 0, every mtime the commit's time,
# gzip without a name or time stamp).
# Each file is written in a scratch directory and renamed into dist/, so a
# reader beside a run (Scripts/image.sh, Scripts/check-debian.sh) sees the old
# file or the new one, never half of one.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
Scripts/install.sh --prefix "$stage/root" >/dev/null
version=$("$stage/root/bin/fpctl" --version)
arch=$(uname -m)
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 315532800)
mkdir -p dist "$stage/out"

# The tarball.
name=fpctl-$version-linux-$arch
cp -a "$stage/root" "$stage/$name"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$stage" -cf - "$name" | gzip -9 -n >"$stage/out/$name.tar.gz"
(cd "$stage/out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")

# The Debian package.
debarch=$(dpkg --print-architecture)
deb=$stage/deb
install -d "$deb/DEBIAN" "$deb/usr/bin" "$deb/usr/share/man/man1" "$deb/usr/share/man/man5" \
    "$deb/usr/share/doc/fpctl" "$deb/usr/share/bash-completion/completions" \
    "$deb/usr/share/zsh/vendor-completions" "$deb/usr/share/fish/vendor_completions.d"
install -m 0755 "$stage/root/bin/fpctl" "$deb/usr/bin/fpctl"
for section in 1 5; do
    for page in "$stage/root/share/man/man$section"/*."$section"; do
        gzip -9 -n <"$page" >"$deb/usr/share/man/man$section/$(basename "$page").gz"
    done
done
# A completion is sourced, not run: no #! line (lintian's bash-completion-with-hashbang).
sed '1{/^#!/d}' "$stage/root/share/bash-completion/completions/fpctl" >"$deb/usr/share/bash-completion/completions/fpctl"
chmod 0644 "$deb/usr/share/bash-completion/completions/fpctl"
install -m 0644 "$stage/root/share/zsh/site-functions/_fpctl" "$deb/usr/share/zsh/vendor-completions/_fpctl"
install -m 0644 "$stage/root/share/fish/vendor_completions.d/fpctl.fish" \
    "$deb/usr/share/fish/vendor_completions.d/fpctl.fish"
install -m 0644 packaging/debian/copyright "$deb/usr/share/doc/fpctl/copyright"
sed "s/@VERSION@/$version/; s/@DATE@/$(LC_ALL=C date -u -d "@$epoch" -R)/" packaging/debian/changelog |
    gzip -9 -n >"$deb/usr/share/doc/fpctl/changelog.gz"
chmod 0644 "$deb/usr/share/doc/fpctl/changelog.gz"
# dpkg-shlibdeps reads the shared libraries' shlibs/symbols files and wants a
# debian/control to stand in; it prints the Depends the binary needs.
mkdir -p "$stage/shlibs/debian"
printf 'Source: fpctl\n\nPackage: fpctl\nArchitecture: any\n' >"$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$deb/usr/bin/fpctl" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --apparent-size "$deb/usr" | cut -f1)
sed "s/@VERSION@/$version/; s/@ARCH@/$debarch/; s/@DEPENDS@/$depends/; s/@SIZE@/$size/" \
    packaging/debian/control >"$deb/DEBIAN/control"
(cd "$deb" && find usr -type f | LC_ALL=C sort | xargs md5sum >DEBIAN/md5sums)
chmod 0644 "$deb/DEBIAN/control" "$deb/DEBIAN/md5sums"
find "$deb" -type d -exec chmod 0755 {} +
find "$deb" -exec touch -h -d "@$epoch" {} +
debname=fpctl_${version}_$debarch.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$deb" "$stage/out/$debname" >/dev/null
(cd "$stage/out" && sha256sum "$debname" >"$debname.sha256")

# Into dist/: copied beside the final name (the scratch directory may be on
# another file system), then renamed over it.
for file in "$name.tar.gz" "$name.tar.gz.sha256" "$debname" "$debname.sha256"; do
    cp "$stage/out/$file" "dist/.$file.partial"
    mv -f "dist/.$file.partial" "dist/$file"
done
cat "dist/$name.tar.gz.sha256" "dist/$debname.sha256"
