"""``reinforce-ada train``: settings from the defaults (with ``--resume``: the run's own settings), then ``--config``
YAML, then the options (every field of :class:`~reinforce_ada.config.TrainConfig`, generated from the config tree),
all checked before anything loads; then the :class:`~reinforce_ada.training.Trainer` runs and the command prints the
run's summary."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    from reinforce_ada.config import TrainConfig, add_config_arguments
    from reinforce_ada.config.strategies import strategies_text
    from reinforce_ada.data.tasks import task_names_text
    from reinforce_ada.verifiers.registry import VERIFIERS

    p.add_argument("--config", metavar="YAML", help="YAML file of TrainConfig fields")
    add_config_arguments(p, TrainConfig, choices={  # from the registries, so that a new entry is listed
        "task": task_names_text(), "strategy": strategies_text(),
        "verifier": ", ".join([*VERIFIERS.names(), "package.module:function"])})


def run(args: argparse.Namespace) -> int:
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.config.loading import load_settings

    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "func", "config", "verbose")}
    given = load_settings(TrainConfig, args.config, overrides)  # every field checked before anything loads
    if given.get("resume"):  # the run's own settings, changed only where given
        from reinforce_ada.runs.folder import resume_settings

        given = resume_settings(given)
    config = TrainConfig(**given)
    from reinforce_ada.cpu_numerics import pin_portable_numerics, runs_portable

    if runs_portable({"model": config.model, "generator": config.generator}):
        pin_portable_numerics()  # before torch loads: the tiny model's numbers the same on every x86 CPU
    from reinforce_ada.training import Trainer

    trainer = Trainer(config)
    try:
        summary = trainer.train()
    finally:  # shut a vLLM engine down and remove the folder it was built from, also when the run stops
        trainer.close()
    if trainer.nothing_to_do is not None:
        print(trainer.nothing_to_do)
    before, after = summary["accuracy_before"], summary["accuracy_after"]
    if before is not None and after is not None:
        from reinforce_ada.runs.folder import last_change

        changed = last_change(Path(config.output_dir), "held_out")
        note = "" if changed is None else (f" (not comparable: the held-out prompts were replaced at step {changed}, "
                                           f"--force-resume-changes)")
        print(f"held-out sampled accuracy: {100 * before:.1f}% -> {100 * after:.1f}%{note}")
        strata = _by_stratum(Path(config.output_dir)) if changed is None else ""
        if strata:
            print(strata)
    elif config.data is not None and config.eval_data is None and config.eval_prompts:
        print(f"no held-out accuracy: a run on a prompt file holds none out unless told (--eval-data FILE, or "
              f"--eval-data task:NAME for {config.eval_prompts} prompts of a built-in task's test split)")
    allocation = _allocation(Path(config.output_dir), config)
    if allocation:
        print(allocation)
    print(f"steps {summary['steps']}, samples drawn {summary['total_samples']}, "
          f"tokens generated {summary['total_tokens']}, wall {summary['wall_seconds']:.0f} s")
    print(f"run folder: {Path(config.output_dir).resolve()}")
    return 0


def _allocation(folder: Path, config) -> str:
    """A one-shot allocation's figures over the run (Est), in one line, and a second when no prompt came back ("" for a
    run that logged none)."""
    import json

    from reinforce_ada import analyses
    from reinforce_ada.core.allocation import HARD_BELOW

    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    a = analyses.allocation_over_run(records)
    if not a:
        return ""
    line = (f"allocation over the run: {a['min']:.0f} / {a['mean']:.1f} / {a['max']:.0f} samples per prompt (min / "
            f"mean / max), {100 * a['share_hard']:.1f}% of the samples on prompts believed hard (p_hat < "
            f"{HARD_BELOW:g}), {a['memory_prompts']:.0f} prompts with a remembered estimate")
    if a["revisits"] or not a["visits"]:
        return line
    every = 16 * config.prompts_per_step
    recur = (f"--task-train-prompts {every} trains on {every} of the task's prompts, each back every 16 steps"
             if config.data is None else
             f"a --data file of fewer than {config.max_steps * config.prompts_per_step} prompts recurs within the run")
    return (f"{line}\nno prompt came back: each of the {a['visits']:.0f} prompt visits was the prompt's first, so the "
            f"pass-rate memory never shaped an allocation (every prompt got the even share); Est pays on prompts that "
            f"recur ({recur})")


def _by_stratum(folder: Path) -> str:
    """The run's first and last held-out accuracy per difficulty stratum, in one line ("" without strata)."""
    import json

    from reinforce_ada import analyses
    from reinforce_ada.difficulty import STRATA_FILE

    if not (folder / STRATA_FILE).is_file():
        return ""
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    last = next(r for r in reversed(records) if "eval/accuracy" in r)
    counts = {k.removeprefix("eval/num_prompts/"): int(v) for k, v in last.items() if k.startswith("eval/num_prompts/")}
    parts = [f"{name} {100 * values[0]:.1f}% -> {100 * values[-1]:.1f}% ({counts.get(name, 0)})"
             for name, (_, values) in analyses.strata_series(records).items()]
    samples = json.loads((folder / STRATA_FILE).read_text())["num_samples"]
    return (f"by difficulty stratum (the start model's pass rate over {samples} samples; prompts): " + ", ".join(parts)
            if parts else "")
