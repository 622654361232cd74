#!/usr/bin/env bash
# Runs a command on the Node.js 24 that scripts/bootstrap.sh provides (.tools/node/bin first on
# PATH), so `npm test`, `npm run dev` and the benchmarks run on it whatever Node the machine has:
#   bash scripts/on-node.sh npm run test:unit
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$ROOT/.tools/node/bin/node" ] || { echo "[on-node] .tools/node is missing: run bash scripts/bootstrap.sh first" >&2; exit 1; }
export PATH="$ROOT/.tools/node/bin:$PATH"
exec "$@"
