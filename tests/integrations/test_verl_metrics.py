"""The verl plugin's metrics on scripted rounds, fed through verl's own metric functions.

Self-contained (no hypothesis, no other test module): it is also the check run in a fresh venv made with only
``pip install -e '.[verl]' pytest`` (docs/verl.md). Every number below is worked out from the script by hand.

The script (M = 2 samples per round, N = 4 rounds, n = 4, ``unexited="drop"``, balanced exit and selection):

* "easy" (3 prompt tokens): rewards 1, 0 in every round -> exits after round 2, pool [1, 0, 1, 0];
* "hard" (2 prompt tokens): always 0 -> never exits, 8 samples, dropped: its 4 rows are padding;
* "late" (1 prompt token): 0 in rounds 1-2, 1 in round 3 -> exits after round 3, pool [0, 0, 0, 0, 1, 1].

A correct completion is 4 tokens long (the maximum: clipped), a wrong one 2. Rounds generate 6, 6, 4, 2 rows and
take 2, 5, 1, 1 seconds on a scripted clock.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

verl = pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from verl import DataProto  # noqa: E402
from verl.trainer.ppo.metric_utils import (  # noqa: E402
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
)
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage  # noqa: E402
from verl.utils.seqlen_balancing import rearrange_micro_batches  # noqa: E402

import reinforce_ada.integrations.verl.rollout as rollout_module  # noqa: E402
from reinforce_ada.config import SamplerConfig  # noqa: E402
from reinforce_ada.integrations.verl import ReinforceAdaRollout  # noqa: E402
from reinforce_ada.integrations.verl.convert import PAD_KEY  # noqa: E402
from reinforce_ada.integrations.verl.metrics import combine_round_timing  # noqa: E402

PROMPT_WIDTH, RESPONSE_WIDTH = 3, 4
PROMPT_TOKENS = {"easy": 3, "hard": 2, "late": 1}
ROUND_SECONDS = [2.0, 5.0, 1.0, 1.0]


def reward_of(uid: str, call: int, j: int) -> float:
    if uid == "easy":
        return float(j % 2 == 0)
    return float(uid == "late" and call >= 3)


class ScriptedRollout:
    """verl's ``generate_sequences(prompts: DataProto) -> DataProto`` on the script, with per-call agent-loop timing.

    Call ``c`` (1-based) advances the scripted clock by ``ROUND_SECONDS[c - 1]`` and reports, as verl's agent loop
    does, per-sample ``max`` / ``min`` / ``mean`` timings and the slowest sample's lengths: here ``max = 10 c``,
    ``min = c``, ``mean = 3 c`` and ``slowest/response_length = c``.
    """

    def __init__(self, clock: list[float]):
        self.clock = clock
        self.call_sizes: list[int] = []

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        self.call_sizes.append(len(prompts))
        call = len(self.call_sizes)
        self.clock[0] += ROUND_SECONDS[call - 1]
        uids = prompts.non_tensor_batch["uid"].tolist()
        num = len(uids)
        attention = torch.zeros(num, PROMPT_WIDTH + RESPONSE_WIDTH, dtype=torch.long)
        rm_scores = torch.zeros(num, RESPONSE_WIDTH)
        responses = torch.zeros(num, RESPONSE_WIDTH, dtype=torch.long)
        seen: dict[str, int] = {}
        for i, uid in enumerate(uids):
            j = seen.get(uid, 0)
            seen[uid] = j + 1
            reward = reward_of(uid, call, j)
            length = 4 if reward else 2
            attention[i, PROMPT_WIDTH - PROMPT_TOKENS[uid]:PROMPT_WIDTH] = 1  # left-padded prompt
            attention[i, PROMPT_WIDTH:PROMPT_WIDTH + length] = 1
            responses[i, :length] = 1000 * call + 10 * i + 1  # distinct per sample
            rm_scores[i, length - 1] = reward
        prompt_ids = torch.full((num, PROMPT_WIDTH), 5, dtype=torch.long)
        return DataProto.from_dict(
            tensors={"prompts": prompt_ids, "responses": responses, "input_ids": torch.cat([prompt_ids, responses], 1),
                     "attention_mask": attention, "response_mask": attention[:, PROMPT_WIDTH:].clone(),
                     "position_ids": torch.clamp(torch.cumsum(attention, dim=1) - 1, min=0), "rm_scores": rm_scores},
            non_tensors={"uid": np.array(uids, dtype=object)},
            meta_info={"timing": {"agent_loop/generate_sequences/max": 10.0 * call,
                                  "agent_loop/generate_sequences/min": 1.0 * call,
                                  "agent_loop/generate_sequences/mean": 3.0 * call,
                                  "agent_loop/slowest/response_length": float(call)}},
        )


def make_request(uids: list[str], n: int) -> DataProto:
    rows = [u for u in uids for _ in range(n)]
    return DataProto.from_dict(tensors={"dummy_tensor": torch.zeros(len(rows), 1, dtype=torch.uint8)},
                               non_tensors={"uid": np.array(rows, dtype=object)})


@pytest.fixture
def step(monkeypatch):
    """One scripted step: ``(out, metrics, rollout)``."""
    clock = [100.0]
    monkeypatch.setattr(rollout_module.time, "perf_counter", lambda: clock[0])
    rollout = ScriptedRollout(clock)
    config = SamplerConfig(samples_per_round=2, max_rounds=4, group_size=4, unexited="drop", seed=0)
    wrapper = ReinforceAdaRollout(rollout, config)
    out = wrapper.generate_sequences(make_request(["easy", "hard", "late"], n=4))
    assert rollout.call_sizes == [6, 6, 4, 2]
    return out, wrapper.last_metrics, rollout


def real_rows(out: DataProto) -> DataProto:
    return out.select_idxs(np.flatnonzero(~out.non_tensor_batch[PAD_KEY].astype(bool)))


def test_pool_metrics_cover_every_generated_row(step):
    _, metrics, _ = step
    # 18 rows: easy 4 (rewards 1, 0, 1, 0), hard 8 (zeros), late 6 (0, 0, 0, 0, 1, 1); correct rows are 4 tokens.
    assert metrics["reinforce_ada/pool/num_rows"] == 18
    assert metrics["reinforce_ada/pool/score/mean"] == pytest.approx((2 + 2) / 18)
    assert (metrics["reinforce_ada/pool/score/max"], metrics["reinforce_ada/pool/score/min"]) == (1.0, 0.0)
    assert metrics["reinforce_ada/pool/response_length/mean"] == pytest.approx((4 * 4 + 14 * 2) / 18)
    assert (metrics["reinforce_ada/pool/response_length/max"], metrics["reinforce_ada/pool/response_length/min"]) \
        == (4.0, 2.0)
    assert metrics["reinforce_ada/pool/response_length/clip_ratio"] == pytest.approx(4 / 18)
    assert metrics["reinforce_ada/pool/num_response_tokens"] == 4 * 4 + 14 * 2
    assert metrics["reinforce_ada/pool/num_tokens"] == (4 * 4 + 14 * 2) + (4 * 3 + 8 * 2 + 6 * 1)


def test_kept_metrics_cover_real_rows_only_and_agree_with_verls_compute_data_metrics(step):
    out, metrics, _ = step
    # Kept: easy [1, 0, 1, 0] and late's balanced 2 + 2; hard's 4 rows are padding and never counted.
    assert out.non_tensor_batch[PAD_KEY].sum() == 4
    assert metrics["reinforce_ada/kept/num_rows"] == 8
    assert metrics["reinforce_ada/kept/score/mean"] == 0.5
    assert metrics["reinforce_ada/kept/response_length/mean"] == 3.0
    assert metrics["reinforce_ada/kept/response_length/clip_ratio"] == 0.5
    assert metrics["reinforce_ada/kept/num_tokens"] == (4 * 4 + 4 * 2) + (4 * 3 + 4 * 1)

    def verl_metrics(batch: DataProto) -> dict:
        batch = DataProto.from_dict(tensors={**batch.batch}, non_tensors=dict(batch.non_tensor_batch))
        batch.batch["token_level_scores"] = batch.batch["rm_scores"]
        batch.batch["token_level_rewards"] = batch.batch["rm_scores"]
        batch.batch["advantages"] = torch.zeros_like(batch.batch["rm_scores"])
        batch.batch["returns"] = torch.zeros_like(batch.batch["rm_scores"])
        return compute_data_metrics(batch, use_critic=False)

    real = verl_metrics(real_rows(out))
    for name in ("score/mean", "score/max", "score/min"):
        assert metrics[f"reinforce_ada/kept/{name}"] == pytest.approx(real[f"critic/{name}"])
    for name in ("mean", "max", "min", "clip_ratio"):
        assert metrics[f"reinforce_ada/kept/response_length/{name}"] == pytest.approx(real[f"response_length/{name}"])

    # verl's own metrics on the whole training batch: padding rows are verl's "aborted" rows (empty response), so
    # critic/score and response_length_non_aborted describe the real rows; response_length/* and aborted_ratio
    # cannot leave rows out (docs/verl.md says to read reinforce_ada/kept/* there).
    whole = verl_metrics(out)
    assert whole["critic/score/mean"] == 0.5 and whole["critic/rewards/mean"] == 0.5
    assert whole["response_length_non_aborted/mean"] == 3.0
    assert whole["response/aborted_ratio"] == pytest.approx(4 / 12)


def test_timing_is_combined_per_round_never_summed(step):
    out, metrics, _ = step
    timing = out.meta_info["timing"]
    # Per-round values: max 10 c, min c, mean 3 c over 6, 6, 4, 2 rows; the slowest round (5 s) is round 2.
    logged = compute_timing_metrics(out, {**timing, "gen": 9.0})
    assert logged["timing_s/agent_loop/generate_sequences/max"] == 40.0  # summing would give 100
    assert logged["timing_s/agent_loop/generate_sequences/min"] == 1.0
    assert logged["timing_s/agent_loop/generate_sequences/mean"] == pytest.approx(
        (3 * 6 + 6 * 6 + 9 * 4 + 12 * 2) / 18)
    assert logged["timing_s/agent_loop/slowest/response_length"] == 2.0  # round 2's, not 1 + 2 + 3 + 4
    assert logged["timing_s/reinforce_ada/round_s/max"] == 5.0
    assert logged["timing_s/reinforce_ada/round_s/mean"] == pytest.approx(9 / 4)
    # Generation throughput over all 44 generated response tokens in the 9 s the rounds took.
    assert metrics["reinforce_ada/perf/gen_throughput"] == pytest.approx(44 / 9)
    assert logged["timing_s/reinforce_ada/perf/gen_throughput"] == pytest.approx(44 / 9)


def test_combine_round_timing_rules():
    timing = combine_round_timing([{"x/max": 1.0, "x/min": 0.5, "x/mean": 1.0, "x/slowest": 7.0},
                                   {"x/max": 3.0, "x/min": 0.2, "x/mean": 2.0, "x/slowest": 1.0}],
                                  round_rows=[1, 3], round_seconds=[4.0, 1.0])
    assert timing["x/max"] == 3.0 and timing["x/min"] == 0.2
    assert timing["x/mean"] == pytest.approx((1.0 * 1 + 2.0 * 3) / 4)
    assert timing["x/slowest"] == 7.0  # from the slowest round (4 s), as a whole
    assert combine_round_timing([], [], []) == {}
    with pytest.raises(ValueError, match="timing dicts"):
        combine_round_timing([{}], [1, 2], [1.0])


def test_padding_rows_cost_one_token_in_balance_batch_dynamic_batches_and_throughput(step):
    out, _, _ = step
    pad = torch.from_numpy(out.non_tensor_batch[PAD_KEY].astype(bool))
    tokens = out.batch["attention_mask"].sum(-1)
    assert tokens[pad].tolist() == [1] * 4  # one prompt token, no response (a full copy would be 2 + 2)
    assert out.batch["attention_mask"][pad, PROMPT_WIDTH:].sum() == 0
    assert out.batch["response_mask"][pad].sum() == 0 and out.batch["rm_scores"][pad].sum() == 0
    real_tokens = (4 * 4 + 4 * 2) + (4 * 3 + 4 * 1)

    # verl's balance_batch (the legacy trainer's method; it only needs the data-parallel size from `self`).
    stub = SimpleNamespace(_get_dp_size=lambda worker_group, role: 2, actor_rollout_wg=None)
    balance_metrics: dict = {}
    batch = DataProto.from_dict(tensors={**out.batch}, non_tensors=dict(out.non_tensor_batch))
    RayPPOTrainer._balance_batch(stub, batch, balance_metrics)
    assert balance_metrics["global_seqlen/mean"] == (real_tokens + 4) / 2

    # verl's dynamic micro-batches: the token budget sees one token per padding row.
    micro_batches, _ = rearrange_micro_batches(out.batch, max_token_len=PROMPT_WIDTH + RESPONSE_WIDTH)
    assert sum(int(mb["attention_mask"].sum()) for mb in micro_batches) == real_tokens + 4

    # verl's throughput counts the training batch (global_token_num, as the trainer sets it); the plugin's pool
    # count is every generated token.
    out.meta_info["global_token_num"] = out.batch["attention_mask"].sum(-1).tolist()
    perf = compute_throughout_metrics(out, {"step": 10.0}, n_gpus=1)
    assert perf["perf/total_num_tokens"] == real_tokens + 4


def test_advantage_path_through_verls_compute_advantage(step):
    out, _, _ = step
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    data = compute_advantage(out, adv_estimator="reinforce_ada", config={})
    uids = out.non_tensor_batch["uid"].tolist()
    first = data.batch["advantages"][:, 0].tolist()  # every real response has >= 2 tokens
    # easy: r - 1/2; late: r - 1/3 (pool [0, 0, 0, 0, 1, 1]); hard: padding, 0.
    assert sorted(a for a, u in zip(first, uids) if u == "easy") == pytest.approx([-0.5, -0.5, 0.5, 0.5])
    assert sorted(a for a, u in zip(first, uids) if u == "late") == pytest.approx([-1 / 3, -1 / 3, 2 / 3, 2 / 3])
    assert data.batch["advantages"][[i for i, u in enumerate(uids) if u == "hard"]].abs().sum() == 0


def test_padding_rows_pass_verls_unpadding_and_response_slicing(step):
    """The path of verl's actor/critic workers: left-right padding -> nested sequences -> per-token outputs -> the
    response slice (``verl.workers.utils.padding``). verl needs a non-empty prompt (``no_padding_2_padding``
    asserts it); a padding row is one prompt token and an empty response."""
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    out, _, _ = step
    pad = torch.from_numpy(out.non_tensor_batch[PAD_KEY].astype(bool))
    data = left_right_2_no_padding(out.to_tensordict())
    offsets = data["input_ids"].offsets()
    lengths = offsets.diff()
    assert lengths[pad].tolist() == [1] * 4
    total = int(offsets[-1])
    assert total == (4 * 4 + 4 * 2) + (4 * 3 + 4 * 1) + 4
    log_probs = no_padding_2_padding(torch.arange(total, dtype=torch.float32) + 1, data)  # a stand-in model output
    assert log_probs.shape == (12, RESPONSE_WIDTH)
    assert log_probs[pad].abs().sum() == 0  # nothing of a padding row reaches a response position
    real = ~pad
    assert torch.equal(log_probs[real] != 0, out.batch["response_mask"][real].bool())
