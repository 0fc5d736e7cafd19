"""Scripted-generator tests of the reference semantics: rounds, exits, downsampling and whole-pool advantages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts, requested_ids
from reinforce_ada.config import DynamicSamplingConfig, SamplerConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler

ZEROS8 = [0.0] * 8
ONES8 = [1.0] * 8


def run(script, config, ids=None, **generator_kwargs):
    generator = ScriptedGenerator(script, **generator_kwargs)
    batch = AdaptiveSampler(generator, ScriptedVerifier(), config).sample(make_prompts(ids or list(script)))
    return batch, generator


def advantages_by_prompt(batch):
    out, start = {}, 0
    for group in batch.groups:
        out[group.prompt_id] = (group.rewards, batch.advantages[start:start + len(group.completions)].tolist())
        start += len(group.completions)
    assert start == len(batch.advantages)
    return out


def test_balanced_exit_in_round_two_uses_the_whole_pool_mean():
    # Paper setup M=8, N=4, n=4. "hard" has no positive in round 1 and two in round 2: 2 pos / 14 neg after 16.
    script = {"hard": ZEROS8 + [1.0, 1.0, 0, 0, 0, 0, 0, 0], "easy": [1.0, 0.0] * 4}
    batch, generator = run(script, SamplerConfig(samples_per_round=8, max_rounds=4, group_size=4))
    assert requested_ids(generator) == [["hard", "easy"], ["hard"]]
    assert [c for call in generator.calls for _, c in call] == [8, 8, 8]
    hard, easy = batch.pools["hard"], batch.pools["easy"]
    assert (hard.exit_round, hard.count, hard.num_positive) == (2, 16, 2)
    assert (easy.exit_round, easy.count, easy.num_positive) == (1, 8, 4)
    by_prompt = advantages_by_prompt(batch)
    rewards, advantages = by_prompt["hard"]
    assert sorted(rewards) == [0.0, 0.0, 1.0, 1.0]
    for r, a in zip(rewards, advantages):
        expected = 1.0 - 2 / 16 if r == 1.0 else 0.0 - 2 / 16
        assert a == pytest.approx(expected)
    rewards, advantages = by_prompt["easy"]
    assert sorted(rewards) == [0.0, 0.0, 1.0, 1.0]
    assert sorted(advantages) == pytest.approx([0.0 - 4 / 8, 0.0 - 4 / 8, 1.0 - 4 / 8, 1.0 - 4 / 8])
    assert [s.num_exits for s in batch.rounds] == [1, 1]
    assert [s.num_active for s in batch.rounds] == [2, 1]
    assert batch.metrics["total_samples"] == 24 and batch.metrics["samples_per_prompt"] == 12
    assert batch.metrics["rounds_used"] == 2 and batch.metrics["exited_fraction"] == 1.0


def test_pool_std_normalisation_uses_the_whole_pool_with_epsilon_once():
    script = {"hard": ZEROS8 + [1.0, 1.0, 0, 0, 0, 0, 0, 0]}
    batch, _ = run(script, SamplerConfig(normalize_std=True, epsilon=0.25))
    mean = 2 / 16
    std = math.sqrt((2 * (1 - mean) ** 2 + 14 * (0 - mean) ** 2) / (16 - 1))
    rewards, advantages = advantages_by_prompt(batch)["hard"]
    for r, a in zip(rewards, advantages):
        assert a == pytest.approx((r - mean) / (std + 0.25))


def test_group_baseline_ignores_the_pool():
    script = {"hard": ZEROS8 + [1.0, 1.0, 0, 0, 0, 0, 0, 0]}
    batch, _ = run(script, SamplerConfig(advantage="group"))
    rewards, advantages = advantages_by_prompt(batch)["hard"]
    assert advantages == pytest.approx([r - (1.0 + 1.0 + 0.0 + 0.0) / 4 for r in rewards])


def test_positive_exit_rule_exits_on_the_first_correct_and_tops_up_with_negatives():
    script = {"p": ZEROS8 + [0, 0, 1.0, 0, 0, 0, 0, 0], "q": [1.0] + [0.0] * 7}
    batch, generator = run(script, SamplerConfig(exit_rule="positive"))
    assert requested_ids(generator) == [["p", "q"], ["p"]]
    assert batch.pools["p"].exit_round == 2 and batch.pools["q"].exit_round == 1
    rewards, advantages = advantages_by_prompt(batch)["p"]
    assert sorted(rewards) == [0.0, 0.0, 0.0, 1.0]  # balanced selection, one positive available
    assert sorted(advantages) == pytest.approx([0 - 1 / 16] * 3 + [1 - 1 / 16])


def test_positive_exit_rule_with_min_positive():
    script = {"p": [1.0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 1.0, 0, 0, 0, 0]}
    batch, _ = run(script, SamplerConfig(exit_rule="positive", min_positive=2))
    assert batch.pools["p"].exit_round == 2


def test_balanced_rule_needs_both_classes():
    # All correct: a balanced prompt never exits and is sampled for the whole budget (M * N = 32).
    batch, generator = run({"easy": ONES8 * 4}, SamplerConfig())
    assert requested_ids(generator) == [["easy"]] * 4
    pool = batch.pools["easy"]
    assert pool.exit_round is None and pool.num_drawn == 32
    assert batch.metrics["never_exited_fraction"] == 1.0
    (group,) = batch.groups
    assert not group.exited and group.rewards == [1.0] * 4 and not group.has_signal
    assert batch.advantages.tolist() == [0.0] * 4
    assert batch.metrics["zero_variance_fraction"] == 1.0 and batch.metrics["signal_fraction"] == 0.0


def test_unexited_drop_counts_the_prompt():
    script = {"easy": ONES8 * 4, "mixed": [1.0, 0.0] * 4}
    batch, _ = run(script, SamplerConfig(unexited="drop"))
    assert [g.prompt_id for g in batch.groups] == ["mixed"]
    assert batch.num_dropped_unexited == 1 and batch.metrics["num_dropped_unexited"] == 1.0
    assert len(batch.groups) + batch.num_dropped_unexited + batch.num_empty == batch.num_prompts == 2
    batch, _ = run(script, SamplerConfig(unexited="keep"))
    assert [g.prompt_id for g in batch.groups] == ["easy", "mixed"]
    assert batch.num_dropped_unexited == 0


def test_grpo_is_one_round_with_a_group_baseline():
    cfg = SamplerConfig.grpo(4)
    assert (cfg.samples_per_round, cfg.max_rounds, cfg.group_size, cfg.exit_rule) == (4, 1, 4, "once")
    script = {"a": [1.0, 0.0, 0.0, 0.0], "b": [0.0] * 4, "c": [0.5, 1.0, 0.25, 1.0]}
    batch, generator = run(script, cfg)
    assert requested_ids(generator) == [["a", "b", "c"]]
    by_prompt = advantages_by_prompt(batch)
    assert by_prompt["a"] == ([1.0, 0.0, 0.0, 0.0], pytest.approx([0.75, -0.25, -0.25, -0.25]))
    assert by_prompt["b"][1] == [0.0] * 4
    mean_c = (0.5 + 1.0 + 0.25 + 1.0) / 4
    assert by_prompt["c"][1] == pytest.approx([0.5 - mean_c, 1.0 - mean_c, 0.25 - mean_c, 1.0 - mean_c])
    assert batch.metrics["signal_fraction"] == pytest.approx(2 / 3)
    assert all(p.exit_round == 1 for p in batch.pools.values())


def test_custom_exit_rule_callable():
    seen = []

    def three_positives(num_positive, num_negative, group_size):
        seen.append((num_positive, num_negative, group_size))
        return num_positive >= 3

    script = {"p": [1.0, 0, 0, 0, 0, 0, 0, 0] + [1.0, 0, 0, 0, 0, 0, 0, 0] + [1.0, 1.0, 0, 0, 0, 0, 0, 0]}
    batch, generator = run(script, SamplerConfig(exit_rule=three_positives))
    assert seen == [(1, 7, 4), (2, 14, 4), (4, 20, 4)]
    assert batch.pools["p"].exit_round == 3 and len(generator.calls) == 3
    assert sorted(batch.groups[0].rewards) == [0.0, 0.0, 1.0, 1.0]


def test_custom_selection_callable_gets_the_pool_classes():
    def first_n(is_positive, group_size, rng):
        return np.arange(group_size)

    batch, _ = run({"p": [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]}, SamplerConfig(selection=first_n))
    assert batch.groups[0].rewards == [1.0, 0.0, 1.0, 0.0]


def test_exit_waits_for_a_full_group_when_m_is_below_n():
    # M=2 < n=4: balanced already holds after round 1 (1 pos, 1 neg) but the pool cannot fill a group yet.
    script = {"p": [1.0, 0.0, 1.0, 0.0]}
    batch, generator = run(script, SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4))
    assert len(generator.calls) == 2 and batch.pools["p"].exit_round == 2
    assert len(batch.groups[0].completions) == 4


def test_importance_weights_through_the_sampler():
    # 2 positives of 16; the balanced group keeps 2 of 2 positives and 2 of 14 negatives.
    script = {"hard": ZEROS8 + [1.0, 1.0, 0, 0, 0, 0, 0, 0]}
    batch, _ = run(script, SamplerConfig(importance_weights=True))
    rewards, _ = advantages_by_prompt(batch)["hard"]
    expected = [4 * 2 / (16 * 2) if r == 1.0 else 4 * 14 / (16 * 2) for r in rewards]
    assert batch.weights.tolist() == pytest.approx(expected)
    assert sum(expected) / 4 == pytest.approx(1.0)


def kept_positions(batch):
    """For each group, the positions in its pool of the kept completions."""
    return [[next(i for i, x in enumerate(batch.pools[g.prompt_id].completions) if x is c) for c in g.completions]
            for g in batch.groups]


def test_seeded_selection_is_reproducible_and_state_dict_round_trips():
    pattern = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    prompts = make_prompts(range(20))

    def sampler(seed):  # every step draws the same pattern for every prompt, so only selection differs
        generator = ScriptedGenerator(lambda pid, k: pattern[k % 8])
        return AdaptiveSampler(generator, ScriptedVerifier(), SamplerConfig(seed=seed))

    a = sampler(7)
    state = a.state_dict()
    first = kept_positions(a.sample(prompts))
    second = kept_positions(a.sample(prompts))
    assert first != second  # the rng advances between steps
    a.load_state_dict(state)
    assert kept_positions(a.sample(prompts)) == first
    assert kept_positions(sampler(7).sample(prompts)) == first
    assert kept_positions(sampler(8).sample(prompts)) != first
    # Within-class choices are random, not "the first k" of each class.
    assert any(pos != [0, 3, 1, 2] for pos in first)


# -- DAPO dynamic sampling ------------------------------------------------------------------------------------------
def dapo_script():
    # Prompts 0..11: every third prompt has signal (mixed rewards), the others are all-correct or all-wrong.
    return {i: ([1.0, 0.0, 0.0, 1.0] if i % 3 == 0 else ([1.0] * 4 if i % 3 == 1 else [0.0] * 4)) for i in range(12)}


def test_dynamic_sampler_collects_exactly_batch_size_signal_groups():
    generator = ScriptedGenerator(dapo_script())
    config = DynamicSamplingConfig(batch_size=3, group_size=4, generation_batch_size=3, max_generation_batches=8)
    batch = DynamicSampler(generator, ScriptedVerifier(), config).sample(make_prompts(range(12)))
    assert requested_ids(generator) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [g.prompt_id for g in batch.groups] == [0, 3, 6]
    assert all(g.has_signal for g in batch.groups)
    assert batch.metrics["num_prompts_consumed"] == 9.0 and batch.metrics["batch_filled"] == 1.0
    assert batch.metrics["signal_fraction"] == pytest.approx(3 / 9)
    assert batch.metrics["total_samples"] == 9 * 4
    assert batch.advantages.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5] * 3)  # group-local baseline
    assert batch.num_prompts == 9


def test_dynamic_sampler_truncates_to_batch_size():
    generator = ScriptedGenerator({i: [1.0, 0.0, 1.0, 0.0] for i in range(10)})
    config = DynamicSamplingConfig(batch_size=3, group_size=4, generation_batch_size=4)
    batch = DynamicSampler(generator, ScriptedVerifier(), config).sample(make_prompts(range(10)))
    assert len(batch.groups) == 3 and len(generator.calls) == 1 and len(batch.advantages) == 12


def test_dynamic_sampler_respects_max_generation_batches():
    generator = ScriptedGenerator(dapo_script())
    config = DynamicSamplingConfig(batch_size=3, group_size=4, generation_batch_size=2, max_generation_batches=2)
    batch = DynamicSampler(generator, ScriptedVerifier(), config).sample(make_prompts(range(12)))
    assert len(generator.calls) == 2
    assert [g.prompt_id for g in batch.groups] == [0, 3]
    assert batch.metrics["batch_filled"] == 0.0 and batch.metrics["num_prompts_consumed"] == 4.0


def test_dynamic_sampler_stops_when_prompts_run_out_and_rejects_an_empty_stream():
    generator = ScriptedGenerator(dapo_script())
    config = DynamicSamplingConfig(batch_size=10, group_size=4, generation_batch_size=4)
    batch = DynamicSampler(generator, ScriptedVerifier(), config).sample(make_prompts(range(6)))
    assert len(generator.calls) == 2 and [g.prompt_id for g in batch.groups] == [0, 3]
    with pytest.raises(ValueError, match="prompts is empty"):
        DynamicSampler(generator, ScriptedVerifier(), config).sample(iter([]))
