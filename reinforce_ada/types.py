"""Small typed containers passed between layers (generator -> sampler -> trainer / integrations).

Vocabulary: a *prompt* is sampled in *rounds*; every *completion* drawn for it this step lands in its *pool*; the
*group* is the ``group_size`` completions kept for training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator

import numpy as np

PromptId = Hashable


@dataclass(slots=True)
class Prompt:
    """One training prompt: its id, the text (or chat messages) sent to the model, and the reference answer."""

    prompt_id: PromptId
    prompt: str | list[dict[str, str]]
    answer: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Completion:
    """One sampled completion and, once scored, its reward."""

    prompt_id: PromptId
    text: str
    token_ids: list[int] | tuple[int, ...] = ()
    logprobs: list[float] | None = None
    """Per-token log-probabilities under the sampling policy, when the backend returns them."""
    reward: float | None = None
    finish_reason: str = "stop"
    """``"stop"`` (end of sequence / stop string) or ``"length"`` (hit ``max_new_tokens``)."""
    round: int = 0
    """The sampling round (1-based) that produced this completion."""


@dataclass(slots=True)
class PromptPool:
    """All completions drawn for one prompt in this step, with running reward statistics.

    ``mean`` and ``m2`` are Welford's running mean and sum of squared deviations, exact for any real reward. ``m2``
    is kept in units of ``scale**2`` (``scale`` = the largest ``|reward|`` seen), so it cannot overflow for any finite
    reward (e.g. 1e300); :attr:`std` is ``scale * sqrt(m2 / (count - 1))``.
    """

    prompt_id: PromptId
    positive_threshold: float = 0.5
    completions: list[Completion] = field(default_factory=list)
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    scale: float = 1.0
    num_positive: int = 0
    num_drawn: int = 0
    """Completions requested and returned for this prompt, including those dropped after a verifier failure."""
    num_verifier_failures: int = 0
    num_rounds: int = 0
    exit_round: int | None = None
    """The round in which the exit rule was first met; ``None`` if the prompt never exited."""

    def add(self, completion: Completion) -> None:
        reward = completion.reward
        if reward is None:
            raise ValueError(f"cannot add an unscored completion to the pool of prompt {self.prompt_id!r}")
        self.completions.append(completion)
        self.count += 1
        if abs(reward) > self.scale:  # rescale m2 to the new unit
            self.m2 *= (self.scale / abs(reward)) ** 2
            self.scale = abs(reward)
        delta = reward / self.scale - self.mean / self.scale
        self.mean += delta / self.count * self.scale
        self.m2 += delta * (reward / self.scale - self.mean / self.scale)
        if reward > self.positive_threshold:
            self.num_positive += 1

    @property
    def num_negative(self) -> int:
        return self.count - self.num_positive

    @property
    def exited(self) -> bool:
        return self.exit_round is not None

    @property
    def variance(self) -> float:
        """Sample variance (ddof=1); 0 for fewer than two completions (``inf`` past float range: use :attr:`std`)."""
        return self.std**2

    @property
    def std(self) -> float:
        return self.scale * math.sqrt(max(self.m2 / (self.count - 1), 0.0)) if self.count > 1 else 0.0


@dataclass(slots=True)
class Group:
    """The completions kept for training from one prompt, with the pool statistics of that prompt."""

    prompt: Prompt
    completions: list[Completion]
    pool_mean: float
    pool_std: float
    pool_count: int
    pool_num_positive: int
    exited: bool
    """False for a fallback group from a prompt that never met its exit rule."""

    @property
    def prompt_id(self) -> PromptId:
        return self.prompt.prompt_id

    @property
    def rewards(self) -> list[float]:
        return [c.reward for c in self.completions]  # type: ignore[misc]

    @property
    def has_signal(self) -> bool:
        """True when the kept rewards are not all equal (GRPO would get a non-zero gradient)."""
        rewards = self.rewards
        return len(rewards) > 1 and max(rewards) != min(rewards)


@dataclass(slots=True)
class RoundStats:
    """What happened in one sampling round."""

    round: int
    num_active: int
    num_samples: int
    num_exits: int
    reward_mean: float
    num_verifier_failures: int = 0


@dataclass
class SampledBatch:
    """The result of one sampling step: the kept groups plus everything needed to train on and report them.

    ``advantages`` (and ``weights``, when importance weighting is on) are aligned with :meth:`completions`.
    """

    groups: list[Group]
    pools: dict[PromptId, PromptPool]
    rounds: list[RoundStats]
    advantages: np.ndarray
    weights: np.ndarray | None = None
    num_prompts: int = 0
    num_dropped_unexited: int = 0
    """Prompts that never exited and were dropped (``unexited="drop"``)."""
    num_empty: int = 0
    """Prompts left with no scored completion (every one failed verification and was dropped)."""
    generation_error: str | None = None
    """Set when generation failed mid-step; the step ends early with the work already done."""
    metrics: dict[str, float] = field(default_factory=dict)

    def completions(self) -> list[Completion]:
        return [c for g in self.groups for c in g.completions]

    def __iter__(self) -> Iterator[Group]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)
