#!/usr/bin/env bash
# The Docker image's test (tests/test_docker_image.py) builds and runs the Dockerfile for real.
# No Docker daemon and no image registry are reachable here, so: Debian's podman (with runc: crun
# fails on this VM's hybrid cgroups; no default ulimits: they cannot be set here), and a stand-in
# for the `python:3.11-slim` base image made locally, once, and kept in podman's storage:
# a Debian bookworm minbase (debootstrap, from the mirror the machine's apt sources name) with
# this machine's CPython 3.11 in /usr/local, pip, and the machine's CA bundle, imported as
# localhost/python:3.11-slim. Idempotent; needs root (CI runs as root).
#
# Usage: scripts/install-podman.sh PYTHON   (a CPython 3.11 whose base prefix is not /usr)
set -euo pipefail

PYTHON=${1:-python3}
BASE_IMAGE=localhost/python:3.11-slim
CONF=/etc/containers/containers.conf.d/arc-retrieval.conf

if [ "$(id -u)" != 0 ]; then
  if ! command -v podman >/dev/null; then
    echo "install-podman: not root and podman is missing: the Docker image's test will be skipped" >&2
  fi
  exit 0
fi

if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends podman runc debootstrap uidmap >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends podman runc debootstrap uidmap >/dev/null
  }
fi

if [ ! -f "$CONF" ]; then
  mkdir -p "$(dirname "$CONF")"
  cat > "$CONF" <<'EOF'
# arc-retrieval's tests (scripts/install-podman.sh): crun fails on this VM's hybrid cgroups, and
# the default ulimits cannot be set in it.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
fi

if podman image exists "$BASE_IMAGE"; then
  exit 0
fi

# The Debian mirror is the machine's own, read from its apt sources as every installer reads it
# (without one, debian-mirror.sh says so in one line and this script stops).
MIRROR=$("$(dirname "$0")/debian-mirror.sh")

PREFIX=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
VERSION=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$VERSION" != 3.11 ] || [ "$PREFIX" = /usr ]; then
  echo "install-podman: needs a self-contained CPython 3.11 (got $VERSION in $PREFIX)" >&2
  exit 1
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"
# The shared libraries CPython's modules link to, as in the official slim image.
debootstrap --variant=minbase \
  --include=libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,libgdbm6,libuuid1,libexpat1,netbase,tzdata \
  bookworm "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -20 "$WORK/debootstrap.log" >&2; echo "install-podman: debootstrap failed" >&2; exit 1; }
cp -r /etc/apt/sources.list.d/. "$ROOTFS/etc/apt/sources.list.d/"
[ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$ROOTFS/etc/apt/sources.list"
rm -f "$ROOTFS"/etc/apt/sources.list.d/*.disabled* 2>/dev/null || true
mkdir -p "$ROOTFS/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"

# CPython: the interpreter, its shared library and its standard library, without site-packages
# (pip comes from ensurepip) and without the test suite.
mkdir -p "$ROOTFS/usr/local/bin" "$ROOTFS/usr/local/lib"
cp -a "$PREFIX/bin/python$VERSION" "$ROOTFS/usr/local/bin/"
ln -sf "python$VERSION" "$ROOTFS/usr/local/bin/python3"
ln -sf "python$VERSION" "$ROOTFS/usr/local/bin/python"
cp -a "$PREFIX"/lib/libpython3* "$ROOTFS/usr/local/lib/" 2>/dev/null || true
tar -C "$PREFIX/lib" --exclude="python$VERSION/site-packages" --exclude="python$VERSION/test" \
  --exclude="python$VERSION/idlelib" --exclude="python$VERSION/tkinter" --exclude='__pycache__' \
  -cf - "python$VERSION" | tar -C "$ROOTFS/usr/local/lib" -xf -
mkdir -p "$ROOTFS/usr/local/lib/python$VERSION/site-packages"
echo /usr/local/lib > "$ROOTFS/etc/ld.so.conf.d/usr-local.conf"
chroot "$ROOTFS" ldconfig
PIP_ROOT_USER_ACTION=ignore chroot "$ROOTFS" /usr/local/bin/python3 -m ensurepip --upgrade >/dev/null
ln -sf pip3 "$ROOTFS/usr/local/bin/pip"
chroot "$ROOTFS" /usr/local/bin/python3 -c 'import ssl, sqlite3, ctypes, bz2, lzma, zlib, uuid, pip'
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

tar -C "$ROOTFS" -c . | podman import \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["python3"]' \
  - "$BASE_IMAGE" >/dev/null
echo "install-podman: made $BASE_IMAGE"
