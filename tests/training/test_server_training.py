"""``train --generator openai`` against a fake OpenAI-compatible server: its settings checked before anything loads,
a server that cannot take the trainer's weights refused at the start in one line, a server that stops answering
mid-step stops the run (nothing of the step trained on or saved), a server without token ids refused at the first
step by name. The real server (vLLM's, taking the weights) is tests/training/test_openai_server_trainer.py."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")

from reinforce_ada.config import ConfigError, TrainConfig  # noqa: E402
from reinforce_ada.generation.server import served_model_name  # noqa: E402
from reinforce_ada.generation.server.weights import ServerWeights, ServerWeightsRefused  # noqa: E402
from reinforce_ada.models import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.training.guards import GenerationStopped  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

from streaming_fakes import FakeOpenAIServer  # noqa: E402


def test_the_server_settings_are_checked_with_the_config():
    with pytest.raises(ConfigError, match=r"generator='openai' needs base_url: the server's URL \(--base-url"):
        TrainConfig(generator="openai")
    with pytest.raises(ConfigError, match=r"base_url, generation_only belong\(s\) to generator='openai'"):
        TrainConfig(generator="vllm", base_url="http://127.0.0.1:8000", generation_only=True)
    with pytest.raises(ConfigError, match="base_url must start with http:// or https://"):
        TrainConfig(generator="openai", base_url="127.0.0.1:8000")
    with pytest.raises(ConfigError, match="server_dead_after must be a positive number of seconds"):
        TrainConfig(generator="openai", base_url="http://h:1", server_dead_after=0)
    synced = TrainConfig(generator="openai", base_url="http://h:1")
    assert synced.rollout_correction is True and synced.max_rollout_mismatch == 1e-3  # a stale server stops the run
    # generation only: off-policy by choice -- the mismatch logged and corrected, never a reason to stop
    off = TrainConfig(generator="openai", base_url="http://h:1", generation_only=True)
    assert off.rollout_correction is True and off.max_rollout_mismatch == 0.0


@pytest.mark.parametrize("answer, expected", [
    ("404", r"cannot take the trainer's weights: it has no weight-transfer endpoints .*VLLM_SERVER_DEV_MODE=1"),
    ("500:Weight transfer not configured. Please set weight_transfer_config",
     r"it was started without a weight transfer"),
    ("500:FileNotFoundError: [Errno 2] No such file or directory", r"it cannot see /\S+ \(it runs on another machine"),
])
def test_a_server_that_cannot_take_the_weights_is_refused_in_one_line(answer, expected):
    plan = lambda i, request_id, attempt: answer if not request_id else "ok"  # noqa: E731 -- weight calls have no id
    with FakeOpenAIServer(plan=plan) as server:
        with pytest.raises(ServerWeightsRefused, match=expected) as refused:
            ServerWeights(server.url, build_tiny_model())
    message = str(refused.value)
    assert "\n" not in message and "--weight-transfer-config" in message and "--generation-only" in message


def test_the_served_model_is_the_one_named_or_the_only_one():
    with FakeOpenAIServer() as server:  # lists no models (/v1/models: 404)
        assert served_model_name(server.url, "policy") == "policy"
        with pytest.raises(ConfigError, match=r"does not list its models \(/v1/models\); give --served-model"):
            served_model_name(server.url, None)
        url = server.url
    with pytest.raises(ConfigError, match="cannot reach the server at http://127.0.0.1"):
        served_model_name(url, "policy")


def trainer(tmp_path, url, **overrides):
    from reinforce_ada.training import Trainer

    config = TrainConfig(model="injected", generator="openai", base_url=url, served_model="m", generation_only=True,
                         max_steps=2, batch_size=4, max_new_tokens=4, learning_rate=1e-2, output_dir=str(tmp_path),
                         num_threads=1, sampler={"samples_per_round": 4, "max_rounds": 2, "group_size": 4},
                         **overrides)
    prompts = [Prompt(f"p{i}", f"{i}+{i}=", str(2 * i)) for i in range(8)]
    return Trainer(config, model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(), train_prompts=prompts,
                   eval_prompts=[], verifier=lambda ps, cs: [0.0] * len(cs))


def stopped_events(folder):
    return [e for e in map(json.loads, (folder / "config_history.jsonl").read_text().splitlines())
            if e["event"] == "stopped"]


def test_a_server_without_token_ids_is_refused_at_the_first_step_by_name(tmp_path):
    with FakeOpenAIServer(token_ids=False) as server:
        with pytest.raises(GenerationStopped, match=r"step 1: .* the server at http://127.0.0.1:\d+ returned a "
                                                    r"completion without token ids"):
            trainer(tmp_path, server.url).train()
        assert server.arrivals == 4  # one request per prompt, none sent again
    assert not list(tmp_path.glob("checkpoint-*")) and len(stopped_events(tmp_path)) == 1


def test_a_server_that_stops_answering_mid_step_stops_the_run_without_training_on_the_step(tmp_path):
    # the first two prompts' requests are answered, then the server hangs: requests and health probes alike
    with FakeOpenAIServer(plan=lambda i, rid, a: "ok" if i < 2 else "hold", health="hold") as server:
        run = trainer(tmp_path, server.url, server_dead_after=0.4)
        run._generator.liveness.probe_every_s = 0.05
        with pytest.raises(GenerationStopped, match=r"step 1: .* has answered nothing for \d+\.\d s"):
            run.train()
        assert sum(server.served.values()) == 2
    assert not list(tmp_path.glob("checkpoint-*"))  # nothing of the step was trained on or saved
    metrics = (tmp_path / "metrics.jsonl").read_text().splitlines() if (tmp_path / "metrics.jsonl").exists() else []
    assert not [line for line in metrics if '"sampling/total_samples"' in line]
    [event] = stopped_events(tmp_path)
    assert event["step"] == 0 and "has answered nothing" in event["reason"]
