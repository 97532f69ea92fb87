#!/usr/bin/env bash
# Supabase's database combination for the test suite: PostgreSQL 15 (Debian's packages, from the
# machine's own sources) with pgvector 0.8.0 (Debian's source package in trixie, built against
# PG 15's pg_config; nothing else from trixie is installed). Idempotent; needs root for apt and
# `make install` (CI runs as root). Prints the PG 15 bin folder.
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG="$PG_BIN/pg_config"
EXTENSION_DIR=/usr/share/postgresql/15/extension

if [ "$(id -u)" != 0 ] && { [ ! -x "$PG_BIN/postgres" ] || [ ! -f "$EXTENSION_DIR/vector--0.8.0.sql" ]; }; then
  echo "install-postgres15: not root, PostgreSQL 15 + pgvector 0.8.0 missing: its tests will be skipped" >&2
  exit 0
fi

if [ ! -x "$PG_BIN/postgres" ] || [ ! -x "$PG_CONFIG" ] || [ ! -f /usr/include/postgresql/15/server/postgres.h ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-server-dev-15 make gcc libc6-dev >/dev/null
fi

if [ ! -f "$EXTENSION_DIR/vector--0.8.0.sql" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  mkdir -p "$WORK/lists/partial"
  # The Debian archive this machine already uses (its apt sources), never a host of our own.
  MIRROR=$("$(dirname "$0")/debian-mirror.sh")
  echo "deb-src $MIRROR trixie main" > "$WORK/sources.list"
  APT=(-o "Dir::Etc::sourcelist=$WORK/sources.list" -o Dir::Etc::sourceparts=/dev/null
       -o "Dir::State::Lists=$WORK/lists" -o Debug::NoDropPrivs=1 -o APT::Sandbox::User=root)
  ( cd "$WORK" && apt-get -qq "${APT[@]}" update && apt-get -qq "${APT[@]}" source --download-only pgvector=0.8.0-1 ) >/dev/null
  tar -xzf "$WORK/pgvector_0.8.0.orig.tar.gz" -C "$WORK"
  # OPTFLAGS="": a portable build (pgvector's default -march=native ties it to the build machine).
  make -s -C "$WORK/pgvector-0.8.0" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null 2>&1 \
    || { echo "install-postgres15: building pgvector failed" >&2; exit 1; }
  make -s -C "$WORK/pgvector-0.8.0" PG_CONFIG="$PG_CONFIG" install >/dev/null
fi

echo "$PG_BIN"
