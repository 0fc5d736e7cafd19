"""The streaming sampler against one batched call drawing the same samples on the same vLLM engine, and HF vs vLLM.

One engine is built from the 2-head tiny Qwen2 held in memory (head_dim 32, what vLLM's CPU attention serves;
float32, eager): ``--engine colocated`` (default) is the trainer's -- ``VLLMGenerator`` in this process, which the
streaming sampler steps itself, one request per sample; ``--engine asyncllm`` is ``VLLMAsyncEngine`` (vLLM's
``AsyncLLM``, its engine core and worker in processes of their own). The same model in the HF backend
(``HFGenerator``) is the throughput reference. After one warm-up step (not reported), ``--repeats`` times, one after
the other on the one engine:

* ``streaming``: the streaming sampler's ``sample`` of ``--prompts`` prompts, with the options the trainer's sampler
  factory gives this engine (Ada-balanced, group 4, M=4, N=2; on the CPU at most one speculative extra sample per
  prompt and wave; verifier: the parity of the first sampled token, so prompts get signal and exit and their
  in-flight samples are aborted);
* ``batched``: one ``generate`` call drawing as many samples of each prompt as that streaming step drew, all at once
  (what a round-based sampler's single round asks of the engine);
* ``hf``: the same batched request on ``HFGenerator`` (one padded ``generate``).

Reported: the streaming / batched wall-clock ratio of each repeat, their geometric mean with its 95% t-interval (on
the logarithms) and median; the samples aborted when their prompt exited and the tokens they would have generated
(aborted x the mean length of a finished sample in that step: an aborted request's partial tokens are not returned),
and tokens/s of vLLM (batched) and HF.

    python benchmarks/vllm_streaming.py --prompts 64 --repeats 40 --json benchmarks/results/vllm_streaming.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from vllm_trainer_streaming import log_ratio_interval, parse_option
from reinforce_ada.config import SamplerConfig
from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.types import Prompt


def parity_verifier(prompts, completions):
    return [1.0 if c.token_ids and c.token_ids[0] % 2 else 0.0 for c in completions]


def build_engine(kind: str, model, tokenizer, max_new_tokens: int):
    if kind == "colocated":
        from reinforce_ada.generation.vllm import VLLMGenerator

        return VLLMGenerator(model, tokenizer, dtype="float32", max_new_tokens=max_new_tokens,
                             use_chat_template=False, engine_kwargs={"enforce_eager": True})
    from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine

    return VLLMAsyncEngine.for_model(model, tokenizer, dtype="float32", max_new_tokens=max_new_tokens,
                                     use_chat_template=False, enforce_eager=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["colocated", "asyncllm"], default="colocated")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--json", default=None)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a scheduler option (StreamingOptions) over the factory's, e.g. fill_idle_per_wave=null; "
                             "repeatable")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from reinforce_ada.generation.hf import HFGenerator

    model, tokenizer = build_tiny_model(num_heads=2, seed=0), build_char_tokenizer()
    started = time.perf_counter()
    engine = build_engine(args.engine, model, tokenizer, args.max_new_tokens)
    build_seconds = time.perf_counter() - started
    hf = HFGenerator(model, tokenizer, max_new_tokens=args.max_new_tokens, use_chat_template=False, seed=0)
    config = SamplerConfig(mode="streaming", samples_per_round=4, max_rounds=2, group_size=4)
    options = dict(parse_option(item) for item in args.option)
    sampler = build_sampler(config, engine, parity_verifier, **options)  # the trainer's options for this engine
    rounds = []
    try:
        sampler.sample([Prompt(-1 - i, f"{i}=") for i in range(args.prompts)])  # warm-up, not reported
        hf.generate([GenerationRequest(Prompt(-1, "1="), 4)])
        for r in range(args.repeats):
            prompts = [Prompt(1000 * r + i, f"{i}+{i % 7}=") for i in range(args.prompts)]

            aborted = engine.num_aborted
            t0 = time.perf_counter()
            batch = sampler.sample(prompts)
            streaming = time.perf_counter() - t0
            n_aborted = engine.num_aborted - aborted
            drawn = {pid: pool.num_drawn for pid, pool in batch.pools.items()}
            requests = [GenerationRequest(p, drawn[p.prompt_id]) for p in prompts if drawn.get(p.prompt_id)]
            t0 = time.perf_counter()
            groups = engine.generate(requests)
            batched = time.perf_counter() - t0
            kept = [c for pool in batch.pools.values() for c in pool.completions]
            mean_len = statistics.fmean(len(c.token_ids) for c in kept)
            vllm_tokens = sum(len(c.token_ids) for g in groups for c in g)
            t0 = time.perf_counter()
            hf_groups = hf.generate(requests)
            hf_seconds = time.perf_counter() - t0
            hf_tokens = sum(len(c.token_ids) for g in hf_groups for c in g)
            rounds.append(dict(samples=sum(drawn.values()), streaming_seconds=streaming, batched_seconds=batched,
                               ratio=streaming / batched, aborted=n_aborted, mean_sample_tokens=mean_len,
                               tokens_saved_estimate=n_aborted * mean_len, vllm_tokens=vllm_tokens,
                               vllm_tokens_per_s=vllm_tokens / batched, hf_tokens=hf_tokens,
                               hf_seconds=hf_seconds, hf_tokens_per_s=hf_tokens / hf_seconds))
            print(json.dumps(rounds[-1]), flush=True)
    finally:
        engine.close()
    mean, low, high = log_ratio_interval([r["ratio"] for r in rounds])
    summary = dict(engine=args.engine, options=options, build_seconds=build_seconds, prompts=args.prompts,
                   max_new_tokens=args.max_new_tokens, repeats=args.repeats,
                   ratio_geometric_mean=mean, ratio_ci95=[low, high],
                   median_ratio=statistics.median(r["ratio"] for r in rounds),
                   total_aborted=sum(r["aborted"] for r in rounds),
                   total_tokens_saved_estimate=sum(r["tokens_saved_estimate"] for r in rounds),
                   vllm_over_hf_tokens_per_s=statistics.median(r["vllm_tokens_per_s"] / r["hf_tokens_per_s"]
                                                               for r in rounds),
                   rounds=rounds)
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=1)


if __name__ == "__main__":
    main()
