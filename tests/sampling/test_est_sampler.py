"""Reinforce-Ada-Est (arXiv 2510.04996v3 Alg. 1) on scripted rewards: the allocation from the memory, one generation
call, every sample trained on, the weighted advantage (with rbar = 0 and 1), the memory's update; and the Seq
explicit weight (Sec. 3.2) on the round-based sampler."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from reinforce_ada.config import ConfigError, EstConfig, SamplerConfig
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.estimate import EstSampler
from reinforce_ada.sampling.memory import prompt_key
from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts

EPS = 1e-6


EST = dict(exit_rule="once", selection="all", advantage="pool")


def est_config(**est) -> SamplerConfig:
    return SamplerConfig.reinforce_ada_est(est=EstConfig(**est))


def test_one_call_every_sample_trained_on_and_the_weighted_advantage():
    # prompt a: 1 of 4 positive (rbar 0.25); b: all positive (rbar 1); c: none (rbar 0); d: 2 of 4
    script = {"a": [1, 0, 0, 0], "b": [1, 1, 1, 1], "c": [0, 0, 0, 0], "d": [1, 0, 1, 0]}
    generator = ScriptedGenerator(script)
    sampler = build_sampler(est_config(samples_per_prompt=4), generator, ScriptedVerifier())
    assert isinstance(sampler, EstSampler)
    batch = sampler.sample(make_prompts("abcd"))
    assert generator.calls == [[("a", 4), ("b", 4), ("c", 4), ("d", 4)]]  # one call, the even split of an empty memory
    assert [len(g.completions) for g in batch.groups] == [4, 4, 4, 4]  # no downsampling
    expected = []
    for rewards in script.values():
        rbar = sum(rewards) / len(rewards)
        expected += [(r - rbar) / math.sqrt(rbar + EPS) for r in rewards]
    assert batch.advantages.tolist() == pytest.approx(expected)
    assert batch.advantages[4:12].tolist() == [0.0] * 8  # rbar = 1 and rbar = 0: nothing moves
    assert batch.metrics["total_samples"] == batch.metrics["budget"] == batch.metrics["alloc_total"] == 16
    assert batch.metrics["grad_weight_max"] == pytest.approx(1 / math.sqrt(0.25 + EPS))


def test_the_memory_moves_the_budget_to_prompts_believed_hard():
    # "hard" passes 1 in 8; "easy" passes always
    script = lambda pid, k: float(k % 8 == 0) if pid == "hard" else 1.0  # noqa: E731
    generator = ScriptedGenerator(script)
    sampler = build_sampler(est_config(samples_per_prompt=8, min_samples=2, max_samples=14, decay=0.9),
                            generator, ScriptedVerifier())
    prompts = make_prompts(["hard", "easy"])
    sampler.sample(prompts)
    # after one visit of 8 samples: hard 1/8 -> p_hat = (1 + 1) / (8 + 2); easy 8/8 -> (8 + 1) / (8 + 2)
    p_hard, p_easy = 2 / 10, 9 / 10
    assert sampler.memory.pass_rate(prompts[0]) == pytest.approx(p_hard)
    counts, p_hat, budget = sampler.allocate(prompts)
    assert p_hat.tolist() == pytest.approx([p_hard, p_easy]) and budget == 16
    # 1/sqrt(p): 16 in the ratio sqrt(0.9/0.2) = 2.12 : 1 -> 10.87 : 5.13 -> 11 and 5
    assert counts.tolist() == [11, 5]
    batch = sampler.sample(prompts)
    assert generator.calls[-1] == [("hard", 11), ("easy", 5)]
    assert batch.metrics["alloc_max"] == 11 and batch.metrics["alloc_min"] == 5
    assert batch.metrics["by_pass_rate/0.2-0.4/num_samples"] == 11  # by the estimate the step was sampled with
    assert batch.metrics["by_pass_rate/0.8-1.0/num_samples"] == 5
    # the second visit decays the first: N_tot = 0.9 * 8 + 11
    assert sum(sampler.memory.evidence(prompt_key(prompts[0]))) == pytest.approx(0.9 * 8 + 11)


def test_graded_rewards_count_positives_by_the_threshold_and_weigh_by_the_pass_rate():
    """The baseline is the mean reward; the gradient weight is evaluated at the pass rate (the share of samples above
    positive_threshold, what the memory counts), not at the mean reward, which graded rewards make something else."""
    script = {"a": [0.9, 0.4, 0.4, 0.3]}  # positives (> 0.5): 1 of 4; mean reward 0.5
    sampler = build_sampler(est_config(samples_per_prompt=4, min_samples=1), ScriptedGenerator(script),
                            ScriptedVerifier())
    batch = sampler.sample(make_prompts("a"))
    assert sampler.memory.evidence(prompt_key(make_prompts("a")[0])) == pytest.approx((1.0, 3.0))
    rbar, pass_rate = 0.5, 0.25
    assert batch.advantages.tolist() == pytest.approx([(r - rbar) / math.sqrt(pass_rate + EPS) for r in script["a"]])


def test_rewards_outside_0_1_are_weighed_by_their_pass_rate():
    """A reward model's scores (here -3 .. 2): the weight is w(share above positive_threshold), never a clipped mean."""
    script = {"a": [2.0, -3.0, -3.0, -3.0], "b": [-1.0, -2.0, -1.0, -2.0]}  # pass rates 1/4 and 0
    sampler = build_sampler(est_config(samples_per_prompt=4, min_samples=1), ScriptedGenerator(script),
                            ScriptedVerifier())
    batch = sampler.sample(make_prompts("ab"))
    expected = [(r - np.mean(script["a"])) / math.sqrt(0.25 + EPS) for r in script["a"]]
    expected += [(r - np.mean(script["b"])) * 8.0 for r in script["b"]]  # 1 / sqrt(0 + eps), capped at 8
    assert batch.advantages.tolist() == pytest.approx(expected)


def test_variance_optimal_allocation_and_its_advantage():
    script = {"a": [1, 0, 0, 0], "b": [1, 1, 0, 0]}
    config = SamplerConfig.reinforce_ada_est(est=EstConfig(samples_per_prompt=4, allocation="variance-optimal"))
    sampler = build_sampler(config, ScriptedGenerator(script), ScriptedVerifier())
    batch = sampler.sample(make_prompts("ab"))
    expected = []
    for rewards in script.values():
        rbar = sum(rewards) / 4
        expected += [(r - rbar) / math.sqrt((rbar + EPS) * (1 - rbar + EPS)) for r in rewards]
    assert batch.advantages.tolist() == pytest.approx(expected)


def test_a_step_budget_that_cannot_be_spent_is_refused_before_generation():
    generator = ScriptedGenerator({})
    sampler = build_sampler(est_config(budget=100, max_samples=8), generator, ScriptedVerifier())
    with pytest.raises(ConfigError, match="est.budget = 100 is above 4 prompts x est.max_samples=8 = 32"):
        sampler.sample(make_prompts("abcd"))
    assert generator.calls == []


def test_est_state_round_trips_through_a_checkpoint_state():
    script = lambda pid, k: float(k % 3 == 0)  # noqa: E731
    a = build_sampler(est_config(samples_per_prompt=4), ScriptedGenerator(script), ScriptedVerifier())
    prompts = make_prompts("abc")
    a.sample(prompts)
    b = build_sampler(est_config(samples_per_prompt=4), ScriptedGenerator(script), ScriptedVerifier())
    b.load_state_dict(a.state_dict())
    assert np.array_equal(a.allocate(prompts)[0], b.allocate(prompts)[0])
    assert [b.memory.pass_rate(p) for p in prompts] == [a.memory.pass_rate(p) for p in prompts]


# -- the config -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("settings, message", [
    (dict(mode="est"), "mode='est' draws each prompt's samples in one call"),
    (dict(est={"decay": 0.5}), "est.* are settings of mode='est'"),
    (dict(objective="logg"), "unknown objective 'logg'"),
    (dict(objective="log", sample_share=2.0), "sample_share must be a number in \\[0, 1\\]"),
    (dict(max_grad_weight=0.5), "max_grad_weight must be >= 1"),
    (dict(mode="est", exit_rule="once", selection="all", advantage="pool", memory={"half_life": 4.0}),
     "memory.half_life is not used by mode='est'"),
    (dict(mode="est", exit_rule="once", selection="all", advantage="pool", normalize_std=True,
          est={"allocation": "variance-optimal"}), "Appendix B"),
    (dict(est={"samples_per_prompt": 4, "budget": 64}), "not both"),
])
def test_bad_est_and_objective_settings_are_named(settings, message):
    with pytest.raises(ConfigError, match=message):
        SamplerConfig(**settings)


@pytest.mark.fault("an objective or objective_eps whose weights are degenerate (--objective power:1e308, "
                   "--objective-eps 1e300), or a weight setting under the linear objective, which reads none",
                   "exit 2 naming the weight, its value and the pass rate, before anything loads (accepted, and every "
                   "gradient was zero without a word)")
@pytest.mark.parametrize("settings, message", [
    (dict(objective="power:1e308"), r"objective='power:1e308' with objective_eps=1e-06 gives w_grad=0 at pass rate "
                                    r"0.015625: .* would zero every gradient"),
    (dict(objective="log", objective_eps=1e300), r"gives w_grad=1e-300 at pass rate 0.015625"),
    (dict(mode="est", **EST, objective_eps=1e300), r"gives w_sample=1e-150 .* would break the allocation"),
])
def test_an_objective_whose_weights_vanish_or_overflow_is_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        SamplerConfig(**settings)
    SamplerConfig(objective="power:20")  # steep, but its weights are numbers: accepted
    SamplerConfig(objective="log", objective_eps=0.5)
    for unread in (dict(objective_eps=1e300), dict(max_grad_weight=2.0), dict(sample_share=0.5)):  # linear: w = 1
        with pytest.raises(ConfigError, match=r"is a setting of the objective's weight, and the linear objective"):
            SamplerConfig(**unread)


@pytest.mark.fault("a setting ada-est does not read (--group-size 8, max_rounds, min_positive, unexited, streaming.*)",
                   "exit 2 naming it, as memory.half_life already was (it was ignored without a word)")
@pytest.mark.parametrize("setting, shown", [(dict(group_size=8), "group_size=8"), (dict(max_rounds=2), "max_rounds=2"),
                                            (dict(min_positive=2), "min_positive=2"),
                                            (dict(unexited="drop"), "unexited='drop'"),
                                            (dict(streaming={"target": 0.5}), "streaming.\\*")])
def test_a_setting_est_does_not_read_is_refused_as_its_memory_settings_are(setting, shown):
    with pytest.raises(ConfigError, match=rf"^{shown} is not used by mode='est' \(strategy ada-est\)"):
        SamplerConfig(mode="est", **EST, **setting)


def test_a_sample_share_out_of_range_suggests_what_exists():
    with pytest.raises(ConfigError, match=r"^sample_share must be a number in \[0, 1\] \(got 1.5\); Appendix B's "
                                          r"variance-optimal split is est.allocation='variance-optimal'$"):
        SamplerConfig.reinforce_ada_est(sample_share=1.5)


def test_defaults_follow_the_mode():
    assert (SamplerConfig().objective_in_use, SamplerConfig().sample_share_in_use) == ("linear", 0.0)
    assert not SamplerConfig().weights_gradient
    est = SamplerConfig.reinforce_ada_est()
    assert (est.objective_in_use, est.sample_share_in_use, est.weights_gradient) == ("log", 0.5, True)
    # the whole weight in samples (App. C.2's ablation): no gradient weight
    assert not SamplerConfig.reinforce_ada_est(sample_share=1.0).weights_gradient
    assert SamplerConfig(objective="log").weights_gradient  # Seq with the explicit 1/p_hat


# -- Seq's explicit weight (Sec. 3.2) ---------------------------------------------------------------------------------
def test_seq_with_the_log_objective_multiplies_each_kept_advantage_by_the_capped_weight():
    script = {"a": [1, 0, 0, 0, 0, 0, 0, 0], "b": [1, 1, 0, 0]}
    prompts = make_prompts("ab")
    config = dict(samples_per_round=4, max_rounds=2, group_size=4, exit_rule="positive", seed=3)
    plain = build_sampler(SamplerConfig(**config), ScriptedGenerator(script), ScriptedVerifier()).sample(prompts)
    weighted = build_sampler(SamplerConfig(objective="log", **config), ScriptedGenerator(script),
                             ScriptedVerifier()).sample(prompts)
    # same draws and groups; the advantages times min(1 / (p_pool + eps), 8): a's pool is 1 of 4 (exits at the first
    # positive), b's 2 of 4
    p_pool = np.repeat([g.pool_mean for g in plain.groups], [len(g.completions) for g in plain.groups])
    weight = np.minimum(1 / (p_pool + EPS), 8.0)
    assert weighted.advantages.tolist() == pytest.approx((plain.advantages * weight).tolist())
    assert "grad_weight_mean" in weighted.metrics and "grad_weight_mean" not in plain.metrics


def test_seq_with_a_graded_verifier_weighs_at_the_pools_pass_rate_not_its_mean_reward():
    """Graded rewards (0.9 counts as a success, 0.4 does not): the weight is w(share above positive_threshold)."""
    script = {"a": [0.9, 0.4, 0.4, 0.4]}  # mean 0.525, pass rate 1/4
    config = SamplerConfig(samples_per_round=4, max_rounds=1, group_size=4, objective="log", exit_rule="once")
    batch = build_sampler(config, ScriptedGenerator(script), ScriptedVerifier()).sample(make_prompts("a"))
    plain = np.array(script["a"]) - np.mean(script["a"])
    assert batch.advantages.tolist() == pytest.approx((plain / (0.25 + EPS)).tolist())


def test_the_cap_binds_for_a_rare_success():
    script = {"a": [0] * 15 + [1]}  # one success in 16: 1/p = 16, capped at 8
    config = SamplerConfig(samples_per_round=16, max_rounds=1, group_size=16, objective="log", selection="all")
    batch = build_sampler(config, ScriptedGenerator(script), ScriptedVerifier()).sample(make_prompts("a"))
    plain = np.array([r - 1 / 16 for r in script["a"]])
    assert batch.advantages.tolist() == pytest.approx((plain * 8.0).tolist())
    assert batch.metrics["grad_weight_capped_fraction"] == 1.0


def test_est_memory_is_seeded_from_a_select_prompts_file(tmp_path):
    prompts = make_prompts("ab")
    rates = tmp_path / "pass_rates.jsonl"
    rates.write_text("".join(json.dumps({"key": prompt_key(p), "pass_rate": rate, "num_samples": 16}) + "\n"
                             for p, rate in zip(prompts, (1 / 16, 12 / 16))))
    config = SamplerConfig.reinforce_ada_est(memory={"seed": str(rates)}, est=EstConfig(samples_per_prompt=8))
    sampler = build_sampler(config, ScriptedGenerator({}), ScriptedVerifier())
    # 1 of 16 -> (1 + 1) / (16 + 2); 12 of 16 -> (12 + 1) / (16 + 2): the first visit already favours the hard prompt
    assert [sampler.memory.pass_rate(p) for p in prompts] == pytest.approx([2 / 18, 13 / 18])
    counts, _, _ = sampler.allocate(prompts)
    assert counts.tolist() == [11, 5] and counts.sum() == 16


@pytest.mark.parametrize("est", [{}, {"allocation": "variance-optimal"}])
def test_the_integrations_functions_give_the_samplers_counts_advantages_and_memory(est):
    """est_allocation / est_advantages / remember_visits -- what TRL's and verl's Est call with their own generation and
    rewards -- reproduce EstSampler's counts and memory bit for bit and its advantages to the mean's last bit, visit after visit,
    for groups of unequal size."""
    from reinforce_ada.sampling.estimate import est_advantages, est_allocation, est_memory, remember_visits

    rng = np.random.default_rng(0)
    rates = {pid: rate for pid, rate in zip("abcdef", [0.05, 0.2, 0.5, 0.8, 1.0, 0.0])}
    script = lambda pid, k: float(rng.random() < rates[pid])  # noqa: E731
    config = est_config(samples_per_prompt=8, **est)
    sampler = build_sampler(config, ScriptedGenerator(script), ScriptedVerifier())
    memory = est_memory(config)
    prompts = make_prompts("abcdef")
    for _ in range(4):
        counts, p_hat, _ = est_allocation(memory, prompts, config)
        batch = sampler.sample(prompts)
        assert [len(g.completions) for g in batch.groups] == counts.tolist()
        rewards = np.array([c.reward for g in batch.groups for c in g.completions])
        index = np.repeat([g.prompt_id for g in batch.groups], counts)
        advantages, _ = est_advantages(rewards, index, config)
        np.testing.assert_allclose(advantages, batch.advantages, rtol=1e-12, atol=1e-15)  # the mean's last bit
        positives = [sum(c.reward > config.positive_threshold for c in g.completions) for g in batch.groups]
        remember_visits(memory, prompts, positives, [n - k for n, k in zip(counts, positives)])
        assert memory.state_dict() == sampler.memory.state_dict()
    assert len(set(counts.tolist())) > 1  # the allocation moved off the even split
