"""Learning per generated token and per optimizer step: GRPO (n=4) against adaptive sampling, on the built-in tasks.

A thin caller of ``reinforce-ada compare`` (reinforce_ada/research/compare/): each task is one comparison in
``--out``/TASK (run folders, compare's report.md/json/png; a rerun continues it), with this benchmark's strategy table
(learning_strategies.py), beds and difficulty buckets on top.

Every run starts from the task's shipped warm-started tiny model (``reinforce_ada/models/start_models``: the same
weights on every machine) and, for a given seed, sees the same prompts at every step (the prompt stream is seeded by
the RL seed only). Held-out sampled accuracy (``--eval-prompts`` test prompts x 4 samples) is measured at step 0 and
every ``--eval-every`` steps. Each strategy runs over the learning-rate grid ``--lrs`` and is reported at its own
best rate, so no strategy is judged at a rate tuned for another.

What it reports, per task (mean over seeds, 95% t-interval; details in docs/benchmarks.md):

* **accuracy at GRPO's token budget** (primary): B = GRPO's mean generated tokens over its whole run (at GRPO's best
  lr); each run's accuracy at B is read off its own accuracy-vs-tokens history by linear interpolation (a run that
  generated fewer than B tokens in all counts at its final accuracy). Best lr of every other strategy: the highest
  mean accuracy at B; GRPO's: the highest final accuracy.
* **steps to GRPO's final accuracy** (secondary): the first step at which the strategy's mean curve reaches GRPO's
  mean final accuracy (linear interpolation between evaluations), and its ratio to GRPO's own, with a bootstrap 95%
  interval over seeds.
* the zero-variance fraction of the kept groups per strategy (over the run and at step 1), the per-step ordering
  Ada-balanced >= Ada-positive >= GRPO of the mean curves, and the accuracy gain by difficulty bucket (held-out prompts
  bucketed by the start model's pass rate over ``--bucket-samples`` samples).

    python benchmarks/learning.py --task arithmetic arithmetic-mixed --seeds 0 1 2 3 4 --steps 40 --eval-every 4 \\
        --lrs 5e-4 1e-3 --strategies grpo ada-positive ada-balanced stream-mixed --json results.json

(the documented run's exact commands, split over processes, and its results: docs/benchmarks.md.)

``--bed NAME`` starts every run from a bed instead (benchmarks/beds.py: a model shape, its task and its warm-started
weights; ``tiny-<task>`` is exactly the default above).

``--json PATH`` writes ``{"rows": [{"task", "strategy", "lr", "seed", "history": [[step, total_generated_tokens,
heldout_accuracy], ...], "seconds_per_step"}, ...]}`` (step 0 included; seconds per step: the mean of the run's
``time/step_seconds``, sampling + update without the evaluations), and next to it ``<stem>_details.json`` (zero-variance per step,
per-prompt pass rates for the buckets). ``--from-json PATH`` recomputes the tables and plots from such files without
training. Plots go to ``--docs``/img/learning-<task>.png (default ``benchmarks/results/img``; ``--docs docs`` for
the documented plots) unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning_report import (  # noqa: E402
    BUCKETS,
    accuracy_at_tokens,
    analyse,
    first_crossing,
    fmt,
    plot,
    print_report,
    steps_ratio,
    t_interval,
)
from beds import BEDS  # noqa: E402
from reinforce_ada.errors import UserError  # noqa: E402
from learning_strategies import GROUP_SIZE, PAPER_STRATEGIES, STRATEGIES  # noqa: E402

__all__ = ["BUCKETS", "STRATEGIES", "accuracy_at_tokens", "analyse", "first_crossing", "fmt", "main", "parse_args",
           "print_report", "steps_ratio", "t_interval"]

BUCKET_SEED = 10_000
"""Seed of the held-out prompts the difficulty buckets use (one fixed set per task, whatever the RL seed)."""


# -- running: every run through reinforce-ada compare (reinforce_ada/research/compare/) -------------------------
def train_settings(task: str, args: argparse.Namespace) -> dict:
    """The train settings every run of ``task`` shares (compare's ``train``): the tiny model's defaults, or for a bed
    its weights folder with the same settings."""
    from reinforce_ada.config import MODEL_DEFAULTS

    settings = {"task": task, "max_steps": args.steps, "eval_steps": args.eval_every, "batch_size": args.batch_size,
                "eval_prompts": args.eval_prompts, "num_threads": args.threads}
    if args.train_prompts:  # a fixed training set drawn by the seed, cycled: prompts recur as in multi-epoch RL
        settings["task_train_prompts"] = args.train_prompts
    bed = BEDS[args.bed] if args.bed else None
    if bed is not None and not bed.shipped_with_package:  # a bed's weights, run with the tiny model's settings
        settings.update({k: v for k, v in MODEL_DEFAULTS["tiny"].items() if k not in settings and k != "learning_rate"},
                        model=str(bed.folder))
    return settings


def strategy_settings(strategy: str, args: argparse.Namespace) -> dict:
    """The strategy's train settings, its sample budget resolved (``--budget``, or ``"<k>x"``: k x GRPO's)."""
    settings = dict(STRATEGIES[strategy])
    budget = settings.get("sampler.sample_budget_per_step")
    if args.budget is not None and settings.get("strategy") == "ada-budget":
        settings["sampler.sample_budget_per_step"] = args.budget
    elif isinstance(budget, str):  # "<k>x": k times GRPO's samples per step
        settings["sampler.sample_budget_per_step"] = int(float(budget[:-1]) * GROUP_SIZE * args.batch_size)
    return settings


def grid(task: str, args: argparse.Namespace):
    from reinforce_ada.research.compare import make_grid

    # lr_selection "same": this script's own tables (learning_report.py) choose and report on every held-out prompt,
    # and compare's report beside them follows the same rule
    return make_grid({s: strategy_settings(s, args) for s in args.strategies}, args.lrs, args.seeds,
                     train_settings(task, args), Path(args.out) / task,
                     baseline="grpo" if "grpo" in args.strategies else None, selection="same")


def pass_rates(model, tokenizer, verifier, prompts, samples: int, seed: int) -> list[float]:
    """Per-prompt fraction of ``samples`` sampled completions that are correct."""
    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.scoring import score

    generator = HFGenerator(model, tokenizer, max_new_tokens=8, use_chat_template=False, seed=seed)
    outputs = generator.generate([GenerationRequest(p, samples) for p in prompts])
    rates = []
    for prompt, completions in zip(prompts, outputs):
        rewards = score(verifier, [prompt] * len(completions), completions)
        rates.append(sum(1 for r in rewards if r is not None and r > 0.5) / len(completions))
    return rates


def bucket_prompts(task: str, args: argparse.Namespace):
    from reinforce_ada.data import get_task

    return get_task(task).prompts(args.bucket_prompts, seed=BUCKET_SEED, split="test")


def read_row(task: str, job, args: argparse.Namespace) -> tuple[dict, list, list]:
    """A finished run's row (``--json``), its zero-variance fraction per step and, with ``--bucket-prompts``, the end
    model's pass rates on the bucket prompts (its final checkpoint, sampled with the run's seed)."""
    from reinforce_ada.data import get_task
    from reinforce_ada.models.loading import load_pretrained
    from reinforce_ada.research.compare.runs import read_run
    from reinforce_ada.runs.source import locate_model

    folder = Path(args.out) / task / job.name
    run = read_run(folder)
    zero_variance = [float(r["sampling/zero_variance_fraction"]) for r in map(json.loads, (folder / "metrics.jsonl")
                     .read_text().splitlines()) if r.get("sampling/zero_variance_fraction") is not None]
    row = {"task": task, "strategy": job.strategy, "lr": job.lr, "seed": job.seed,
           "history": [[step, tokens, accuracy] for step, tokens, _, accuracy in run["history"]],
           "seconds_per_step": round(run["timing"]["step"], 4) if run["timing"]["step"] is not None else None}
    end_rates = []
    if args.bucket_prompts:
        model, tokenizer = load_pretrained(str(locate_model(str(folder)).model_dir))
        end_rates = pass_rates(model, tokenizer, get_task(task).verifier(), bucket_prompts(task, args),
                               args.bucket_samples, job.seed)
    return row, zero_variance, end_rates


def start_pass_rates(task: str, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """The start model's per-prompt pass rates on the bucket prompts, twice from independent samples: the first
    assigns the buckets, the second is the start accuracy the gains are measured from (with one estimate for both,
    noise alone would make the lowest bucket "gain" and the highest "lose": regression to the mean)."""
    from reinforce_ada.config import TrainConfig, load_config
    from reinforce_ada.runs.data import run_task
    from reinforce_ada.training.setup import load_data, load_model

    if not args.bucket_prompts:
        return [], []
    config = load_config(TrainConfig, None, {**train_settings(task, args), "learning_rate": 1e-3})
    task_object = run_task(config)
    train, held_out, verifier = load_data(config, task_object)
    model, tokenizer, _ = load_model(config, train, task_object, held_out)
    prompts = bucket_prompts(task, args)
    return tuple(pass_rates(model, tokenizer, verifier, prompts, args.bucket_samples, BUCKET_SEED + i)
                 for i in (0, 1))


def _merge(into: dict, other: dict) -> None:
    """Deep-merge ``other`` into ``into`` (dicts merged key by key; anything else: the first value kept)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif key not in into:
            into[key] = value


def write_results(path: Path, rows: list[dict], details: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows}))
    details_path(path).write_text(json.dumps(details))


def details_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "_details.json")


def parse_args(argv=None) -> argparse.Namespace:
    from reinforce_ada.data import list_tasks

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", nargs="+", default=None,
                        help=f"built-in task(s): {', '.join(list_tasks())} (default: arithmetic, or the bed's)")
    parser.add_argument("--bed", default=None, metavar="NAME",
                        help=f"start from a bed (model shape + task + warm-started weights, benchmarks/beds.py): "
                             f"{', '.join(BEDS)}")
    parser.add_argument("--strategies", nargs="+", default=list(PAPER_STRATEGIES),
                        help=f"any of {', '.join(STRATEGIES)} (default: the paper's three)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lrs", type=float, nargs="+", default=[5e-4, 1e-3],
                        help="learning-rate grid; every strategy is reported at its own best rate")
    parser.add_argument("--budget", type=int, default=None, metavar="SAMPLES",
                        help="samples per step of the ada-budget strategies (default: GRPO's, 4 x --batch-size)")
    parser.add_argument("--train-prompts", type=int, default=0,
                        help="size of the training set, cycled (0: the trainer's 4096-prompt pool, no prompt recurs "
                             "within 128 steps)")
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--bucket-prompts", type=int, default=200,
                        help="held-out prompts for the difficulty buckets (0: skip the buckets)")
    parser.add_argument("--bucket-samples", type=int, default=16, help="samples per bucket prompt")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1, help="runs at a time (reinforce-ada compare --parallel)")
    parser.add_argument("--out", default="runs/benchmark-learning",
                        help="folder for the comparisons, one per task (OUT/TASK: run folders and compare's report); "
                             "a rerun continues them")
    parser.add_argument("--docs", default=str(Path(__file__).resolve().parent / "results"),
                        help="plots go to DOCS/img/learning-<task>.png (default: benchmarks/results; the documented "
                             "plots: --docs docs)")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the histories (and PATH's _details)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="PATH",
                        help="report from these --json files (merged) instead of training")
    parser.add_argument("--merge-json", default=None, metavar="PATH",
                        help="with --from-json: also write the merged rows (and details) to PATH")
    parser.add_argument("--no-write", action="store_true", help="print the tables only (no plots)")
    args = parser.parse_args(argv)
    if args.bed is not None:
        if args.bed not in BEDS:
            parser.error(f"unknown bed {args.bed!r}; choose from {', '.join(BEDS)}")
        bed = BEDS[args.bed]
        if args.task not in (None, [bed.task]):
            parser.error(f"--bed {bed.name} is on task {bed.task}; drop --task or give --task {bed.task}")
        if not bed.has_weights():
            parser.error(f"bed {bed.name} has no weights in {bed.folder}; make them with "
                         f"python benchmarks/beds.py --make {bed.name}")
        args.task = [bed.task]
    args.task = args.task or ["arithmetic"]
    for task in args.task:
        if task not in list_tasks():
            parser.error(f"unknown task {task!r}; choose from {', '.join(list_tasks())}")
    for strategy in args.strategies:
        if strategy not in STRATEGIES:
            parser.error(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    for name in ("steps", "eval_every", "batch_size", "eval_prompts"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer (got {getattr(args, name)})")
    if args.budget is not None and args.budget < GROUP_SIZE * args.batch_size:
        parser.error(f"--budget {args.budget} is below one group per prompt: at least group size x --batch-size = "
                     f"{GROUP_SIZE} x {args.batch_size} = {GROUP_SIZE * args.batch_size}")
    if args.train_prompts < 0 or 0 < args.train_prompts < args.batch_size:
        parser.error(f"--train-prompts must be 0 or at least --batch-size {args.batch_size} (got {args.train_prompts})")
    if args.bucket_prompts < 0 or args.bucket_samples < 1:
        parser.error("--bucket-prompts must be >= 0 and --bucket-samples >= 1")
    if any(not (lr > 0 and math.isfinite(lr)) for lr in args.lrs):
        parser.error(f"--lrs must be positive numbers (got {args.lrs})")
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1 (got {args.parallel})")
    for task in args.task:  # compare's checks: every run's TrainConfig, and --out (another grid, not a comparison)
        try:
            checked = grid(task, args)
            checked.jobs()
            if not args.from_json:
                checked.check_out()
        except UserError as err:
            parser.error(str(err))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.from_json:
        rows, details, seen = [], {}, {}
        for name in args.from_json:  # several files (e.g. one per task, run in parallel) are merged
            for row in json.loads(Path(name).read_text())["rows"]:
                key = (row["task"], row["strategy"], row["lr"], row["seed"])
                if key in seen:  # the same run in two files (e.g. GRPO, the reference of both): keep one
                    if seen[key] != row["history"]:
                        print(f"note: {key} differs between files; keeping the first", file=sys.stderr)
                    continue
                seen[key] = row["history"]
                rows.append(row)
            details_file = details_path(Path(name))
            _merge(details, json.loads(details_file.read_text()) if details_file.exists() else {})
        tasks = list(dict.fromkeys(row["task"] for row in rows))
        if args.merge_json:
            write_results(Path(args.merge_json), rows, details)
    else:
        rows, details, tasks = [], {"zero_variance": {}, "start_pass_rates": {}, "start_pass_rates_baseline": {},
                                    "end_pass_rates": {},
                                    "args": {k: v for k, v in vars(args).items()}}, args.task
        from reinforce_ada.research.compare import run_comparison

        started = time.perf_counter()
        for task in tasks:
            details["start_pass_rates"][task], details["start_pass_rates_baseline"][task] = \
                start_pass_rates(task, args)
            task_grid = grid(task, args)
            status, _ = run_comparison(task_grid, args.parallel)
            if status:
                return status
            for job in task_grid.jobs():
                row, zero_variance, end_rates = read_row(task, job, args)
                rows.append(row)
                for key, value in (("zero_variance", zero_variance), ("end_pass_rates", end_rates)):
                    details[key].setdefault(task, {}).setdefault(job.strategy, {}).setdefault(
                        str(job.lr), {})[str(job.seed)] = value
            details["wall_seconds"] = round(time.perf_counter() - started, 1)
            if args.json:
                write_results(Path(args.json), rows, details)
        if args.json:
            print(f"wrote {args.json} and {details_path(Path(args.json))}")
    if not args.from_json and "grpo" not in args.strategies:  # e.g. longer runs of cheaper strategies
        print("no grpo in this invocation: report with --from-json, adding a file with GRPO's runs")
        return 0
    for task in tasks:
        report = analyse(task, rows, details)
        print_report(report)
        if not args.no_write:
            plot(report, rows, Path(args.docs) / "img" / f"learning-{task}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
