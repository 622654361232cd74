#!/usr/bin/env bash
# Install what the production-shaped stack (scripts/production/stack.ts) runs, without Docker:
#
#   - PostgreSQL 15          Debian's package (/usr/lib/postgresql/15/bin), apt-get when root
#   - Temporal server        go install go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION
#     + temporal-sql-tool    go install go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION
#     + its SQL schema       copied from the Go module cache
#   - redis-server/cli, moto_server, Temporal CLI: the repo's scripts/bootstrap.sh (.tools/bin)
#
# The Temporal build takes minutes, so it is cached OUTSIDE the clone, once per machine:
#   ${KILN_CACHE:-$HOME/.cache/kiln}/temporal-server-<version>/{bin,schema}
# TEMPORAL_SERVER_BIN / TEMPORAL_SQL_TOOL_BIN bring your own binaries (the schema is still copied).
#
# Idempotent; silent when everything is present. Messages go to stderr prefixed [production].
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VERSION=${TEMPORAL_SERVER_VERSION:-v1.29.1}
MODULE=go.temporal.io/server
CACHE=${KILN_CACHE:-${HOME:-/root}/.cache/kiln}
TDIR="$CACHE/temporal-server-$VERSION"
PG_BIN=${KILN_PG_BIN:-/usr/lib/postgresql/15/bin}

say() { printf '[production] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

mkdir -p "$TDIR/bin"
# Two concurrent runs (e.g. two terminals) must not build into the same directory at once.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TDIR/.install.lock"
  flock 9
fi

# ---------------------------------------------------------------------------
# 1. PostgreSQL 15 (we run our own cluster with initdb/postgres from $PG_BIN, never the
#    Debian-managed one, so only the binaries matter).
# ---------------------------------------------------------------------------
if [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/postgres" ] || ! command -v psql >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing PostgreSQL with apt-get"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
  fi
  [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/postgres" ] ||
    die "PostgreSQL 15 not found in $PG_BIN; install it (sudo apt-get install postgresql) or set KILN_PG_BIN"
fi
# postgres refuses to run as root; stack.ts then runs it as this user.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  die "running as root but there is no 'postgres' user to run PostgreSQL as (apt-get install postgresql creates it)"
fi

# ---------------------------------------------------------------------------
# 2. Temporal server + SQL tool + schema, from the Go module at a pinned version.
# ---------------------------------------------------------------------------
need_go() {
  command -v go >/dev/null 2>&1 && return 0
  die "go not found; install Go >= 1.23 (https://go.dev/dl) or set TEMPORAL_SERVER_BIN and TEMPORAL_SQL_TOOL_BIN"
}

# go install names the binary after its package directory (server, sql): build into a scratch
# GOBIN, then rename into place so an interrupted build never leaves a half-written binary.
build() { # package-path final-name
  local pkg=$1 name=$2 tmp start
  need_go
  tmp=$(mktemp -d "$TDIR/.build.XXXXXX")
  start=$(date +%s)
  say "building $name from $MODULE/$pkg@$VERSION (first time only; takes a few minutes)"
  if ! GOBIN="$tmp" go install "$MODULE/$pkg@$VERSION" >&2; then
    rm -rf "$tmp"
    die "go install $MODULE/$pkg@$VERSION failed"
  fi
  mv -f "$tmp/$(basename "$pkg")" "$TDIR/bin/$name"
  rm -rf "$tmp"
  say "built $TDIR/bin/$name in $(( $(date +%s) - start ))s"
}

if [ -n "${TEMPORAL_SERVER_BIN:-}" ]; then
  [ -x "$TEMPORAL_SERVER_BIN" ] || die "TEMPORAL_SERVER_BIN=$TEMPORAL_SERVER_BIN is not executable"
elif [ ! -x "$TDIR/bin/temporal-server" ]; then
  build cmd/server temporal-server
fi

if [ -n "${TEMPORAL_SQL_TOOL_BIN:-}" ]; then
  [ -x "$TEMPORAL_SQL_TOOL_BIN" ] || die "TEMPORAL_SQL_TOOL_BIN=$TEMPORAL_SQL_TOOL_BIN is not executable"
elif [ ! -x "$TDIR/bin/temporal-sql-tool" ]; then
  build cmd/tools/sql temporal-sql-tool
fi

# The versioned schema must match the server's version, so it comes from the same module.
if [ ! -f "$TDIR/schema/postgresql/v12/temporal/versioned/v1.0/manifest.json" ]; then
  need_go
  src=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -d "$src/schema/postgresql/v12" ] || die "schema not found in the Go module cache ($src)"
  rm -rf "$TDIR/schema.tmp"
  mkdir -p "$TDIR/schema.tmp/postgresql"
  cp -R "$src/schema/postgresql/v12" "$TDIR/schema.tmp/postgresql/"
  chmod -R u+w "$TDIR/schema.tmp" # the module cache is read-only; keep our copy removable
  rm -rf "$TDIR/schema"
  mv "$TDIR/schema.tmp" "$TDIR/schema"
  say "copied the Temporal $VERSION PostgreSQL schema to $TDIR/schema"
fi

# ---------------------------------------------------------------------------
# 3. redis-server, redis-cli, moto_server and the Temporal CLI: the repo's bootstrap owns them.
# ---------------------------------------------------------------------------
for t in redis-server redis-cli moto_server temporal; do
  if [ ! -x "$ROOT/.tools/bin/$t" ]; then
    say ".tools/bin/$t missing; running scripts/bootstrap.sh"
    bash "$ROOT/scripts/bootstrap.sh"
    break
  fi
done
for t in redis-server redis-cli moto_server temporal; do
  [ -x "$ROOT/.tools/bin/$t" ] || die ".tools/bin/$t is still missing after scripts/bootstrap.sh"
done
