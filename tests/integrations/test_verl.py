"""The verl plugin on CPU: estimator registration and numerics, DataProto conversion, and the generation wrapper
driven by a fake rollout with verl's ``generate_sequences(prompts: DataProto) -> DataProto`` signature.

Needs verl installed (see docs/verl.md for the command); skipped otherwise.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

verl = pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import get_adv_estimator_fn  # noqa: E402

from reinforce_ada.config import ConfigError, SamplerConfig  # noqa: E402
from reinforce_ada.core.advantages import compute_advantages  # noqa: E402
from reinforce_ada.integrations.verl import (  # noqa: E402
    ReinforceAdaRollout,
    assemble_training_batch,
    completions_from_dataproto,
    compute_reinforce_ada_advantage,
    groups_from_dataproto,
    prompts_from_dataproto,
)
from reinforce_ada.integrations.verl.convert import PAD_KEY, POOL_STATS_KEY  # noqa: E402
from reinforce_ada.sampling.protocols import GenerationError  # noqa: E402

PROMPT_LEN, RESPONSE_LEN = 3, 6


# -- a fake rollout with verl's signature --------------------------------------------------------------------------
class FakeRolloutWorkerGroup:
    """Stands in for verl's rollout worker group: ``generate_sequences(prompts: DataProto) -> DataProto``.

    Like verl's data-parallel dispatch it refuses a batch not divisible by ``world_size``. Row ``j`` of prompt ``u``
    in call ``c`` (1-based) gets reward ``reward_of(u, c, j)``; every generated row gets a fresh sample id as its
    first response token, so duplicated rows are detectable. ``with_scores=False`` leaves ``rm_scores`` out, as a
    rollout without verl's streaming reward loop does.
    """

    def __init__(self, reward_of, world_size: int = 1, with_scores: bool = True):
        self.reward_of = reward_of
        self.world_size = world_size
        self.with_scores = with_scores
        self.call_sizes: list[int] = []
        self.next_sample_id = 100

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        if len(prompts) % self.world_size:
            raise AssertionError(f"batch of {len(prompts)} not divisible by world size {self.world_size}")
        self.call_sizes.append(len(prompts))
        call = len(self.call_sizes)
        uids = prompts.non_tensor_batch["uid"].tolist()
        num = len(uids)
        responses = torch.zeros(num, RESPONSE_LEN, dtype=torch.long)
        attention = torch.zeros(num, PROMPT_LEN + RESPONSE_LEN, dtype=torch.long)
        attention[:, :PROMPT_LEN] = 1
        rm_scores = torch.zeros(num, RESPONSE_LEN)
        seen: dict[str, int] = {}
        for i, uid in enumerate(uids):
            j = seen.get(uid, 0)
            seen[uid] = j + 1
            length = 1 + (self.next_sample_id % RESPONSE_LEN)
            responses[i, 0] = self.next_sample_id
            responses[i, 1:length] = 7
            attention[i, PROMPT_LEN:PROMPT_LEN + length] = 1
            rm_scores[i, length - 1] = self.reward_of(uid, call, j)
            self.next_sample_id += 1
        prompt_ids = torch.tensor([[1 + (hash(u) % 50)] * PROMPT_LEN for u in uids])
        tensors = {
            "prompts": prompt_ids,
            "responses": responses,
            "response_mask": attention[:, PROMPT_LEN:].clone(),
            "input_ids": torch.cat([prompt_ids, responses], dim=1),
            "attention_mask": attention,
            "position_ids": torch.clamp(torch.cumsum(attention, dim=1) - 1, min=0),
        }
        if self.with_scores:
            tensors["rm_scores"] = rm_scores
        return DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array(uids, dtype=object)},
                                   meta_info={"timing": {"gen": 1.0}})


def make_request(uids: list[str], n: int, interleave: bool = True) -> DataProto:
    """What verl's trainer sends: each prompt row repeated n times, with uid, raw_prompt and reward_model."""
    rows = [u for u in uids for _ in range(n)] if interleave else [u for _ in range(n) for u in uids]
    return DataProto.from_dict(
        tensors={"dummy_tensor": torch.zeros(len(rows), 1, dtype=torch.uint8)},
        non_tensors={
            "uid": np.array(rows, dtype=object),
            "raw_prompt": np.array([[{"role": "user", "content": f"question {u}"}] for u in rows] + [None],
                                   dtype=object)[:-1],
            "reward_model": np.array([{"ground_truth": f"answer {u}", "style": "rule"} for u in rows], dtype=object),
        },
        meta_info={"temperature": 1.0},
    )


# Scripted rewards: "easy" alternates 1, 0 (balanced exit once it has 4 samples: round 2 with M = 2);
# "hard" is always 0 (never exits); "late" is 0 in rounds 1-2 and 1 in round 3 (exits in round 3).
SCRIPT = {
    "easy": lambda call, j: float(j % 2 == 0),
    "hard": lambda call, j: 0.0,
    "late": lambda call, j: float(call >= 3),
}


def scripted(uid: str, call: int, j: int) -> float:
    return SCRIPT[uid](call, j)


def run_step(unexited: str = "keep", interleave: bool = True, world_size: int = 3, reward_of=scripted, **kwargs):
    fake = FakeRolloutWorkerGroup(reward_of, world_size=world_size)
    config = SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4, unexited=unexited, **kwargs)
    wrapper = ReinforceAdaRollout(fake, config, size_divisor=world_size)
    request = make_request(["easy", "hard", "late"], n=4, interleave=interleave)
    return wrapper, fake, request, wrapper.generate_sequences(request)


def sample_ids(out: DataProto) -> list[int]:
    return out.batch["responses"][:, 0].tolist()


# -- the generation wrapper ----------------------------------------------------------------------------------------
def test_several_rounds_with_dp_padding_return_n_rows_per_prompt_in_place():
    wrapper, fake, request, out = run_step()
    # Round 1: 3 prompts x 2 = 6 rows; round 2: same; round 3: hard + late = 4 rows -> padded to 6;
    # round 4: hard alone = 2 rows -> padded to 3 (world size 3).
    assert fake.call_sizes == [6, 6, 6, 3]
    assert wrapper.last_metrics["reinforce_ada/generation_padding_rows"] == 2 + 1
    assert wrapper.last_metrics["reinforce_ada/rounds_used"] == 4
    assert wrapper.last_metrics["reinforce_ada/total_samples"] == 6 + 6 + 4 + 2
    assert len(out) == len(request) == 12
    assert out.non_tensor_batch["uid"].tolist() == request.non_tensor_batch["uid"].tolist()
    # Every row is a distinct generated sample (no duplicated row is trained) and none is padding (all groups full).
    assert len(set(sample_ids(out))) == 12
    assert not out.non_tensor_batch[PAD_KEY].any()
    assert out.batch["responses"].shape == (12, RESPONSE_LEN)
    assert out.batch["response_mask"].shape == (12, RESPONSE_LEN)
    assert torch.equal(out.batch["response_mask"], out.batch["attention_mask"][:, PROMPT_LEN:])
    # Timing is not summed over the 4 rounds (each reports gen = 1.0: the step reports the slowest round's); the
    # sampler's metrics ride along in it (verl's trainer logs "timing"). tests/integrations/test_verl_metrics.py
    # checks every metric on scripted rounds.
    assert out.meta_info["timing"]["gen"] == 1.0
    assert out.meta_info["timing"]["reinforce_ada/exited_fraction"] == pytest.approx(2 / 3)
    assert out.meta_info["reinforce_ada_metrics"] == wrapper.last_metrics


def test_pool_statistics_and_rewards_follow_the_script():
    _, _, request, out = run_step()
    stats = out.batch[POOL_STATS_KEY].numpy()
    rewards = out.batch["rm_scores"].sum(-1).numpy()
    uids = out.non_tensor_batch["uid"].tolist()
    rows = {u: [i for i, x in enumerate(uids) if x == u] for u in SCRIPT}
    # easy: pool [1, 0, 1, 0] after 2 rounds -> mean 1/2, sample std sqrt(1/3), balanced group 2 + 2.
    for i in rows["easy"]:
        assert stats[i].tolist() == pytest.approx([0.5, math.sqrt(1 / 3), 4, 2])
    assert sorted(rewards[rows["easy"]].tolist()) == [0.0, 0.0, 1.0, 1.0]
    # late: pool [0, 0, 0, 0, 1, 1] after 3 rounds -> mean 1/3, std sqrt((4/9 * ... ) / 5), group 2 + 2.
    late_std = math.sqrt((4 * (1 / 3) ** 2 + 2 * (2 / 3) ** 2) / 5)
    for i in rows["late"]:
        assert stats[i].tolist() == pytest.approx([1 / 3, late_std, 6, 2])
    assert sorted(rewards[rows["late"]].tolist()) == [0.0, 0.0, 1.0, 1.0]
    # hard: 4 rounds of zeros, kept (unexited="keep"): pool of 8, all zero.
    for i in rows["hard"]:
        assert stats[i].tolist() == [0.0, 0.0, 8.0, 0.0]
    assert out.non_tensor_batch["reinforce_ada_exited"][rows["hard"]].tolist() == [False] * 4


def test_rows_are_grouped_by_uid_not_by_position():
    _, _, request, out = run_step(interleave=False)  # rows ordered easy, hard, late, easy, hard, late, ...
    assert out.non_tensor_batch["uid"].tolist() == request.non_tensor_batch["uid"].tolist()
    assert len(set(sample_ids(out))) == 12


def test_short_groups_are_filled_with_masked_padding_rows_never_trainable_duplicates():
    _, _, request, out = run_step(unexited="drop")
    uids = out.non_tensor_batch["uid"].tolist()
    hard = [i for i, u in enumerate(uids) if u == "hard"]
    is_pad = out.non_tensor_batch[PAD_KEY]
    assert is_pad.tolist() == [u == "hard" for u in uids]
    assert out.batch["response_mask"][hard].sum() == 0
    assert out.batch["rm_scores"][hard].sum() == 0
    assert out.batch[POOL_STATS_KEY][hard, 2].tolist() == [0.0] * 4
    # The rows that carry tokens into the loss are all distinct samples.
    trained = [s for s, pad in zip(sample_ids(out), is_pad) if not pad]
    assert len(trained) == len(set(trained)) == 8
    # Shapes stay what the trainer expects, and the output unions with the trainer's own (repeated) batch.
    assert len(out) == 12
    trainer_batch = DataProto.from_dict(tensors={"dummy_tensor": torch.zeros(12, 1, dtype=torch.uint8)},
                                        non_tensors={"uid": request.non_tensor_batch["uid"].copy()})
    merged = trainer_batch.union(out)
    assert merged.batch["responses"].shape == (12, RESPONSE_LEN)
    # The estimator gives padding rows zero advantage.
    adv, _ = compute_reinforce_ada_advantage(out.batch["rm_scores"], out.batch["response_mask"],
                                             index=out.non_tensor_batch["uid"],
                                             reward_baselines=out.batch[POOL_STATS_KEY], config={})
    assert adv[hard].abs().sum() == 0


def test_group_size_must_match_rows_per_prompt():
    fake = FakeRolloutWorkerGroup(scripted)
    wrapper = ReinforceAdaRollout(fake, SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4))
    with pytest.raises(ValueError, match="rows per prompt"):
        wrapper.generate_sequences(make_request(["easy"], n=2))
    assert fake.call_sizes == []  # rejected before any generation


def test_rows_without_scores_use_reward_fn_or_fail_clearly():
    fake = FakeRolloutWorkerGroup(scripted, with_scores=False)
    config = SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4, generation_retries=0)
    with pytest.raises(GenerationError, match="rm_scores"):
        ReinforceAdaRollout(fake, config).generate_sequences(make_request(["easy"], n=4))
    assert fake.call_sizes == [2]  # stopped after the first round's call, nothing was trained on zeros

    calls = []

    def reward_fn(rows: DataProto) -> torch.Tensor:  # scores from the sample id: even ids are correct
        calls.append(len(rows))
        return (rows.batch["responses"][:, 0] % 2 == 0).float()

    fake = FakeRolloutWorkerGroup(scripted, with_scores=False)
    out = ReinforceAdaRollout(fake, config, reward_fn=reward_fn).generate_sequences(make_request(["easy"], n=4))
    expected = (out.batch["responses"][:, 0] % 2 == 0).float()
    assert torch.equal(out.batch["rm_scores"].sum(-1), expected)
    assert calls == fake.call_sizes  # called once per round on that round's rows


@pytest.mark.parametrize("returned", [
    lambda rows: {i: 1.0 for i in range(len(rows))},
    lambda rows: [str(1.0)] * len(rows),
    lambda rows: 1.0,
])
def test_a_reward_fn_result_that_is_not_one_number_per_row_is_a_verifier_failure(returned):
    from reinforce_ada.integrations.verl.rollout import _sequence_scores
    from reinforce_ada.sampling.protocols import VerifierError

    rows = [None] * 3
    with pytest.raises(VerifierError, match="verl's reward_fn returned"):
        _sequence_scores(returned(rows), len(rows))
    assert _sequence_scores(torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.5, 0.0]]), 3) == [1.0, 0.0, 0.5]


def test_selection_is_seeded_and_its_rng_carries_across_steps():
    def kept_offsets(out):  # which of the step's 8 samples were kept (sample ids are consecutive within a step)
        ids = sample_ids(out)
        return sorted(i % 8 for i in ids)

    def make():
        fake = FakeRolloutWorkerGroup(lambda u, c, j: float(j < 4), world_size=1)  # 4 right, then 4 wrong
        return ReinforceAdaRollout(fake, SamplerConfig(samples_per_round=8, max_rounds=1, group_size=4, seed=3))

    wrapper = make()
    steps = [kept_offsets(wrapper.generate_sequences(make_request(["p"], n=4))) for _ in range(4)]
    # Balanced selection keeps 2 of the 4 right (offsets 4-7 here: ids start at 100) and 2 of the 4 wrong.
    for offsets in steps:
        assert len(offsets) == 4 and sum(o >= 4 for o in offsets) == 2
    assert len({tuple(o) for o in steps}) > 1  # not the same choice every step: the RNG state carried over
    again = make()
    assert [kept_offsets(again.generate_sequences(make_request(["p"], n=4))) for _ in range(4)] == steps  # seeded


def test_with_verls_step_number_the_selection_depends_on_seed_and_step_only():
    """A run resumed at step k (a fresh rollout object, as after a restart) selects what the uninterrupted run did."""
    def kept(wrapper, step):
        request = make_request(["p"], n=4)
        request.meta_info["global_steps"] = step
        return sorted(i % 8 for i in sample_ids(wrapper.generate_sequences(request)))

    def make():
        fake = FakeRolloutWorkerGroup(lambda u, c, j: float(j < 4), world_size=1)
        return ReinforceAdaRollout(fake, SamplerConfig(samples_per_round=8, max_rounds=1, group_size=4, seed=3))

    uninterrupted = make()
    steps = {step: kept(uninterrupted, step) for step in range(1, 7)}
    assert len({tuple(v) for v in steps.values()}) > 1  # the step changes the draw
    resumed = make()
    assert [kept(resumed, step) for step in (4, 5, 6)] == [steps[4], steps[5], steps[6]]


# -- conversion round trip -----------------------------------------------------------------------------------------
def test_prompts_from_dataproto_groups_by_uid_and_reads_answers():
    request = make_request(["a", "b"], n=3, interleave=False)
    prompts, positions = prompts_from_dataproto(request)
    assert [p.prompt_id for p in prompts] == ["a", "b"]
    assert positions == {"a": [0, 2, 4], "b": [1, 3, 5]}
    assert prompts[1].answer == "answer b"
    assert prompts[1].prompt == [{"role": "user", "content": "question b"}]
    assert prompts[1].metadata["row"] == 1


def test_dataproto_round_trip_preserves_groups_rewards_tokens_and_pool_stats():
    wrapper, _, _, out = run_step()
    sampled = wrapper.last_batch
    back = {g.prompt_id: g for g in groups_from_dataproto(out)}
    assert set(back) == {g.prompt_id for g in sampled.groups}
    for group in sampled.groups:
        got = back[group.prompt_id]
        assert sorted((c.reward, tuple(c.token_ids)) for c in got.completions) == \
            sorted((c.reward, tuple(c.token_ids)) for c in group.completions)
        assert (got.pool_mean, got.pool_count, got.pool_num_positive, got.exited) == \
            (pytest.approx(group.pool_mean), group.pool_count, group.pool_num_positive, group.exited)
        assert got.pool_std == pytest.approx(group.pool_std)
        assert sorted(c.round for c in got.completions) == sorted(c.round for c in group.completions)


def test_completions_from_dataproto_reads_tokens_scores_and_row_numbers():
    fake = FakeRolloutWorkerGroup(lambda u, c, j: 0.25 * j)
    output = fake.generate_sequences(make_request(["a"], n=3))
    completions = completions_from_dataproto(output, ["a"] * 3, first_row=10)
    assert [c.rollout_row for c in completions] == [10, 11, 12]
    assert [c.score for c in completions] == [0.0, 0.25, 0.5]
    lengths = output.batch["attention_mask"][:, PROMPT_LEN:].sum(-1).tolist()
    assert [len(c.token_ids) for c in completions] == lengths
    assert completions[0].token_ids[0] == 100
    with pytest.raises(ValueError, match="3 rows for 2"):
        completions_from_dataproto(output, ["a"] * 2)


def test_assemble_rejects_a_group_larger_than_its_positions():
    wrapper, _, _, out = run_step()
    sampled = wrapper.last_batch
    positions = {"easy": [0, 1], "hard": [2, 3, 4, 5], "late": [6, 7, 8, 9]}
    rows = out  # any DataProto with enough rows works as the source here
    with pytest.raises(ValueError, match="kept 4 completions"):
        assemble_training_batch(sampled, rows, positions, {})


# -- the estimator -------------------------------------------------------------------------------------------------
def test_estimator_is_registered_under_its_name():
    assert get_adv_estimator_fn("reinforce_ada") is compute_reinforce_ada_advantage


def _token_rewards(rewards: list[float], width: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.zeros(len(rewards), width)
    scores[:, -1] = torch.tensor(rewards)
    return scores, torch.ones(len(rewards), width)


def test_estimator_arithmetic_uses_pool_not_group_statistics():
    # Prompt a: group rewards [1, 0], pool of 8 with mean 0.25 and std 0.5; prompt b: [0.6, 0.2], pool mean 0.3.
    scores, mask = _token_rewards([1.0, 0.0, 0.6, 0.2])
    stats = torch.tensor([[0.25, 0.5, 8, 2], [0.25, 0.5, 8, 2], [0.3, 0.2, 6, 1], [0.3, 0.2, 6, 1]],
                         dtype=torch.float64)
    adv, returns = compute_reinforce_ada_advantage(scores, mask, index=np.array(["a", "a", "b", "b"], dtype=object),
                                                   reward_baselines=stats, config={})
    expected = [1.0 - 0.25, 0.0 - 0.25, 0.6 - 0.3, 0.2 - 0.3]
    assert adv[:, 0].tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.equal(adv, returns) and adv.shape == (4, 4)
    config = {"reinforce_ada": {"normalize_std": True, "epsilon": 1e-6}}
    adv, _ = compute_reinforce_ada_advantage(scores, mask, index=None, reward_baselines=stats, config=config)
    expected = [0.75 / (0.5 + 1e-6), -0.25 / (0.5 + 1e-6), 0.3 / (0.2 + 1e-6), -0.1 / (0.2 + 1e-6)]
    assert adv[:, 0].tolist() == pytest.approx(expected, rel=1e-5)
    # GRPO's group baseline through the same estimator: a's group mean is 0.5, b's is 0.4.
    adv, _ = compute_reinforce_ada_advantage(scores, mask, index=np.array(["a", "a", "b", "b"], dtype=object),
                                             reward_baselines=stats, config={"reinforce_ada": {"advantage": "group"}})
    assert adv[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.2, -0.2], abs=1e-6)


def test_estimator_without_pool_statistics_names_what_is_missing():
    scores, mask = _token_rewards([1.0, 0.0])
    with pytest.raises(ValueError, match="reward_baselines"):
        compute_reinforce_ada_advantage(scores, mask, index=np.array(["a", "a"], dtype=object), config={})


@pytest.mark.parametrize("normalize_std", [False, True])
def test_verl_compute_advantage_equals_core_for_real_valued_rewards(normalize_std):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rng = np.random.default_rng(0)
    table = {u: rng.uniform(0, 1, size=64).round(3) for u in ("p0", "p1", "p2")}
    table["p1"][:8] = [0.9, 0.1, 0.2, 0.3, 0.8, 0.7, 0.0, 0.6]
    counters: dict[str, int] = {}

    def reward_of(uid, call, j):  # a real-valued reward that is not a function of the positive count
        k = counters.get(uid, 0)
        counters[uid] = k + 1
        return float(table[uid][k])

    fake = FakeRolloutWorkerGroup(reward_of, world_size=1)
    config = SamplerConfig(samples_per_round=3, max_rounds=3, group_size=4, normalize_std=normalize_std,
                           positive_threshold=0.5)
    wrapper = ReinforceAdaRollout(fake, config)
    out = wrapper.generate_sequences(make_request(["p0", "p1", "p2"], n=4))
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    algorithm = OmegaConf.create({"adv_estimator": "reinforce_ada",
                                  "reinforce_ada": {"normalize_std": normalize_std}})
    data = compute_advantage(out, adv_estimator="reinforce_ada", config=algorithm)
    got = data.batch["advantages"][:, 0].double().numpy()  # every response has >= 1 token

    sampled = wrapper.last_batch
    # The core's advantages for the same kept completions, matched to rows by sample id.
    core = dict(zip((c.token_ids[0] for c in sampled.completions()), sampled.advantages))
    expected = np.array([core[s] for s in sample_ids(out)])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    # And the core recomputed from the batch's own columns agrees too (any reward, exact pool moments).
    stats = out.batch[POOL_STATS_KEY].numpy()
    rewards = out.batch["rm_scores"].sum(-1).double().numpy()
    direct = compute_advantages("pool", rewards, out.non_tensor_batch["uid"], pool_mean=stats[:, 0],
                                pool_std=stats[:, 1], pool_count=stats[:, 2], normalize_std=normalize_std)
    np.testing.assert_allclose(got, direct, rtol=1e-6, atol=1e-6)
    assert not np.allclose(got, 0.0)


# -- verl's agent-loop manager -------------------------------------------------------------------------------------
class _FakeAgentLoopWorker:
    """An agent-loop worker handle: ``worker.generate_sequences.remote(chunk)`` returns an awaitable DataProto."""

    def __init__(self, rollout: FakeRolloutWorkerGroup):
        worker = self

        class _Method:
            def remote(self, chunk):
                async def run():
                    worker.chunk_sizes.append(len(chunk))
                    out = rollout.generate_sequences(chunk)
                    out.meta_info = {"metrics": [{"generate_sequences": 0.1, "tool_calls": 0.0, "compute_score": 0.0,
                                                  "num_preempted": 0}] * len(chunk)}
                    return out

                return run()

        self.generate_sequences = _Method()
        self.chunk_sizes: list[int] = []


def _plugin_config(**algorithm_overrides):
    from reinforce_ada.integrations.verl.config import AGENT_LOOP_MANAGER_FQN

    return OmegaConf.create({
        "algorithm": {"adv_estimator": "reinforce_ada",
                      "reinforce_ada": {"samples_per_round": 2, "max_rounds": 4, **algorithm_overrides}},
        "actor_rollout_ref": {"rollout": {"n": 4, "agent": {"agent_loop_manager_class": AGENT_LOOP_MANAGER_FQN}},
                              "model": {}},
        "trainer": {"use_v1": False},
    })


def constant(uid: str, call: int, j: int) -> float:
    """Rewards that do not depend on how verl chunks a round: "hard" is always wrong, the others always right."""
    return 0.0 if uid == "hard" else 1.0


@pytest.mark.parametrize("advantage", ["pool", "group"])
def test_an_all_equal_group_with_normalize_std_and_epsilon_0_gets_advantage_0_through_verls_compute_advantage(
        advantage):
    """epsilon=0, the smallest the plugin accepts, with normalize_std: the prompt whose rewards are all equal ("hard":
    always 0) gets advantage 0, not 0 / 0 = NaN, in what verl's compute_advantage hands the loss; "easy" keeps its
    z-scores."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    settings = {"normalize_std": True, "epsilon": 0.0, "advantage": advantage}
    fake = FakeRolloutWorkerGroup(scripted, world_size=1)
    wrapper = ReinforceAdaRollout(fake, SamplerConfig(samples_per_round=2, max_rounds=3, group_size=4, **settings))
    out = wrapper.generate_sequences(make_request(["easy", "hard"], n=4))
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    algorithm = OmegaConf.create({"adv_estimator": "reinforce_ada", "reinforce_ada": settings})
    got = compute_advantage(out, adv_estimator="reinforce_ada", config=algorithm).batch["advantages"]
    assert torch.isfinite(got).all()
    uid = out.non_tensor_batch["uid"]
    assert (got[uid == "hard"] == 0).all() and (got[uid == "easy"].abs().sum(-1) > 0).all()


def test_agent_loop_manager_runs_rounds_through_verls_dispatch_and_passes_validation_through():
    from reinforce_ada.integrations.verl.agent_loop import ReinforceAdaAgentLoopManager

    rollout = FakeRolloutWorkerGroup(constant, world_size=1)
    config = _plugin_config(exit_rule="positive")
    manager = ReinforceAdaAgentLoopManager(config, llm_client=None, reward_loop_worker_handles=[])
    manager.agent_loop_workers = [_FakeAgentLoopWorker(rollout), _FakeAgentLoopWorker(rollout)]
    out = manager.generate_sequences(make_request(["easy", "hard", "easy2"], n=4))
    # "positive" exit once a prompt holds n = 4 samples with a correct one: easy and easy2 after round 2, hard never.
    # Rounds of 6, 6, 2, 2 rows; verl's parent splits each into 2 equal chunks, so no padding is needed.
    assert rollout.call_sizes == [3, 3, 3, 3, 1, 1, 1, 1]
    assert manager.reinforce_ada.last_metrics["reinforce_ada/generation_padding_rows"] == 0
    assert manager.reinforce_ada.last_metrics["reinforce_ada/rounds_used"] == 4
    assert len(out) == 12 and len(set(sample_ids(out))) == 12
    assert "agent_loop/generate_sequences/max" in out.meta_info["timing"]

    validation = make_request(["easy", "hard"], n=1)
    validation.meta_info["validate"] = True
    out = manager.generate_sequences(validation)
    assert len(out) == 2 and rollout.call_sizes[-2:] == [1, 1]
    assert POOL_STATS_KEY not in out.batch.keys()


def test_agent_loop_manager_splits_rounds_over_workers_without_generating_padding():
    from reinforce_ada.integrations.verl.agent_loop import ReinforceAdaAgentLoopManager

    rollout = FakeRolloutWorkerGroup(constant, world_size=1)
    config = _plugin_config(exit_rule="positive")
    manager = ReinforceAdaAgentLoopManager(config, llm_client=None, reward_loop_worker_handles=[])
    manager.agent_loop_workers = [_FakeAgentLoopWorker(rollout) for _ in range(4)]
    out = manager.generate_sequences(make_request(["easy", "hard", "easy2"], n=4))
    # Rounds of 6, 6, 2, 2 rows over 4 workers: 2 + 2 + 1 + 1, twice, then 1 + 1 (two workers idle), twice.
    assert rollout.call_sizes == [2, 2, 1, 1] * 2 + [1, 1] * 2
    assert [len(w.chunk_sizes) for w in manager.agent_loop_workers] == [4, 4, 2, 2]
    # Exactly what the sampler asked for was generated: no row was generated only to be thrown away.
    assert sum(rollout.call_sizes) == manager.reinforce_ada.last_metrics["reinforce_ada/total_samples"] == 16
    assert manager.reinforce_ada.last_metrics["reinforce_ada/generation_padding_rows"] == 0
    assert len(out) == 12 and len(set(sample_ids(out))) == 12
    # Rows came back in order: each prompt's rows carry its own uid (the fake scores "hard" 0, the others 1).
    rewards = out.batch["rm_scores"].sum(-1).tolist()
    assert [r for r, u in zip(rewards, out.non_tensor_batch["uid"]) if u == "hard"] == [0.0] * 4
    assert sum(rewards) == 8.0


def test_agent_loop_manager_rejects_a_config_it_cannot_honour():
    from reinforce_ada.integrations.verl.agent_loop import ReinforceAdaAgentLoopManager

    config = _plugin_config()
    config.algorithm.adv_estimator = "grpo"
    with pytest.raises(ConfigError, match="adv_estimator"):
        ReinforceAdaAgentLoopManager(config, llm_client=None, reward_loop_worker_handles=[])
    # A reward model colocated with the actor scores after generation: too late for the exit rule.
    with pytest.raises(ConfigError, match="enable_resource_pool"):
        ReinforceAdaAgentLoopManager(_plugin_config(), llm_client=None, reward_loop_worker_handles=None)


def test_fake_worker_handle_is_awaitable():  # guards the fake itself: verl awaits what .remote returns
    rollout = FakeRolloutWorkerGroup(scripted)
    out = asyncio.run(_FakeAgentLoopWorker(rollout).generate_sequences.remote(make_request(["easy"], n=2)))
    assert len(out) == 2


# -- the legacy trainer's data path, step by step ------------------------------------------------------------------
def test_trainer_data_path_from_verls_dataset_to_advantages(tmp_path):
    """The calls RayPPOTrainer.fit makes around generation, on a batch from verl's own RLHFDataset."""
    pd = pytest.importorskip("pandas")
    import uuid

    from verl.trainer.ppo.metric_utils import compute_data_metrics
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage
    from verl.trainer.ppo.reward import extract_reward
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils.dataset.rl_dataset import collate_fn

    from reinforce_ada.integrations.verl.config import check_verl_config, compose_trainer_config
    from reinforce_ada.models.tiny import build_char_tokenizer

    rows = [{"data_source": "toy", "prompt": [{"role": "user", "content": f"{a}+1"}],
             "reward_model": {"style": "rule", "ground_truth": str(a + 1)}, "extra_info": {"index": a}}
            for a in range(3)]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    config = compose_trainer_config([f"data.train_files=['{tmp_path / 'train.parquet'}']", "data.max_prompt_length=16",
                                     "data.dataloader_num_workers=0", "algorithm.reinforce_ada.samples_per_round=2",
                                     "algorithm.reinforce_ada.unexited=drop"])
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}="
    dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)

    # fit(): batch from the dataloader, a uid per prompt, the generation batch repeated n times.
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(3)]))
    uids = [str(uuid.uuid4()) for _ in range(3)]
    batch.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    gen_batch = RayPPOTrainer._get_gen_batch(None, batch)  # does not touch self
    request = gen_batch.repeat(repeat_times=config.actor_rollout_ref.rollout.n, interleave=True)

    script = dict(zip(uids, ("easy", "hard", "late")))
    fake = FakeRolloutWorkerGroup(lambda uid, call, j: scripted(script[uid], call, j), world_size=2)
    wrapper = ReinforceAdaRollout(fake, check_verl_config(config), size_divisor=2)
    output = wrapper.generate_sequences(request)

    # fit(): repeat the prompt batch to align with the responses, union, extract the reward, compute advantages.
    batch = batch.repeat(repeat_times=config.actor_rollout_ref.rollout.n, interleave=True)
    batch = batch.union(output)
    reward_tensor, _ = extract_reward(batch)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = reward_tensor
    batch = compute_advantage(batch, adv_estimator=config.algorithm.adv_estimator, config=config.algorithm)

    hard = [i for i, u in enumerate(batch.non_tensor_batch["uid"]) if script[u] == "hard"]
    assert len(batch) == 12 and batch.non_tensor_batch[PAD_KEY][hard].all()  # "hard" never exits: dropped
    assert batch.batch["advantages"][hard].abs().sum() == 0
    easy = [i for i, u in enumerate(batch.non_tensor_batch["uid"]) if script[u] == "easy"]
    # easy's pool is [1, 0, 1, 0]: advantages +-0.5 on every response token, 0 elsewhere.
    first_token = batch.batch["advantages"][easy, 0]
    assert sorted(first_token.tolist()) == [-0.5, -0.5, 0.5, 0.5]
    assert batch.non_tensor_batch["data_source"].tolist() == ["toy"] * 12  # the trainer's columns survived
    metrics = compute_data_metrics(batch=batch, use_critic=False)
    assert metrics["critic/advantages/max"] == pytest.approx(1 - 1 / 3)  # late's positives: pool mean 2/6


# -- invariants over random settings -------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(num_prompts=st.integers(1, 5), n=st.integers(2, 4), m=st.integers(1, 4), rounds=st.integers(1, 3),
       world_size=st.integers(1, 4), unexited=st.sampled_from(["keep", "drop"]),
       exit_rule=st.sampled_from(["balanced", "positive"]), seed=st.integers(0, 10_000))
def test_invariants_hold_for_any_schedule(num_prompts, n, m, rounds, world_size, unexited, exit_rule, seed):
    assume(n <= m * rounds)  # otherwise SamplerConfig rejects it: no prompt could fill its group
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 2, size=(num_prompts, 64)).astype(float) * rng.uniform(0.6, 1.0)  # real-valued rewards
    uids = [f"p{i}" for i in range(num_prompts)]

    def reward_of(uid, call, j):
        return float(table[int(uid[1:]), (call * 7 + j) % 64])

    fake = FakeRolloutWorkerGroup(reward_of, world_size=world_size)
    config = SamplerConfig(samples_per_round=m, max_rounds=rounds, group_size=n, unexited=unexited,
                           exit_rule=exit_rule, seed=seed)
    wrapper = ReinforceAdaRollout(fake, config, size_divisor=world_size)
    request = make_request(uids, n=n, interleave=bool(seed % 2))
    out = wrapper.generate_sequences(request)

    assert len(out) == len(request)
    assert out.non_tensor_batch["uid"].tolist() == request.non_tensor_batch["uid"].tolist()
    assert all(size % world_size == 0 for size in fake.call_sizes)
    is_pad = out.non_tensor_batch[PAD_KEY]
    trained = [s for s, pad in zip(sample_ids(out), is_pad) if not pad]
    assert len(trained) == len(set(trained))  # no generated sample is trained twice
    assert out.batch["response_mask"][torch.from_numpy(is_pad)].sum() == 0
    stats = out.batch[POOL_STATS_KEY].numpy()
    pools = wrapper.last_batch.pools
    for i, uid in enumerate(out.non_tensor_batch["uid"].tolist()):
        if is_pad[i]:
            assert stats[i, 2] == 0
        else:  # the row's statistics are its own pool's, exactly
            pool = pools[uid]
            assert stats[i].tolist() == pytest.approx([pool.mean, pool.std, pool.count, pool.num_positive])
    adv, _ = compute_reinforce_ada_advantage(out.batch["rm_scores"], out.batch["response_mask"],
                                             index=out.non_tensor_batch["uid"],
                                             reward_baselines=out.batch[POOL_STATS_KEY], config={})
    assert torch.isfinite(adv).all()
