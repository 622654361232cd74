#!/usr/bin/env bash
# Install the Python environment of a ComfyUI checkout for the real-ComfyUI test tier
# (`npm run test:comfyui`), CPU only, from PyPI, into .tools/comfyui-venv:
#
#   COMFYUI_DIR=/path/to/ComfyUI bash scripts/comfyui/install.sh
#
# ComfyUI (GPL-3.0) is never copied into this project: COMFYUI_DIR is a checkout the caller got
# themselves, and the tests run its main.py as a separate process (scripts/comfyui/start.ts).
#
# How it installs ComfyUI's requirements.txt without a GPU stack:
#   1. pip resolves requirements.txt once (--dry-run --report), which pins every package. It takes
#      the versions PyPI had on the day of the checkout's commit (pip --uploaded-prior-to, the
#      commit date from `git log`), so a checkout gets the torch, transformers, numpy … it was
#      written against, not ones released after it. COMFYUI_PIP_AS_OF=<ISO date> sets another day,
#      COMFYUI_PIP_AS_OF=latest the newest versions (also the default when COMFYUI_DIR has no git
#      history). `requests` is added: app/frontend_management.py imports it without listing it;
#   2. the pinned set is installed with --no-deps, less the packages only a GPU needs
#      (CPU_SKIP below: triton, cuSOLVER, the CUDA headers and Python bindings). PyPI's Linux
#      torch wheel links the other CUDA runtime libraries at load time, so they stay, even on CPU:
#      there is no CPU-only torch wheel for Linux x86_64 on PyPI;
#   3. a check imports torch, runs a tensor op on the CPU and imports torchvision and av; if that
#      fails with the trimmed set, the skipped packages are installed too and it checks again.
#
# Idempotent: a stamp in the venv holds the hash of requirements.txt, this script and the Python
# version; when it matches and the check passes, the script says so and exits. Progress goes to
# stderr prefixed [comfyui]. COMFYUI_PYTHON picks the interpreter (default python3.11, else python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$ROOT/.tools/comfyui-venv"
STAMP="$VENV/.kiln-comfyui-stamp"
CPU_SKIP='^(triton|nvidia-cusolver(-cu[0-9]+)?|nvidia-cuda-cccl(-cu[0-9]+)?|nvidia-nvtx(-cu[0-9]+)?|cuda-bindings|cuda-pathfinder|cuda-toolkit)$'
EXTRA_REQUIREMENTS=(requests)

say() { printf '[comfyui] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ -n "${COMFYUI_DIR:-}" ] ||
  die "COMFYUI_DIR is not set: point it at a ComfyUI checkout (git clone of Comfy-Org/ComfyUI), e.g. COMFYUI_DIR=/work/comfyui-src bash scripts/comfyui/install.sh"
[ -d "$COMFYUI_DIR" ] || die "COMFYUI_DIR=$COMFYUI_DIR is not a directory"
COMFYUI_DIR=$(cd "$COMFYUI_DIR" && pwd)
for f in main.py server.py nodes.py execution.py requirements.txt comfy/cli_args.py; do
  [ -f "$COMFYUI_DIR/$f" ] || die "COMFYUI_DIR=$COMFYUI_DIR is not a ComfyUI checkout (no $f)"
done

PY=${COMFYUI_PYTHON:-$(command -v python3.11 || command -v python3 || true)}
[ -n "$PY" ] || die "no python3 found (set COMFYUI_PYTHON)"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
  die "$PY is $("$PY" --version 2>&1); ComfyUI needs Python 3.10 or newer (set COMFYUI_PYTHON)"
PYVER=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')

AS_OF=${COMFYUI_PIP_AS_OF:-$(git -C "$COMFYUI_DIR" log -1 --format=%cI 2>/dev/null || true)}
if [ -z "$AS_OF" ]; then
  say "COMFYUI_DIR has no git history to date it: resolving the newest versions on PyPI (set COMFYUI_PIP_AS_OF to pin a day)"
  AS_OF=latest
fi
WANT=$( { cat "$COMFYUI_DIR/requirements.txt" "${BASH_SOURCE[0]}"; echo "$PYVER $AS_OF"; } | sha256sum | cut -c1-16)

check() { # the venv can run ComfyUI's core on the CPU
  "$VENV/bin/python" - <<'EOF' >&2
import torch, torchvision, av, aiohttp, PIL, numpy
x = torch.ones(2, 3) * 2
assert float(x.sum()) == 12.0
print(f"[comfyui] torch {torch.__version__} (cuda available: {torch.cuda.is_available()}), torchvision {torchvision.__version__}, av {av.__version__}, numpy {numpy.__version__}")
EOF
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ] && check 2>/dev/null; then
  say "already installed in $VENV (stamp $WANT); nothing to do"
  exit 0
fi

mkdir -p "$ROOT/.tools"
# Two runs at once must not install into the same venv.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/.tools/.comfyui-install.lock"
  flock 9
fi

START=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $PY ($PYVER)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
say "upgrading pip in the venv"
"${PIP[@]}" install -q --upgrade pip >&2

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
AS_OF_ARGS=()
[ "$AS_OF" = latest ] || AS_OF_ARGS=(--uploaded-prior-to "$AS_OF")
say "resolving $COMFYUI_DIR/requirements.txt (+ ${EXTRA_REQUIREMENTS[*]}) against PyPI as of $AS_OF"
"${PIP[@]}" install -q --dry-run --ignore-installed --report "$WORK/report.json" "${AS_OF_ARGS[@]}" \
  -r "$COMFYUI_DIR/requirements.txt" "${EXTRA_REQUIREMENTS[@]}" >&2 ||
  die "pip could not resolve $COMFYUI_DIR/requirements.txt"
"$VENV/bin/python" - "$WORK/report.json" "$CPU_SKIP" "$WORK/cpu.txt" "$WORK/gpu-only.txt" <<'EOF'
import json, re, sys
report, skip, cpu, gpu = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3], sys.argv[4]
pins = [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.load(open(report))["install"]]
with open(cpu, "w") as c, open(gpu, "w") as g:
    for name, version in sorted(pins, key=lambda p: p[0].lower()):
        (g if skip.match(name.lower()) else c).write(f"{name}=={version}\n")
EOF
say "installing $(wc -l <"$WORK/cpu.txt") pinned packages with --no-deps (torch: $(grep -i '^torch==' "$WORK/cpu.txt" || echo '?'));"
say "  left out, a GPU's only: $(tr '\n' ' ' <"$WORK/gpu-only.txt")"
"${PIP[@]}" install -q --no-deps -r "$WORK/cpu.txt" >&2 || die "pip install failed"

if ! check; then
  say "the trimmed install cannot load torch; installing the left-out packages too"
  "${PIP[@]}" install -q --no-deps -r "$WORK/gpu-only.txt" >&2 || die "pip install of the GPU packages failed"
  check || die "torch still does not load in $VENV; see the error above"
fi

echo "$WANT" >"$STAMP"
echo "$COMFYUI_DIR" >"$VENV/.kiln-comfyui-dir"
say "installed in $(($(date +%s) - START))s; $VENV is $(du -sh "$VENV" | cut -f1)"
