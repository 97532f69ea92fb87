#!/usr/bin/env bash
# Prints the Debian archive this machine's apt already uses: the first URI of its deb822 sources
# (/etc/apt/sources.list.d/*.sources, `URIs:`), else of a one-line `deb` entry in sources.list.
# The installers that fetch Debian source packages build their apt line from it, so the
# repository never names a package registry's host: the machine's configuration does.
# Usage: scripts/debian-mirror.sh   (exit 1 with a note when no Debian source is configured)
#   ARC_APT_ETC  apt's configuration folder (default /etc/apt; the tests point it elsewhere)
set -euo pipefail
ETC="${ARC_APT_ETC:-/etc/apt}"

mirror=""
# debian.sources (Debian's own file) first, then any other deb822 file.
for f in "$ETC/sources.list.d/debian.sources" "$ETC"/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  # A deb822 stanza's URIs field may hold several URIs: the first is the one apt tries first.
  mirror=$(awk 'tolower($1) == "uris:" && $2 != "" { print $2; exit }' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
  for f in "$ETC/sources.list" "$ETC"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI suite components: the URI is the first field after `deb` and any [...] block.
    mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) { if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; continue }
                                                             print $i; exit } }' "$f")
    [ -n "$mirror" ] && break
  done
fi
if [ -z "$mirror" ]; then
  echo "debian-mirror: no Debian archive in this machine's apt sources" >&2
  exit 1
fi
echo "${mirror%/}"
