"""Scripted test doubles for the sampler: a generator whose rewards the test chooses, and a verifier that reads them.

A completion's text carries its reward (``"1.0"``), or ``"NONE"`` (the verifier returns None for it) or ``"RAISE"``
(the verifier raises on it). The generator records every request it receives, one list per call (= per round).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Sequence

from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion, Prompt

NONE = "NONE"
RAISE = "RAISE"


def reward_text(reward: float | str | None) -> str:
    if reward is None:
        return NONE
    return reward if isinstance(reward, str) else repr(float(reward))


class ScriptedGenerator:
    """``script[prompt_id]`` is the flat sequence of rewards that prompt's completions get, in the order drawn.

    A prompt whose script runs out gets ``default`` rewards. ``calls`` holds ``[(prompt_id, num_samples), ...]`` per
    ``generate`` call; ``fail_on_calls`` makes the listed (1-based) calls raise; ``max_return`` caps how many
    completions one request gets back (a backend that returns fewer than asked).
    """

    def __init__(self, script: dict | Callable[[object, int], float | str | None], default: float = 0.0,
                 fail_on_calls: Sequence[int] = (), max_return: int | None = None):
        self.script = script
        self.default = default
        self.fail_on_calls = set(fail_on_calls)
        self.max_return = max_return
        self.calls: list[list[tuple[object, int]]] = []
        self.num_attempts = 0
        self.drawn: dict[object, int] = defaultdict(int)

    def _reward(self, prompt_id: object, k: int) -> float | str | None:
        if callable(self.script):
            return self.script(prompt_id, k)
        seq = self.script.get(prompt_id, ())
        return seq[k] if k < len(seq) else self.default

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        self.num_attempts += 1
        if self.num_attempts in self.fail_on_calls:
            raise RuntimeError(f"scripted failure on call {self.num_attempts}")
        self.calls.append([(r.prompt.prompt_id, r.num_samples) for r in requests])
        outputs = []
        for request in requests:
            pid = request.prompt.prompt_id
            num = request.num_samples if self.max_return is None else min(request.num_samples, self.max_return)
            texts = [reward_text(self._reward(pid, self.drawn[pid] + j)) for j in range(num)]
            self.drawn[pid] += num
            outputs.append([Completion(pid, t) for t in texts])
        return outputs


class ScriptedVerifier:
    """Reads the reward from the completion text; counts its calls."""

    def __init__(self) -> None:
        self.num_calls = 0

    def __call__(self, prompts: Sequence[Prompt], completions: Sequence[Completion]) -> list[float | None]:
        self.num_calls += 1
        rewards: list[float | None] = []
        for completion in completions:
            if completion.text == RAISE:
                raise RuntimeError("scripted verifier failure")
            rewards.append(None if completion.text == NONE else float(completion.text))
        return rewards


def make_prompts(ids: Sequence[object]) -> list[Prompt]:
    return [Prompt(pid, f"prompt {pid}", answer="1") for pid in ids]


def requested_ids(generator: ScriptedGenerator) -> list[list[object]]:
    """Prompt ids requested in each round."""
    return [[pid for pid, _ in call] for call in generator.calls]
