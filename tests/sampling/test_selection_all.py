"""``selection="all"``: the whole pool is the training group (every generated sample is trained on).

Scripted pools through the round-based and the streaming sampler: the group holds every completion of the pool,
the advantages are the whole-pool ones, importance weights are 1, ``unexited`` still decides about pools that never
exited, and the batch metrics count the larger groups.
"""

from __future__ import annotations

import numpy as np
import pytest
from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts

from reinforce_ada.config import SamplerConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.factory import build_sampler

ZEROS8 = [0.0] * 8
# "hard": 2 positives of 16 (exits in round 2); "easy": 4 of 8 (round 1); "never": 32 negatives (never exits)
SCRIPT = {"hard": ZEROS8 + [1.0, 1.0, 0, 0, 0, 0, 0, 0], "easy": [1.0, 0.0] * 4, "never": [0.0] * 32}


def sample(config, script=SCRIPT):
    return AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(), config).sample(make_prompts(list(script)))


def by_prompt(batch):
    out, start = {}, 0
    for group in batch.groups:
        size = len(group.completions)
        out[group.prompt_id] = (group.rewards, batch.advantages[start:start + size].tolist(),
                                None if batch.weights is None else batch.weights[start:start + size].tolist())
        start += size
    assert start == len(batch.advantages)
    return out


def test_every_pool_sample_is_trained_on_with_whole_pool_advantages():
    batch = sample(SamplerConfig(samples_per_round=8, max_rounds=4, group_size=4, selection="all"))
    groups = by_prompt(batch)
    for pid in ("hard", "easy", "never"):
        pool = batch.pools[pid]
        assert [c.text for c in batch.groups[[g.prompt_id for g in batch.groups].index(pid)].completions] == \
            [c.text for c in pool.completions]  # the whole pool, in the order drawn
    rewards, advantages, _ = groups["hard"]
    assert len(rewards) == 16 and sum(rewards) == 2
    assert advantages == pytest.approx([r - 2 / 16 for r in rewards])
    rewards, advantages, _ = groups["easy"]
    assert len(rewards) == 8 and advantages == pytest.approx([r - 0.5 for r in rewards])
    rewards, advantages, _ = groups["never"]  # unexited="keep" (default): kept whole, all-zero advantages
    assert len(rewards) == 32 and advantages == [0.0] * 32
    assert len(batch.advantages) == 16 + 8 + 32 == batch.metrics["total_samples"]
    assert batch.metrics["num_groups"] == 3 and batch.metrics["zero_variance_fraction"] == pytest.approx(1 / 3)
    assert batch.metrics["group_reward_mean"] == pytest.approx(6 / 56)


def test_importance_weights_are_one_and_unexited_drop_still_drops():
    batch = sample(SamplerConfig(selection="all", importance_weights=True))
    for pid, (rewards, _, weights) in by_prompt(batch).items():
        assert weights == pytest.approx([1.0] * len(rewards)), pid
    batch = sample(SamplerConfig(selection="all", unexited="drop"))
    assert sorted(g.prompt_id for g in batch.groups) == ["easy", "hard"]
    assert batch.num_dropped_unexited == 1 and len(batch.advantages) == 16 + 8


def test_group_size_still_sets_the_exit_and_the_minimum_pool():
    # M=2 < n=4: the pool holds both classes after round 1 but exits only once it can fill a group of n
    batch = sample(SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4, selection="all"),
                   {"p": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]})
    assert batch.pools["p"].exit_round == 2 and len(batch.groups[0].completions) == 4
    # a pool smaller than n (the backend returned fewer than asked; it never exited) is kept as it is
    generator = ScriptedGenerator({"p": [0.0] * 4}, max_return=1)
    config = SamplerConfig(samples_per_round=2, max_rounds=2, group_size=4, selection="all")
    batch = AdaptiveSampler(generator, ScriptedVerifier(), config).sample(make_prompts(["p"]))
    assert batch.pools["p"].count == 2 and len(batch.groups[0].completions) == 2

def test_streaming_sampler_keeps_the_whole_pool_too():
    config = SamplerConfig(samples_per_round=1, max_rounds=8, group_size=4, exit_rule="mixed", selection="all",
                           mode="streaming", streaming=dict(allocation="fixed"))
    script = {"late": [0.0] * 5 + [1.0, 0.0, 0.0], "quick": [1.0, 0.0, 0.0, 0.0], "never": [0.0] * 8}
    sampler = build_sampler(config, ScriptedGenerator(script), ScriptedVerifier())
    batch = sampler.sample(make_prompts(list(script)))
    sizes = {g.prompt_id: len(g.completions) for g in batch.groups}
    assert sizes == {pid: batch.pools[pid].count for pid in script}
    assert sizes["late"] == 6 and sizes["quick"] == 4 and sizes["never"] == 8
    rewards, advantages, _ = by_prompt(batch)["late"]
    assert advantages == pytest.approx([r - 1 / 6 for r in rewards])
    np.testing.assert_array_equal(batch.advantages[-8:], np.zeros(8))
