"""Per-sample failures in the round-based sampler: a generator that reports some samples failed for good
(``PartialGenerationError``) costs only those samples; nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts
from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler
from reinforce_ada.sampling.protocols import GenerationError, PartialGenerationError


class DropsSamples(ScriptedGenerator):
    """A ScriptedGenerator whose listed (call, prompt) pairs lose ``lose`` samples, reported as failed."""

    def __init__(self, *args, lose: dict[tuple[int, object], int], **kwargs):
        super().__init__(*args, **kwargs)
        self.lose = lose

    def generate(self, requests):
        outputs = super().generate(requests)
        call = len(self.calls)
        failed = [min(self.lose.get((call, r.prompt.prompt_id), 0), len(out)) for r, out in zip(requests, outputs)]
        if not any(failed):
            return outputs
        kept = [out[:len(out) - num] for out, num in zip(outputs, failed)]
        raise PartialGenerationError(f"{sum(failed)} samples failed", kept, failed)


def script(pid, k):
    return float((k + ord(str(pid)[0])) % 3 == 0)


def test_nothing_failing_gives_the_same_batch_as_a_plain_generator():
    cfg = SamplerConfig(samples_per_round=4, max_rounds=3, group_size=4, generation_retries=2)
    plain = AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(), cfg).sample(make_prompts("abcd"))
    wrapped = AdaptiveSampler(DropsSamples(script, lose={}), ScriptedVerifier(), cfg).sample(make_prompts("abcd"))
    assert [[c.text for c in g.completions] for g in plain.groups] == [[c.text for c in g.completions]
                                                                        for g in wrapped.groups]
    np.testing.assert_array_equal(plain.advantages, wrapped.advantages)
    assert plain.metrics == wrapped.metrics and plain.metrics["num_failed_samples"] == 0.0


def test_failed_samples_are_asked_for_again_and_the_rest_is_kept():
    cfg = SamplerConfig(samples_per_round=4, max_rounds=1, group_size=2, exit_rule="once", generation_retries=1)
    generator = DropsSamples(lambda pid, k: 1.0, lose={(1, "b"): 3})
    batch = AdaptiveSampler(generator, ScriptedVerifier(), cfg).sample(make_prompts("abc"))
    assert generator.calls == [[("a", 4), ("b", 4), ("c", 4)], [("b", 3)]]  # only the failed samples again
    assert {pid: p.num_drawn for pid, p in batch.pools.items()} == {"a": 4, "b": 4, "c": 4}
    assert batch.metrics["num_failed_samples"] == 0.0


def test_samples_still_failed_after_the_retries_are_counted_and_the_prompt_kept():
    cfg = SamplerConfig(samples_per_round=4, max_rounds=2, group_size=2, generation_retries=1)
    generator = DropsSamples(lambda pid, k: float(k % 2), lose={(1, "b"): 4, (2, "b"): 4})
    batch = AdaptiveSampler(generator, ScriptedVerifier(), cfg).sample(make_prompts("abc"))
    assert batch.metrics["num_failed_samples"] == 4.0
    assert batch.generation_error is None
    assert batch.pools["b"].num_drawn == 4 and batch.pools["b"].exited  # round 2 gave it its samples
    assert sorted(g.prompt.prompt_id for g in batch.groups) == ["a", "b", "c"]


def test_dynamic_sampling_sums_the_failed_samples():
    cfg = DynamicSamplingConfig(batch_size=2, group_size=2, generation_batch_size=2, max_generation_batches=2,
                                generation_retries=0)
    generator = DropsSamples(lambda pid, k: float(k % 2), lose={(1, "a"): 1})
    batch = DynamicSampler(generator, ScriptedVerifier(), cfg).sample(make_prompts("abcd"))
    assert batch.metrics["num_failed_samples"] == 1.0


def test_a_malformed_partial_error_is_a_generation_error():
    class Broken:
        def generate(self, requests):
            raise PartialGenerationError("x", [[]], [1, 2])

    with pytest.raises(GenerationError, match="1 outputs and 2 failure counts"):
        AdaptiveSampler(Broken(), ScriptedVerifier(), SamplerConfig()).sample(make_prompts("a"))
