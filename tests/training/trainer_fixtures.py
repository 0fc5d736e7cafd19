"""Tiny prompts, a forgiving verifier and the tiny model, shared by the trainer tests."""

import random

from reinforce_ada.config import STRATEGY_SAMPLER_SETTINGS, TrainConfig
from reinforce_ada.types import Prompt


def addition_prompts(num: int, seed: int) -> list[Prompt]:
    rng = random.Random(seed)
    prompts = []
    for i in range(num):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        prompts.append(Prompt(f"{seed}-{i}", f"{a}+{b}=", str(a + b)))
    return prompts


def digit_verifier(prompts, completions):
    """Reward 1 when the completion starts with the answer's first digit: easy enough that a random tiny model
    gets some right, so every test step has signal."""
    return [1.0 if c.text[:1] == str(p.answer)[:1] else 0.0 for p, c in zip(prompts, completions)]


def small_config(folder, **overrides) -> TrainConfig:
    """A few cheap steps of the tiny model (model="injected": the test passes the model in); a ``sampler`` mapping
    given is merged into the small sampler (M=4, N=2, n=4)."""
    values = dict(model="injected", max_steps=2, batch_size=4, max_new_tokens=4, eval_prompts=8, eval_samples=2,
                  learning_rate=1e-2, output_dir=str(folder), num_threads=1)
    strategy = overrides.get("strategy", "ada-balanced")
    sets = STRATEGY_SAMPLER_SETTINGS[strategy]  # grpo and dapo set M and N
    rounds = {} if strategy == "ada-est" else dict(samples_per_round=4, max_rounds=2, group_size=4)  # est: unused
    sampler = {k: v for k, v in rounds.items() if k not in sets}
    sampler.update(overrides.pop("sampler", {}))
    values.update(overrides, sampler=sampler)
    return TrainConfig(**values)


def tiny_parts(model_seed: int = 0, eval_seed: int = 2) -> dict:
    """What a test passes to ``Trainer``: the tiny model (``model_seed``), its tokenizer, 64 training prompts, 8
    held-out ones (``eval_seed``) and :func:`digit_verifier`."""
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    return dict(model=build_tiny_model(seed=model_seed), tokenizer=build_char_tokenizer(),
                train_prompts=addition_prompts(64, 1), eval_prompts=addition_prompts(8, eval_seed),
                verifier=digit_verifier)


def folder_bytes(folder) -> dict:
    """Every file below ``folder`` and its bytes: equal before and after means nothing was written."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
