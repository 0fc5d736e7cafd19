"""Stage 1's check of a bed (docs/benchmarks.md, "Beds"): does GRPO with twice the completions per prompt learn faster
per step than GRPO with n = 4? If it does not, more signal per step does not turn into accuracy on that bed, and no
sampler can show a per-token gain there.

It reads what ``benchmarks/learning.py --bed NAME --strategies grpo grpo-n8 --json PATH`` wrote (no training) and
prints one table row: the bed, its parameters, the start accuracy, the start model's per-prompt pass-rate histogram,
the paired difference n=8 minus n=4 of the final held-out accuracy (each arm at its own best lr of the grid by mean
final accuracy; mean ± 95% t-interval over the seeds both ran), the best lrs and the seconds per step. The bed passes
when the interval's lower end is above 0.

    python benchmarks/bed_check.py benchmarks/results/bed_h128x4_arithmetic.json
    python benchmarks/bed_check.py benchmarks/results/bed_tiny_arithmetic.json \
        benchmarks/results/bed_h128x2_arithmetic.json --markdown --json checks.json --plot checks.png

Seconds per step (per arm, over all its runs) come from the rows (``seconds_per_step``, written by learning.py since it
records it) or, for older files, from the run folders under ``--runs`` (the mean of their ``time/step_seconds``);
otherwise they are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beds import BEDS  # noqa: E402
from learning import details_path  # noqa: E402
from learning_report import BUCKETS, _in_bucket, t_interval  # noqa: E402

ARMS = ("grpo", "grpo-n8")


def load(path: Path) -> tuple[list[dict], dict]:
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a learning.py --json file (no \"rows\" list; a _details file or a "
                         f"bed_check --json output?)")
    details = details_path(path)
    return data["rows"], (json.loads(details.read_text()) if details.exists() else {})


def parameters(bed_name: str) -> int | None:
    """The bed's parameter count from its safetensors header (no weights loaded); None without the file."""
    if bed_name not in BEDS or not BEDS[bed_name].has_weights():
        return None
    from safetensors import safe_open

    with safe_open(str(BEDS[bed_name].folder / "model.safetensors"), "pt") as weights:
        return sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())


def seconds_per_step(rows: list[dict], runs: Path | None, task: str, strategy: str) -> float | None:
    """Mean seconds per step of one arm over all its runs (every lr): from the rows, else from the run folders."""
    values = [r["seconds_per_step"] for r in rows if r.get("seconds_per_step") is not None]
    if values:
        return statistics.mean(values)
    if runs is None:
        return None
    seconds = []
    for metrics in runs.glob(f"{task}-{strategy}-lr*-seed*/metrics.jsonl"):
        seconds += [json.loads(line)["time/step_seconds"] for line in metrics.read_text().splitlines()
                    if "time/step_seconds" in line]
    return statistics.mean(seconds) if seconds else None


def check(path: Path, runs: Path | None = None) -> dict:
    """The bed check of one learning.py --json file (a ValueError naming what is missing if it cannot be made)."""
    rows, details = load(path)
    tasks = sorted({r["task"] for r in rows})
    if len(tasks) != 1:
        raise ValueError(f"{path}: a bed check needs the runs of one task, found {tasks or 'none'}")
    task = tasks[0]
    by_arm: dict[str, dict[float, dict[int, list]]] = {}
    for row in rows:
        if row["strategy"] in ARMS:
            by_arm.setdefault(row["strategy"], {}).setdefault(row["lr"], {})[row["seed"]] = row
    missing = [arm for arm in ARMS if arm not in by_arm]
    if missing:
        raise ValueError(f"{path}: no runs of {', '.join(missing)} (run learning.py with --strategies grpo grpo-n8)")
    best = {arm: max(sorted(by_lr), key=lambda lr: statistics.mean(r["history"][-1][2] for r in by_lr[lr].values()))
            for arm, by_lr in by_arm.items()}
    n4, n8 = by_arm["grpo"][best["grpo"]], by_arm["grpo-n8"][best["grpo-n8"]]
    seeds = sorted(set(n4) & set(n8))
    if len(seeds) < 2:
        raise ValueError(f"{path}: the two arms share {len(seeds)} seed(s) at their best lrs; a paired interval needs 2")
    diff, half = t_interval([n8[s]["history"][-1][2] - n4[s]["history"][-1][2] for s in seeds])
    rates = details.get("start_pass_rates", {}).get(task, [])
    bed = details.get("args", {}).get("bed") or f"tiny-{task}"  # a run without --bed started from the tiny bed
    return {
        "file": str(path), "bed": bed, "task": task, "seeds": seeds,
        "steps": n4[seeds[0]]["history"][-1][0], "parameters": parameters(bed),
        "start_accuracy": statistics.mean(n4[s]["history"][0][2] for s in seeds),
        "start_histogram": {"p=0": sum(r == 0 for r in rates), "between": sum(0 < r < 1 for r in rates),
                            "p=1": sum(r == 1 for r in rates), "prompts": len(rates),
                            "samples": details.get("args", {}).get("bucket_samples"),
                            "buckets": {label: int(_in_bucket(np.asarray(rates, dtype=float), low, high).sum())
                                        for low, high, label in BUCKETS}},
        "final": {arm: statistics.mean(runs_[s]["history"][-1][2] for s in seeds) for arm, runs_ in (("grpo", n4),
                                                                                                   ("grpo-n8", n8))},
        "final_by_lr": {arm: {str(lr): t_interval([r["history"][-1][2] for r in by_lr[lr].values()])
                              for lr in sorted(by_lr)} for arm, by_lr in by_arm.items()},
        "curves": {arm: [runs_[s]["history"] for s in seeds] for arm, runs_ in (("grpo", n4), ("grpo-n8", n8))},
        "n8_minus_n4": [diff, half], "passes": bool(diff - half > 0), "best_lr": best,
        "seconds_per_step": {arm: seconds_per_step([r for r in rows if r["strategy"] == arm], runs, task, arm)
                             for arm in ARMS},
    }


def lr_text(lr: float) -> str:
    """2.5e-4, 5e-4, 1e-3: a learning rate as the docs write it."""
    mantissa, exponent = f"{lr:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def markdown_row(result: dict) -> str:
    h = result["start_histogram"]
    diff, half = result["n8_minus_n4"]
    secs = result["seconds_per_step"]
    secs_text = " / ".join("-" if secs[a] is None else f"{secs[a]:.2f}" for a in ARMS)
    params = "-" if result["parameters"] is None else f"{result['parameters']:,}"
    return (f"| `{result['bed']}` | {params} | {result['start_accuracy']:.3f} | "
            f"{' / '.join(str(c) for c in h['buckets'].values())} | **{diff:+.3f} ± {half:.3f}** ({result['final']['grpo-n8']:.3f} vs "
            f"{result['final']['grpo']:.3f}): **{'passes' if result['passes'] else 'fails'}** | "
            f"{lr_text(result['best_lr']['grpo'])} / {lr_text(result['best_lr']['grpo-n8'])} | {secs_text} |")


def plot(results: list[dict], path: Path) -> None:
    """One panel per bed: held-out accuracy per step of both arms at their best lrs, mean and 95% t-interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.3 * rows), squeeze=False)
    for ax, result in zip(axes.flat, results):
        for arm, label in (("grpo", "GRPO n=4"), ("grpo-n8", "GRPO n=8")):
            curves = result["curves"][arm]
            steps = [h[0] for h in curves[0]]
            acc = np.array([[h[2] for h in run] for run in curves])
            mean = acc.mean(axis=0)
            half = np.array([t_interval(acc[:, i])[1] for i in range(acc.shape[1])])
            line, = ax.plot(steps, mean, lw=1.5, label=f"{label} (lr {lr_text(result['best_lr'][arm])})")
            ax.fill_between(steps, mean - half, mean + half, color=line.get_color(), alpha=0.15)
        diff, half = result["n8_minus_n4"]
        ax.set_title(f"{result['bed']}: n8-n4 {diff:+.3f} ± {half:.3f}", fontsize=9)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("held-out sampled accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(results):]:
        ax.axis("off")
    fig.suptitle(f"bed check: GRPO with 8 vs 4 completions per prompt, each at its best lr "
                 f"({len(results[0]['seeds'])} seeds, 95% t-intervals)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


MARKDOWN_HEADER = ("| bed | params | start acc (held-out) | start pass rates (p=0 / (0, .25] / (.25, .75) / [.75, 1) / 1) | n=8 minus n=4, final "
                   "acc (paired; n=8 vs n=4) | best lr n=4 / n=8 | s/step n=4 / n=8 |\n| --- | --- | --- | --- | --- | --- | --- |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", type=Path, help="learning.py --json files, one bed each")
    parser.add_argument("--runs", type=Path, default=None,
                        help="folder of the run folders, for seconds per step when the rows lack them (one file)")
    parser.add_argument("--markdown", action="store_true", help="print the docs table rows instead of the text")
    parser.add_argument("--json-out", "--json", dest="json_out", type=Path, default=None,
                        help="also write the checks as JSON to this path")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="also plot the curves, one panel per bed")
    args = parser.parse_args(argv)
    if args.runs is not None and len(args.json) > 1:
        parser.error("--runs goes with one results file")
    for path in args.json:
        if not path.is_file():
            parser.error(f"no such results file: {path}")
    try:
        results = [check(path, args.runs) for path in args.json]
    except (ValueError, KeyError, json.JSONDecodeError) as err:
        print(f"bed_check: {err}", file=sys.stderr)
        return 2
    if args.markdown:
        print(MARKDOWN_HEADER)
        print("\n".join(markdown_row(r) for r in results))
    for r in results if not args.markdown else ():
        print(f"{r['bed']} ({r['file']}): seeds {r['seeds']}, {r['steps']} steps, start accuracy "
              f"{r['start_accuracy']:.3f}")
        for arm, by_lr in r["final_by_lr"].items():
            for lr, (mean, half) in by_lr.items():
                star = " *" if float(lr) == r["best_lr"][arm] else ""
                print(f"  {arm:8s} lr {float(lr):g}: final {mean:.3f} ± {half:.3f}{star}")
        h = r["start_histogram"]
        print(f"  start pass rates ({h['prompts']} prompts x {h['samples']} samples): "
              + ", ".join(f"{label} {count}" for label, count in h["buckets"].items()))
        diff, half = r["n8_minus_n4"]
        print(f"  n=8 minus n=4, final accuracy (paired, each at its best lr): {diff:+.3f} ± {half:.3f} -> "
              f"{'passes' if r['passes'] else 'fails'}")
        print("  seconds per step: " + ", ".join(
            f"{arm} {'-' if s is None else f'{s:.3f}'}" for arm, s in r["seconds_per_step"].items()))
    if args.json_out:
        args.json_out.write_text(json.dumps([{k: v for k, v in r.items() if k != "curves"} for r in results],
                                            indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
