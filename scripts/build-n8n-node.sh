#!/usr/bin/env bash
# Builds the n8n community node package in integrations/n8n with n8n's own node tooling
# (@n8n/node-cli: TypeScript build and the community-node lint), then packs it as npm would
# publish it. Prints the path of the packed tarball (the last line).
#   ARC_N8N_NODE_OUT  where to put the tarball (default: integrations/n8n/.pack)
#   --lint            also lint: the node CLI's lint (`n8n-node lint`) on the sources, and the lint
#                     n8n's community package scanner (@n8n/scan-community-package) runs on a
#                     published package, on the packed tarball (the scanner's own command
#                     fetches a package by name from the registry; its analysis runs here)
# Needs node and npm (Node 20 or newer); the dev dependencies come from the machine's npm
# registry, once (node_modules is reinstalled when package.json changes).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pkg="$root/integrations/n8n"
out="${ARC_N8N_NODE_OUT:-$pkg/.pack}"
lint=false
for arg in "$@"; do
  case "$arg" in
    --lint) lint=true ;;
    *) echo "build-n8n-node.sh: unknown argument $arg (only --lint)" >&2; exit 2 ;;
  esac
done
command -v npm >/dev/null || { echo "build-n8n-node.sh: npm is missing (install Node.js 20+ with npm)" >&2; exit 1; }
cd "$pkg"
stamp="node_modules/.arc-installed"
if [ ! -f "$stamp" ] || [ package.json -nt "$stamp" ]; then
  # --ignore-scripts: a lint plugin's install script insists on pnpm, and the n8n-workflow
  # types need none of the native builds their dependencies offer.
  npm install --no-audit --no-fund --loglevel=error --ignore-scripts --no-package-lock >&2
  touch "$stamp"
fi
# CI=1: the CLI prints plain lines instead of its spinner
rm -rf dist
CI=1 npx --no-install n8n-node build >&2
if $lint; then
  CI=1 npx --no-install n8n-node lint >&2
fi
mkdir -p "$out"
tarball="$(npm pack --silent --pack-destination "$out" | tail -n 1)"
if $lint; then
  unpacked="$(mktemp -d)"
  trap 'rm -rf "$unpacked"' EXIT
  tar -xzf "$out/$tarball" --strip-components=1 -C "$unpacked"
  node --input-type=module -e '
    import { analyzePackage } from "@n8n/scan-community-package/scanner/scanner.mjs";
    const result = await analyzePackage(process.argv[1]);
    if (!result.passed) {
      console.error(`the packed package fails the n8n community package scan: ${result.message}`);
      console.error(result.details ?? "");
      process.exit(1);
    }
    console.error("the packed package passes the n8n community package scan");
  ' "$unpacked" >&2
fi
echo "$out/$tarball"
