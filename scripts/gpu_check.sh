#!/usr/bin/env bash
# GPU check for reinforce-ada: what the CPU test suite cannot run, on a CUDA machine WITHOUT network access.
#
# It needs torch and transformers installed (e.g. a GPU image with torch 2.11 + transformers 5.17) and nothing else:
# the other packages it uses (TRL, datasets, math-verify, ...: scripts/gpu_check_wheels.txt) travel with the checkout
# as wheels in an ignored folder (default wheels/, <= 64 MiB), and reinforce-ada runs from the checkout itself.
# Nothing is ever downloaded, and your Python environment is never changed: with --install the missing packages are
# installed from the carried wheels into WHEELS/site, a folder only this check puts on its PYTHONPATH.
#
#   bash scripts/gpu_check.sh --download   # where there is network, once: fill wheels/ (pip download --no-deps)
#   bash scripts/gpu_check.sh --dry-run    # any machine, CPU: list the wheels and their size, check that pip can
#                                          # install them offline for the GPU's Python, run every check on the CPU
#                                          # with tiny shapes
#   bash scripts/gpu_check.sh              # on the GPU machine; says what --install would install if needed
#   bash scripts/gpu_check.sh --install    # ... installing the missing packages from wheels/ into wheels/site first
#
# Options: --wheels DIR (default wheels/).  Environment: PYTHON (default python3, else python), GPU_CHECK_PYTHON
# (the GPU machine's Python version for --download/--dry-run, default 3.12), GPU_CHECK_TIMEOUT (seconds, default 600).
# The checks (scripts/gpu_check.py): the standalone trainer with the tiny model and with a randomly initialised
# Qwen2.5-0.5B-shaped model (fp32 and bf16; samples/s, tokens/s, peak GPU memory), 2 TRL steps, bf16 vs fp32
# log-probabilities and loss. One "CHECK <name>: OK|FAILED" line each; exit status 0 only when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=check install=0 wheels=wheels
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry-run) mode=dry-run ;;
        --download) mode=download ;;
        --install) install=1 ;;
        --wheels) wheels="${2:?--wheels needs a folder}"; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
GPU_PY="${GPU_CHECK_PYTHON:-3.12}"
target_platform=(--only-binary=:all: --python-version "$GPU_PY" --implementation cp
                 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)

case "$mode" in
download)
    echo "== downloading the wheels of scripts/gpu_check_wheels.txt for Python $GPU_PY into $wheels/ (--no-deps)"
    "$PYTHON" -m pip download --no-deps "${target_platform[@]}" -d "$wheels" \
        -r "${GPU_CHECK_WHEELS_LIST:-scripts/gpu_check_wheels.txt}"
    "$PYTHON" scripts/carried_wheels.py list "$wheels"
    exit ;;
dry-run)
    echo "== the wheels this check would carry ($wheels/)"
    if ! "$PYTHON" scripts/carried_wheels.py list "$wheels"; then
        echo "DRY RUN FAILED: $wheels/ is incomplete; build it with: bash scripts/gpu_check.sh --download" >&2
        exit 1
    fi
    echo "== pip can install them offline for Python $GPU_PY (pip install --dry-run --no-index; nothing installed)"
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    "$PYTHON" -m pip install -q --dry-run --no-index --no-deps "${target_platform[@]}" --target "$scratch" \
        "$wheels"/*.whl
    echo "== every check on the CPU with tiny shapes (the environment on PATH must have reinforce-ada's test extra)"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" scripts/gpu_check.py --cpu
    echo "DRY RUN OK: only CUDA itself was not checked"
    exit ;;
esac

# The check itself. A WHEELS/site made by an earlier --install is used again.
[[ "$wheels" == /* ]] && site="$wheels/site" || site="$PWD/$wheels/site"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[[ -d "$site" ]] && export PYTHONPATH="$site:$PYTHONPATH"
"$PYTHON" -c "import torch, transformers" 2>/dev/null || {
    echo "GPU CHECK FAILED: $PYTHON cannot import torch and transformers (they are not carried)" >&2; exit 1; }
if ! missing="$("$PYTHON" scripts/carried_wheels.py missing "$wheels")"; then
    echo "GPU CHECK FAILED: a package the check needs is neither installed nor carried" \
         "(build $wheels/ with: bash scripts/gpu_check.sh --download)" >&2
    exit 1
fi
if [[ -n "$missing" ]]; then
    echo "== not installed for $PYTHON; --install installs these carried wheels into $site (offline, --no-deps):"
    echo "$missing" | sed 's/^/   /'
    if [[ "$install" != 1 ]]; then
        echo "GPU CHECK NOT RUN: rerun with --install (your Python environment is not changed; see above)" >&2
        exit 2
    fi
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" $missing
    export PYTHONPATH="$site:$PYTHONPATH"
elif [[ "$install" == 1 ]]; then
    echo "== --install: nothing to install (every package the check needs is importable)"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
status=0
timeout "${GPU_CHECK_TIMEOUT:-600}" "$PYTHON" scripts/gpu_check.py || status=$?
if [[ $status == 124 ]]; then
    echo "GPU CHECK FAILED: not finished in ${GPU_CHECK_TIMEOUT:-600} s" >&2
fi
exit $status
