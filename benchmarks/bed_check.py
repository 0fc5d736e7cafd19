"""The bed check of benchmarks/learning.py --bed runs (GRPO n=8 vs n=4): each at its best lr by final accuracy, the
paired final-accuracy difference, the start histogram and seconds per step from the run folders.

    python benchmarks/bed_check.py benchmarks/results/bed_h128x2_arithmetic.json runs/bench/bed-h128x2-arithmetic
"""
import json, sys, glob, statistics
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from learning_report import t_interval
path, out = sys.argv[1], sys.argv[2]
rows = json.load(open(path))["rows"]
details = json.load(open(path.replace(".json", "_details.json")))
runs = {}
for r in rows:
    runs.setdefault(r["strategy"], {}).setdefault(r["lr"], {})[r["seed"]] = r["history"]
best = {s: max(by, key=lambda lr: statistics.mean(h[-1][2] for h in by[lr].values())) for s, by in runs.items()}
for s, by in runs.items():
    for lr, h in sorted(by.items()):
        print(s, lr, "final %.3f ± %.3f" % t_interval([x[-1][2] for x in h.values()]), "*" if lr == best[s] else "")
a, b = runs["grpo"][best["grpo"]], runs["grpo-n8"][best["grpo-n8"]]
seeds = sorted(a)
print("start %.3f" % statistics.mean(a[s][0][2] for s in seeds))
print("n8 - n4 final (paired, each at best lr): %.3f ± %.3f" % t_interval([b[s][-1][2] - a[s][-1][2] for s in seeds]))
rates = details["start_pass_rates"]["arithmetic"]
print("start histogram (%d prompts, 8 samples): p=0 %d, 0<p<1 %d, p=1 %d" % (len(rates), sum(r == 0 for r in rates),
      sum(0 < r < 1 for r in rates), sum(r == 1 for r in rates)))
for s in ("grpo", "grpo-n8"):
    secs = []
    for f in glob.glob(f"{out}/arithmetic-{s}-lr*-seed*/metrics.jsonl"):
        secs += [json.loads(l)["time/step_seconds"] for l in open(f) if "time/step_seconds" in l]
    print(s, "s/step %.3f (median %.3f, %d steps)" % (statistics.mean(secs), statistics.median(secs), len(secs)))
