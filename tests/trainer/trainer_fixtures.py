"""Tiny prompts, a forgiving verifier and the tiny model, shared by the trainer tests."""

import random

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
