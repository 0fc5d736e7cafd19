"""reasoning-gym's partial credit never makes a wrong answer positive (the datasets' real scorers, no stand-ins)."""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")

import reasoning_gym  # noqa: E402

from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.data import get_task  # noqa: E402
from reinforce_ada.sampling.sampler import AdaptiveSampler  # noqa: E402
from reinforce_ada.types import Completion  # noqa: E402
from reinforce_ada.verifiers import get_verifier  # noqa: E402


def misspelt(word: str) -> str:
    """The word with its last letter changed: wrong, but close."""
    return word[:-1] + ("a" if word[-1] != "a" else "b")


@pytest.mark.parametrize("dataset", ["spell_backward", "word_sorting"])
def test_close_wrong_answers_score_zero_and_are_counted(dataset):
    task = get_task(f"reasoning-gym:{dataset}")
    prompts = task.prompts(6, seed=0)
    raw = reasoning_gym.get_score_answer_fn(dataset)
    wrong = [misspelt(str(p.answer)) for p in prompts]
    credits = [raw(w, p.metadata["reasoning_gym"]["entry"]) for w, p in zip(wrong, prompts)]
    assert all(0.5 < c < 1.0 for c in credits), credits  # the real scorer gives these wrong answers > 0.5

    verifier = task.verifier()
    right = [Completion(p.prompt_id, f"<answer>{p.answer}</answer>") for p in prompts]
    close = [Completion(p.prompt_id, f"<answer>{w}</answer>") for p, w in zip(prompts, wrong)]
    assert verifier(prompts + prompts, right + close) == [1.0] * 6 + [0.0] * 6
    assert verifier.stats["partial_credit"] == 6

    raw_scores = get_verifier("reasoning-gym", partial_credit=True)(prompts, close)
    assert raw_scores == pytest.approx(credits)


def test_a_pool_of_close_wrong_answers_has_no_positive():
    """Through the sampler: with positive_threshold 0.5 the balanced rule must not see the misspellings as correct."""
    task = get_task("reasoning-gym:spell_backward")
    prompts = task.prompts(3, seed=1)

    class CloseButWrong:
        def generate(self, requests):
            return [[Completion(r.prompt.prompt_id, f"<answer>{misspelt(str(r.prompt.answer))}</answer>")
                     for _ in range(r.num_samples)] for r in requests]

    batch = AdaptiveSampler(CloseButWrong(), task.verifier(), SamplerConfig(samples_per_round=4, max_rounds=2)).sample(
        prompts)
    assert all(pool.num_positive == 0 and not pool.exited for pool in batch.pools.values())
    assert batch.metrics["reward_mean"] == 0.0
