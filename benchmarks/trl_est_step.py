"""TRL step time: ``AdaGRPOTrainer(mode="est")`` against TRL's own ``GRPOTrainer``, both at ``num_generations=8``.

Est draws exactly GRPO-n8's rows (16 per step here: 2 prompts x 8, handed out 11 + 5, 14 + 2, ... by the memory), so
the step differs only by Est's bookkeeping: the allocation from the memory, re-assigning the rows, the per-prompt
advantages, gathering the step's (key, n, k) and updating the memory. The aim: <= 1.05x GRPO's step time.

How: in one process, runs alternate A B A B ... (``--pairs`` of each), every run a fresh trainer on the built-in tiny
Qwen2 with TRL's plain transformers generation, 4 recurring prompts (each back every other step, so the memory moves Est's counts off the even
split), ``--steps`` steps; a callback times every optimizer step (generation, scoring, the loss and the update: what
TRL's ``train_runtime`` spends per step). Every completion is generated to its full 8 tokens (``min_new_tokens``), so
both sides generate and train on the same number of tokens and the difference is Est's own work. The first ``--warmup`` steps of each run are left out. The ratio is the
median of Est's step times over the median of GRPO's, and also per pair (each Est run against the GRPO run next to it);
both on one CPU thread. On a shared machine the pairs scatter by more than Est's cost, so the runs also time Est's own
functions inside each Est step (``TRLEst.assign_rows`` and ``TRLEst.finish``: everything Est adds but the gather,
which is a no-op on one process): their share ``s`` of the step gives the ratio ``1 / (1 - s)`` free of run-to-run
noise.

    python benchmarks/trl_est_step.py --out benchmarks/results/trl_est_step.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import torch


def est_reward(prompts, completions, **kwargs):
    """Half the prompts easy (always right), half hard (right when the completion's first character code is divisible
    by 4): pass rates that differ, so Est's memory moves its counts."""
    return [1.0 if int(p.split("+")[0]) % 2 else float(bool(c) and ord(c[0]) % 4 == 0)
            for p, c in zip(prompts, completions)]


def run(kind: str, steps: int, out_dir: str) -> tuple[list[float], list[float]]:
    """Step seconds of one run, and (Est) the seconds of each step spent in Est's own functions."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    times: list[float] = []
    own: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.start)

    prompts = [f"{a}+{a}=" for a in range(1, 5)]
    dataset = Dataset.from_dict({"prompt": prompts, "answer": [str(2 * a) for a in range(1, 5)]})
    common = dict(output_dir=out_dir, use_cpu=True, report_to=[], bf16=False, save_strategy="no",
                  num_generations=8, per_device_train_batch_size=16, scale_rewards="none", max_completion_length=8,
                  generation_kwargs={"min_new_tokens": 8},  # every row 8 tokens: both sides generate and train alike
                  max_steps=steps, logging_steps=1, learning_rate=1e-3, seed=0, disable_tqdm=True)
    torch.manual_seed(0)
    if kind == "est":
        from reinforce_ada.integrations.trl.est import TRLEst

        class TimedEst(TRLEst):  # Est's own work in a step: the allocation and rows, then advantages and memory
            def assign_rows(self, inputs):
                start = time.perf_counter()
                try:
                    return super().assign_rows(inputs)
                finally:
                    own.append(time.perf_counter() - start)

            def finish(self, *args, **kwargs):
                start = time.perf_counter()
                try:
                    return super().finish(*args, **kwargs)
                finally:
                    own[-1] += time.perf_counter() - start

        import reinforce_ada.integrations.trl.trainer as trainer_module

        trainer_module.TRLEst = TimedEst
        trainer = AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=est_reward,
                                 args=AdaGRPOConfig(mode="est", **common), train_dataset=dataset,
                                 processing_class=build_char_tokenizer(), callbacks=[Timer()])
    else:
        trainer = GRPOTrainer(model=build_tiny_model(), reward_funcs=est_reward, args=GRPOConfig(**common),
                              train_dataset=dataset, processing_class=build_char_tokenizer(), callbacks=[Timer()])
    trainer.train()
    if kind == "est":  # the memory did move the counts: the comparison is of Est as it runs, not of an even split
        moved = [h for h in trainer.state.log_history if h.get("ada/est/alloc_max", 8) > 8]
        assert moved, "Est's counts never left the even split"
    return times, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--out", default=None, help="write the results here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    per_run: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            for kind in ("est", "grpo"):
                times, own = run(kind, args.steps, os.path.join(tmp, f"{kind}{pair}"))
                times, own = times[args.warmup:], own[args.warmup:]
                per_run.append({"kind": kind, "pair": pair, "median_step_s": statistics.median(times),
                                "step_s": times, "est_own_s": own})
                print(f"pair {pair} {kind:4s}: median step {statistics.median(times) * 1e3:.1f} ms"
                      + (f", Est's own work {statistics.median(own) * 1e3:.2f} ms" if own else ""), flush=True)
    est = [t for r in per_run if r["kind"] == "est" for t in r["step_s"]]
    grpo = [t for r in per_run if r["kind"] == "grpo" for t in r["step_s"]]
    pairs = [a["median_step_s"] / b["median_step_s"] for a, b in zip(per_run[0::2], per_run[1::2])]
    own = [t for r in per_run for t in r["est_own_s"]]
    # within Est's own runs: its steps against the same steps without its bookkeeping (no run-to-run noise)
    own_share = statistics.median([o / t for r in per_run for o, t in zip(r["est_own_s"], r["step_s"])])
    result = {
        "command": "python " + " ".join(sys.argv),
        "what": "median optimizer-step seconds, AdaGRPOTrainer(mode='est') vs trl GRPOTrainer, num_generations=8, "
                "16 rows/step, tiny Qwen2, plain transformers generation, 1 CPU thread, runs alternating A B A B",
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "load_average_end": os.getloadavg()[0]},
        "est_median_step_s": statistics.median(est), "grpo_median_step_s": statistics.median(grpo),
        "ratio": statistics.median(est) / statistics.median(grpo), "ratio_per_pair": pairs,
        "est_own_median_s": statistics.median(own), "est_own_share_median": own_share,
        "ratio_without_noise": 1 / (1 - own_share), "runs": per_run,
    }
    print(f"Est / GRPO step time: {result['ratio']:.3f}x (per pair: {', '.join(f'{r:.3f}' for r in pairs)}); "
          f"Est's own work {result['est_own_median_s'] * 1e3:.2f} ms a step, {own_share:.1%} of its step "
          f"({result['ratio_without_noise']:.3f}x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
