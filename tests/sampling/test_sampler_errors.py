"""Bad input fails early with a message naming the problem; verifier and generator failures never lose a prompt."""

from __future__ import annotations

import math

import pytest

from scripted_fakes import RAISE, ScriptedGenerator, ScriptedVerifier, make_prompts, requested_ids
from reinforce_ada.config import ConfigError, DynamicSamplingConfig, SamplerConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler
from reinforce_ada.sampling.protocols import GenerationError, VerifierError
from reinforce_ada.types import Completion, Prompt, PromptPool


# -- configuration ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, field", [
    (dict(group_size=1), "group_size"),
    (dict(group_size=0), "group_size"),
    (dict(samples_per_round=2, max_rounds=2, group_size=5), "group_size=5 exceeds"),
    (dict(samples_per_round=0), "samples_per_round"),
    (dict(samples_per_round=-3), "samples_per_round"),
    (dict(max_rounds=0), "max_rounds"),
    (dict(samples_per_round=2.0), "samples_per_round"),
    (dict(max_rounds=True), "max_rounds"),
    (dict(min_positive=0), "min_positive"),
    (dict(exit_rule="balance"), "exit_rule='balance'"),
    (dict(selection="first"), "selection='first'"),
    (dict(advantage="grpo"), "advantage='grpo'"),
    (dict(allocation="adaptive-ish"), "allocation"),
    (dict(unexited="discard"), "unexited"),
    (dict(on_verifier_failure="skip"), "on_verifier_failure"),
    (dict(unexited=lambda: None), "unexited"),
    (dict(positive_threshold=float("nan")), "positive_threshold"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(epsilon=float("inf")), "epsilon"),
    (dict(generation_retries=-1), "generation_retries"),
])
def test_sampler_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ConfigError, match=field.replace("(", r"\(")):
        SamplerConfig(**kwargs)


def test_config_error_lists_the_registered_names():
    with pytest.raises(ConfigError, match="balanced.*once.*positive"):
        SamplerConfig(exit_rule="nope")


@pytest.mark.parametrize("kwargs, field", [
    (dict(batch_size=0), "batch_size"),
    (dict(group_size=1), "group_size"),
    (dict(max_generation_batches=0), "max_generation_batches"),
    (dict(generation_batch_size=0), "generation_batch_size"),
    (dict(on_verifier_failure="ignore"), "on_verifier_failure"),
])
def test_dynamic_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        DynamicSamplingConfig(**kwargs)


def test_dynamic_config_defaults_generation_batch_size():
    assert DynamicSamplingConfig(batch_size=7).generation_batch_size == 7


# -- prompts and backends: rejected before any generation --------------------------------------------------------------
def test_empty_prompt_list_fails_before_generation():
    generator = ScriptedGenerator({})
    with pytest.raises(ValueError, match="prompts is empty"):
        AdaptiveSampler(generator, ScriptedVerifier()).sample([])
    assert generator.num_attempts == 0


def test_duplicate_prompt_ids_fail_before_generation():
    generator = ScriptedGenerator({})
    with pytest.raises(ValueError, match=r"prompts\[2\]\.prompt_id='a' is duplicated"):
        AdaptiveSampler(generator, ScriptedVerifier()).sample(make_prompts(["a", "b", "a"]))
    assert generator.num_attempts == 0


def test_non_prompt_items_fail_before_generation():
    generator = ScriptedGenerator({})
    with pytest.raises(TypeError, match=r"prompts\[1\] is a str"):
        AdaptiveSampler(generator, ScriptedVerifier()).sample([Prompt(0, "x"), "what is 1+1?"])
    assert generator.num_attempts == 0


def test_backends_are_checked_at_construction():
    with pytest.raises(TypeError, match="verifier must be callable"):
        AdaptiveSampler(ScriptedGenerator({}), verifier="math")
    with pytest.raises(TypeError, match=r"generator must have a generate\(requests\) method \(got function\)"):
        AdaptiveSampler(lambda requests: [], ScriptedVerifier())
    with pytest.raises(TypeError, match="verifier must be callable"):
        DynamicSampler(ScriptedGenerator({}), verifier=None)


# -- verifier misbehaviour -------------------------------------------------------------------------------------------
@pytest.mark.fault("reward NaN / +inf / -inf", "a counted verifier failure (exit 3 under max_verifier_failure_rate)")
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rewards_are_counted_failures(bad):
    generator = ScriptedGenerator({"p": [1.0, bad, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]})
    batch = AdaptiveSampler(generator, ScriptedVerifier(), SamplerConfig(on_verifier_failure="drop")
                            ).sample(make_prompts(["p"]))
    pool = batch.pools["p"]
    assert pool.num_verifier_failures == 1 and pool.count == pool.num_drawn - 1
    assert all(math.isfinite(c.reward) for c in pool.completions)


@pytest.mark.fault("reward list of the wrong length", "every completion a counted verifier failure")
def test_reward_list_of_the_wrong_length_is_counted_failures():
    def short_verifier(prompts, completions):
        return [1.0] * (len(completions) - 1)

    batch = AdaptiveSampler(ScriptedGenerator({}), short_verifier, SamplerConfig(on_verifier_failure="drop")
                            ).sample(make_prompts(["p"]))
    drawn = batch.pools["p"].num_drawn
    assert drawn > 0 and batch.pools["p"].num_verifier_failures == drawn
    assert batch.metrics["num_verifier_failures"] == drawn


@pytest.mark.fault("reward function returns a dict / str / number / nested list",
                   "every completion a counted verifier failure, never read as keys or characters")
@pytest.mark.parametrize("answer", [
    lambda n: {i: 1.0 for i in range(n)},
    lambda n: "1" * n,
    lambda n: 1.0,
    lambda n: [[1.0]] * n,
    lambda n: ["1.0"] * n,
    lambda n: [complex(1, 0)] * n,
], ids=["dict", "str", "number", "nested", "strings", "complex"])
def test_rewards_that_are_not_a_list_of_real_numbers_are_counted_failures(answer):
    def verifier(prompts, completions):
        return answer(len(completions))

    batch = AdaptiveSampler(ScriptedGenerator({}), verifier, SamplerConfig(on_verifier_failure="drop")
                            ).sample(make_prompts(["p"]))
    drawn = batch.pools["p"].num_drawn
    assert drawn > 0 and batch.pools["p"].num_verifier_failures == drawn and batch.pools["p"].count == 0


def test_rewards_as_an_array_bools_or_numpy_numbers_are_read_as_numbers():
    import numpy as np

    def verifier(prompts, completions):
        n = len(completions)
        return np.array([1.0] * n) if n > 1 else [np.float32(1.0)]

    batch = AdaptiveSampler(ScriptedGenerator({}), verifier).sample(make_prompts(["p"]))
    assert batch.pools["p"].num_verifier_failures == 0 and batch.pools["p"].mean == 1.0
    batch = AdaptiveSampler(ScriptedGenerator({}), lambda p, c: [True] * len(c)).sample(make_prompts(["p"]))
    assert batch.pools["p"].num_verifier_failures == 0 and batch.pools["p"].mean == 1.0


def test_verifier_receives_each_completion_with_its_prompt():
    seen = []

    def verifier(prompts, completions):
        seen.extend((p.prompt_id, p.answer, c.prompt_id) for p, c in zip(prompts, completions))
        return [1.0 if i % 2 else 0.0 for i in range(len(completions))]

    AdaptiveSampler(ScriptedGenerator({}), verifier).sample(make_prompts(["a", "b"]))
    assert seen == [("a", "1", "a")] * 8 + [("b", "1", "b")] * 8


@pytest.mark.parametrize("failure", [None, RAISE])
def test_verifier_failure_scored_zero_is_counted(failure):
    script = {"p": [1.0, failure, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0], "q": [1.0, 0.0] * 4}
    verifier = ScriptedVerifier()
    batch = AdaptiveSampler(ScriptedGenerator(script), verifier,
                            SamplerConfig(on_verifier_failure="zero")).sample(make_prompts(["p", "q"]))
    pool = batch.pools["p"]
    assert (pool.count, pool.num_drawn, pool.num_verifier_failures, pool.num_positive) == (8, 8, 1, 2)
    assert pool.mean == pytest.approx(2 / 8)
    assert batch.metrics["num_verifier_failures"] == 1.0 and batch.rounds[0].num_verifier_failures == 1
    assert len(batch.groups) == 2
    if failure == RAISE:
        assert verifier.num_calls == 1 + 16  # the batch call, then one call per completion


@pytest.mark.parametrize("failure", [None, RAISE])
def test_verifier_failure_dropped_is_counted(failure):
    script = {"p": [1.0, failure, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]}
    batch = AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(),
                            SamplerConfig(on_verifier_failure="drop")).sample(make_prompts(["p"]))
    pool = batch.pools["p"]
    assert (pool.count, pool.num_drawn, pool.num_verifier_failures) == (7, 8, 1)
    assert pool.mean == pytest.approx(2 / 7)
    assert batch.metrics["total_samples"] == 8 and batch.metrics["num_verifier_failures"] == 1.0
    assert batch.rounds[0].reward_mean == pytest.approx(2 / 7)
    assert len(batch.groups) == 1


def test_a_prompt_whose_every_completion_fails_is_counted_empty():
    script = {"broken": [None] * 32, "ok": [1.0, 0.0] * 4}
    batch = AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(),
                            SamplerConfig(on_verifier_failure="drop")).sample(make_prompts(["broken", "ok"]))
    assert batch.num_empty == 1 and batch.metrics["num_empty"] == 1.0
    assert [g.prompt_id for g in batch.groups] == ["ok"]
    assert batch.pools["broken"].num_drawn == 32 and batch.pools["broken"].num_verifier_failures == 32
    assert len(batch.groups) + batch.num_dropped_unexited + batch.num_empty == batch.num_prompts


def test_a_verifier_that_always_raises_scores_zero_without_crashing():
    def broken(prompts, completions):
        raise ConnectionError("grader down")

    batch = AdaptiveSampler(ScriptedGenerator({}), broken, SamplerConfig.grpo(4)).sample(make_prompts(range(3)))
    assert batch.metrics["num_verifier_failures"] == 12.0
    assert len(batch.groups) == 3 and batch.advantages.tolist() == [0.0] * 12


# -- generator misbehaviour ------------------------------------------------------------------------------------------
def test_generator_failure_is_retried():
    script = {"p": [1.0, 0.0] * 4}
    generator = ScriptedGenerator(script, fail_on_calls=[1, 2])
    batch = AdaptiveSampler(generator, ScriptedVerifier(), SamplerConfig(generation_retries=2)).sample(
        make_prompts(["p"]))
    assert generator.num_attempts == 3 and batch.generation_error is None and batch.pools["p"].exit_round == 1


def test_generator_failure_in_round_one_raises():
    generator = ScriptedGenerator({}, fail_on_calls=[1, 2, 3])
    with pytest.raises(GenerationError, match="generator failed 3 times: RuntimeError"):
        AdaptiveSampler(generator, ScriptedVerifier(), SamplerConfig(generation_retries=2)).sample(
            make_prompts(["p"]))
    assert generator.num_attempts == 3


def test_generator_failure_in_round_two_keeps_round_one_work():
    script = {"mixed": [1.0, 0.0] * 4, "hard": [0.0] * 8}
    generator = ScriptedGenerator(script, fail_on_calls=[2, 3, 4])
    batch = AdaptiveSampler(generator, ScriptedVerifier(), SamplerConfig(generation_retries=2)).sample(
        make_prompts(["mixed", "hard"]))
    assert generator.num_attempts == 4 and requested_ids(generator) == [["mixed", "hard"]]
    assert "scripted failure on call 4" in batch.generation_error
    assert len(batch.rounds) == 1
    assert [g.prompt_id for g in batch.groups] == ["mixed", "hard"]
    assert batch.pools["hard"].exit_round is None and batch.pools["hard"].count == 8
    assert len(batch.advantages) == 8


def test_dynamic_sampler_keeps_earlier_batches_when_generation_fails_later():
    script = {i: [1.0, 0.0, 0.0, 0.0] for i in range(8)}
    generator = ScriptedGenerator(script, fail_on_calls=[2, 3, 4])
    config = DynamicSamplingConfig(batch_size=8, group_size=4, generation_batch_size=2, generation_retries=2)
    batch = DynamicSampler(generator, ScriptedVerifier(), config).sample(make_prompts(range(8)))
    assert [g.prompt_id for g in batch.groups] == [0, 1] and batch.generation_error is not None
    with pytest.raises(GenerationError):
        DynamicSampler(ScriptedGenerator({}, fail_on_calls=[1, 2, 3]), ScriptedVerifier(), config).sample(
            make_prompts(range(8)))


class _Malformed:
    def __init__(self, outputs):
        self.outputs = outputs

    def generate(self, requests):
        return self.outputs(requests)


def test_generator_returning_the_wrong_number_of_lists_is_an_error():
    generator = _Malformed(lambda requests: [[Completion(r.prompt.prompt_id, "1")] for r in requests[:-1]])
    with pytest.raises(GenerationError, match="returned 1 outputs for 2 requests"):
        AdaptiveSampler(generator, ScriptedVerifier()).sample(make_prompts(["a", "b"]))


def test_generator_returning_too_many_completions_is_an_error():
    generator = _Malformed(lambda requests: [[Completion(r.prompt.prompt_id, "1")] * (r.num_samples + 1)
                                             for r in requests])
    with pytest.raises(GenerationError, match="returned 9 completions for prompt 'a', which asked for 8"):
        AdaptiveSampler(generator, ScriptedVerifier()).sample(make_prompts(["a"]))


def test_generator_returning_fewer_completions_is_accounted():
    generator = _Malformed(lambda requests: [[Completion(r.prompt.prompt_id, t) for t in ("1.0", "0.0", "0.0")]
                                             for r in requests])
    batch = AdaptiveSampler(generator, ScriptedVerifier()).sample(make_prompts(["a"]))
    pool = batch.pools["a"]
    # 3 per round: after round 2 the pool (2 pos, 4 neg) can fill a balanced group.
    assert (pool.num_drawn, pool.count, pool.exit_round) == (6, 6, 2)
    assert [c.round for c in pool.completions] == [1, 1, 1, 2, 2, 2]


# -- the pool's running statistics ----------------------------------------------------------------------------------
def test_pool_rejects_unscored_completions_and_tracks_moments():
    pool = PromptPool("p", positive_threshold=0.5)
    with pytest.raises(ValueError, match="unscored completion to the pool of prompt 'p'"):
        pool.add(Completion("p", "x"))
    for r in (2.0, -1.0, 0.5, 4.0):
        pool.add(Completion("p", "x", reward=r))
    mean = (2.0 - 1.0 + 0.5 + 4.0) / 4
    var = ((2.0 - mean) ** 2 + (-1.0 - mean) ** 2 + (0.5 - mean) ** 2 + (4.0 - mean) ** 2) / 3
    assert pool.mean == pytest.approx(mean) and pool.variance == pytest.approx(var)
    assert pool.std == pytest.approx(math.sqrt(var))
    assert (pool.num_positive, pool.num_negative) == (2, 2)  # 0.5 is not > 0.5
    single = PromptPool("s")
    single.add(Completion("s", "x", reward=1.0))
    assert single.variance == 0.0 and single.std == 0.0
