"""Every sampler runs one record -> exit -> select -> batch path (sampling/pools.py) and one scoring module
(sampling/scoring.py); the streaming scheduler ends on it without reaching into a sampler."""

import numpy as np
import pytest

from reinforce_ada.config import SamplerConfig
from reinforce_ada.sampling.pools import GroupSelector, PoolSampler, add_scored, check_exit
from reinforce_ada.sampling.protocols import GenerationError, GenerationRequest, SampleRequest
from reinforce_ada.sampling.scheduler import StreamingOptions, StreamingScheduler
from reinforce_ada.sampling.scoring import sample_and_score, score_outputs
from reinforce_ada.sampling.streaming import StreamingSampler
from reinforce_ada.types import Completion, Prompt, PromptPool


def _verifier(prompts, completions):
    return [None if c.text == "x" else float(c.text) for c in completions]


def test_score_outputs_keeps_one_list_per_prompt_and_skips_the_verifier_when_nothing_was_made():
    prompts = [Prompt(0, "a"), Prompt(1, "b"), Prompt(2, "c")]
    outputs = [[Completion(0, "1"), Completion(0, "x")], [], [Completion(2, "0")]]
    assert score_outputs(_verifier, prompts, outputs) == [[1.0, None], [], [0.0]]

    def never(prompts, completions):
        raise AssertionError("called with nothing to score")

    assert score_outputs(never, prompts, [[], [], []]) == [[], [], []]


def test_sample_and_score_refuses_an_answer_with_the_wrong_number_of_lists():
    class Short:
        def generate(self, requests):
            return [[Completion(0, "1")]]

    requests = [GenerationRequest(Prompt(0, "a"), 1), GenerationRequest(Prompt(1, "b"), 1)]
    with pytest.raises(GenerationError, match="1 outputs for 2 requests"):
        sample_and_score(Short(), _verifier, requests)


@pytest.mark.parametrize("on_failure, count", [("zero", 2), ("drop", 1)])
def test_a_verifier_failure_is_counted_then_scored_zero_or_dropped(on_failure, count):
    pool = PromptPool(0, 0.5)
    assert add_scored(pool, Completion(0, "1"), 1.0, on_failure) == 1.0
    assert add_scored(pool, Completion(0, "x"), None, on_failure) == (0.0 if on_failure == "zero" else None)
    assert (pool.count, pool.num_verifier_failures, pool.num_positive) == (count, 1, 1)
    assert check_exit(pool, lambda pos, neg, n: True, 4, min_count=count + 1, round_number=3) is False
    assert check_exit(pool, lambda pos, neg, n: True, 4, min_count=count, round_number=3) and pool.exit_round == 3


def test_the_scheduler_finishes_with_a_group_selector_and_the_streaming_sampler_is_a_pool_sampler():
    cfg = SamplerConfig(samples_per_round=2, max_rounds=1, group_size=2, exit_rule="once", seed=5)
    prompts = [Prompt(i, f"p{i}") for i in range(3)]
    scheduler = StreamingScheduler(prompts, cfg, StreamingOptions(allocation="fixed"))
    requests = scheduler.want()
    assert all(isinstance(r, SampleRequest) for r in requests) and len(requests) == 6
    scheduler.record([(r, Completion(r.prompt.prompt_id, "t"), float(r.index % 2)) for r in requests])
    selector = GroupSelector(cfg)
    batch = scheduler.finish(selector, prompts, None)
    assert [g.prompt.prompt_id for g in batch.groups] == [0, 1, 2] and batch.metrics["num_submitted"] == 6.0

    class Engine:
        async def complete(self, prompt, request_id):
            return Completion(prompt.prompt_id, "1")

    sampler = StreamingSampler(Engine(), _verifier, cfg)
    assert isinstance(sampler, PoolSampler) and sampler.rng is sampler.selector.rng
    sampler.rng = np.random.default_rng(1)  # an integration may reseed per step; selection uses the new one
    assert sampler.selector.rng is sampler.rng
    assert sampler.state_dict()["rng"] == np.random.default_rng(1).bit_generator.state
