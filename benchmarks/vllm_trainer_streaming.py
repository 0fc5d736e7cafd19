"""The trainer's step with the streaming sampler against the round-based one, on one vLLM engine, in one run.

What a user gets from ``reinforce-ada train --generator vllm`` with and without ``--sampler.mode streaming``: the
trainer's default demo settings (the tiny model warm-started on ``arithmetic``, batch 32, M=8, N=4, n=4, 8 new
tokens, seed 0), one colocated ``VLLMGenerator`` built as the trainer builds it (compiled, the CPU's RAM share),
shared by trainers that start from the same weights -- one round-based, one streaming, and one more streaming
trainer per ``--variant NAME:KEY=VALUE[,KEY=VALUE]`` (scheduler options, ``StreamingOptions``, e.g.
``no-fill:fill_idle=false``). Their steps are interleaved (the order rotated every step and reversed every other, so
drift in the machine's load falls on all), each syncing the engine to its own model first.

Reported per mode: the median step seconds and the trainer's split of it (``time/sync_seconds``,
``time/generation_seconds``, ``time/scoring_seconds``, ``time/update_seconds``), samples drawn per step, and inside
generation: the engine's iterations (``LLMEngine.step``), adding requests (``LLMEngine.add_request``) and the rest
(the sampler and its scheduler, the conversion of vLLM's outputs). The ratio streaming / rounds of the step time
(and each variant's, ``NAME_step_ratio``) is the geometric mean of the paired ratios (step ``i`` of each), with a 95%
t-interval on their logarithms.

    python benchmarks/vllm_trainer_streaming.py --steps 100 --variant fill-to-budget:fill_idle_per_wave=null \
        --variant no-fill:fill_idle=false --json benchmarks/results/vllm_trainer_streaming.json
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import statistics
import time
from typing import Any, Callable

from learning_report import t_interval


def timed(counter: collections.Counter, key: str, fn: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            counter[key] += time.perf_counter() - started
            counter[f"{key}_calls"] += 1
    return wrapper


def log_ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` and its 95% t-interval (computed on the logarithms)."""
    mean, half = t_interval([math.log(r) for r in ratios])
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def parse_option(item: str) -> tuple[str, Any]:
    """``key=value`` with the value read as JSON where it is JSON (``false``, ``4``), else as a string."""
    key, _, value = item.partition("=")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="measured steps per mode")
    parser.add_argument("--warmup", type=int, default=5, help="steps per mode before measuring")
    parser.add_argument("--output-dir", default="/tmp/vllm_trainer_streaming")
    parser.add_argument("--json", default=None)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                        help="also run a streaming trainer with these scheduler options (e.g. "
                             "'nofill:fill_idle=false'), interleaved with the others; repeatable")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from reinforce_ada.config import TrainConfig
    from reinforce_ada.sampling.factory import build_sampler
    from reinforce_ada.training import Trainer

    def config(mode: str, folder: str | None = None) -> Any:
        return TrainConfig(generator="vllm", max_steps=10**6, eval_steps=0, overwrite=True, num_threads=1,
                           output_dir=f"{args.output_dir}/{folder or mode}", sampler={"mode": mode})

    started = time.perf_counter()
    rounds = Trainer(config("rounds"))
    build_seconds = time.perf_counter() - started
    streaming = Trainer(config("streaming"), generator=rounds.generator)
    generator = rounds.generator
    trainers = {"rounds": rounds, "streaming": streaming}
    for spec in args.variant:
        name, _, options = spec.partition(":")
        trainer = Trainer(config("streaming", name), generator=generator)
        trainer.sampler = build_sampler(config("streaming", name).sampler_config(), generator, trainer.verifier,
                                        **dict(parse_option(item) for item in options.split(",") if item))
        trainers[name] = trainer
    engine = generator.llm.llm_engine
    spent: collections.Counter = collections.Counter()
    engine.step = timed(spent, "engine_step", engine.step)
    engine.add_request = timed(spent, "add_request", engine.add_request)
    records: dict[str, list[dict[str, float]]] = {name: [] for name in trainers}
    names = list(trainers)
    try:
        for i in range(args.warmup + args.steps):
            order = names[i % len(names):] + names[:i % len(names)]  # rotated, so load drift falls on all
            for mode in (order if i % 2 == 0 else order[::-1]):
                spent.clear()
                t0 = time.perf_counter()
                metrics = trainers[mode].train_step()
                step = time.perf_counter() - t0
                if i < args.warmup:
                    continue
                generation = metrics["time/generation_seconds"]
                records[mode].append(dict(
                    step_seconds=step, sync_seconds=metrics["time/sync_seconds"], generation_seconds=generation,
                    scoring_seconds=metrics["time/scoring_seconds"], update_seconds=metrics["time/update_seconds"],
                    samples=metrics["sampling/total_samples"], engine_steps=spent["engine_step_calls"],
                    requests=spent["add_request_calls"], engine_step_seconds=spent["engine_step"],
                    add_request_seconds=spent["add_request"],
                    other_generation_seconds=generation - spent["engine_step"] - spent["add_request"]))
            if i >= args.warmup:
                print(json.dumps({m: {k: round(v, 4) for k, v in r[-1].items()} for m, r in records.items()}),
                      flush=True)
    finally:
        generator.close()
    summary: dict[str, Any] = {"build_seconds": build_seconds, "steps": args.steps, "warmup": args.warmup}
    for mode, rows in records.items():
        summary[mode] = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    for name in names[1:]:
        prefix = "" if name == "streaming" else f"{name}_"
        ratios = [s["step_seconds"] / r["step_seconds"] for r, s in zip(records["rounds"], records[name])]
        summary[f"{prefix}step_ratio"], summary[f"{prefix}step_ratio_low"], summary[f"{prefix}step_ratio_high"] = \
            log_ratio_interval(ratios)
        summary[f"{prefix}step_ratio_of_medians"] = summary[name]["step_seconds"] / summary["rounds"]["step_seconds"]
        per_sample = [(s["generation_seconds"] / s["samples"]) / (r["generation_seconds"] / r["samples"])
                      for r, s in zip(records["rounds"], records[name])]
        summary[f"{prefix}generation_per_sample_ratio"], summary[f"{prefix}generation_per_sample_ratio_low"], \
            summary[f"{prefix}generation_per_sample_ratio_high"] = log_ratio_interval(per_sample)
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({**summary, "records": records}, handle, indent=1)


if __name__ == "__main__":
    main()
