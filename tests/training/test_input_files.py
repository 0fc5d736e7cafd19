"""Every row of every file a run reads is checked, naming file:line, before a run folder exists and before the model
loads; a pass-rate seed that seeds no training prompt is refused, one that seeds some says how many."""

import json
import logging
import os
import re

import pytest

from reinforce_ada import cli
from reinforce_ada.config import TrainConfig
from reinforce_ada.sampling.memory import prompt_key
from trainer_fixtures import addition_prompts


@pytest.fixture
def no_model(monkeypatch, tmp_path):
    """Run in ``tmp_path``; loading a model fails the test (every check here must come before it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("reinforce_ada.training.loop.load_model", lambda *a, **k: pytest.fail("the model loaded"))


GOOD = {"key": "0123456789abcdef", "pass_rate": 0.5, "num_samples": 8}


@pytest.mark.fault("a pass-rate seed file (--sampler.memory.seed) with a bad row: num_samples -2, Infinity or \"many\", "
                   "pass_rate 1.5, NaN or \"high\", a missing field, a line that is not JSON, a key given twice",
                   "exit 2 naming file:line and the field, before the model loads and before any run folder exists "
                   "(it was a ZeroDivisionError / ValueError traceback at step 1, leaving a run folder with no "
                   "stopped event)")
@pytest.mark.parametrize("bad, message", [
    ('{"key": "k", "pass_rate": 0.5, "num_samples": -2}', "num_samples must be a positive finite number"),
    ('{"key": "k", "pass_rate": 0.5, "num_samples": Infinity}', "num_samples must be a positive finite number"),
    ('{"key": "k", "pass_rate": 1.5, "num_samples": 4}', r"pass_rate must be a number in \[0, 1\]"),
    ('{"key": "k", "pass_rate": NaN, "num_samples": 4}', r"pass_rate must be a number in \[0, 1\]"),
    ('{"key": "k", "pass_rate": 0.0, "num_samples": "many"}', r"num_samples must be a positive finite number \(got "
                                                              r"'many'\)"),
    ('{"key": "k", "pass_rate": "high", "num_samples": 4}', r"pass_rate must be a number in \[0, 1\] \(got 'high'\)"),
    ('{"key": "k", "pass_rate": 0.5}', "expected an object with key, pass_rate, num_samples"),
    ("key,pass_rate", "not a JSON object"),
    (json.dumps(GOOD), "key 0123456789abcdef is given twice"),
])
def test_a_bad_row_of_the_seed_file_is_named_before_anything_loads(no_model, tmp_path, capsys, bad, message):
    (tmp_path / "rates.jsonl").write_text(json.dumps(GOOD) + "\n" + bad + "\n")
    capsys.readouterr()
    assert cli.main(["train", "--strategy", "ada-est", "--sampler.memory.seed", "rates.jsonl",
                     "--output-dir", "run"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: rates.jsonl:2: ")
    assert re.search(message, err[0])
    assert sorted(os.listdir(tmp_path)) == ["rates.jsonl"]


@pytest.mark.fault("a pass-rate seed file whose keys match none of the training prompts (made for other data), or an "
                   "empty one",
                   "exit 2: `--sampler.memory.seed F seeds 0 of the N training prompts: ...`, before the model loads "
                   "(it ran with every p_hat at the prior and said nothing, exit 0)")
@pytest.mark.parametrize("rows", [[GOOD], []])
def test_a_seed_file_that_seeds_no_training_prompt_is_refused(no_model, tmp_path, capsys, rows):
    (tmp_path / "rates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert cli.main(["train", "--strategy", "ada-est", "--sampler.memory.seed", "rates.jsonl",
                     "--output-dir", "run"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--sampler.memory.seed rates.jsonl seeds 0 of the " in err[0]
    assert ("its 1 rows are other prompts'" if rows else "it holds no rows") in err[0]
    assert sorted(os.listdir(tmp_path)) == ["rates.jsonl"]


def test_a_seed_file_says_how_many_training_prompts_it_seeds(tmp_path, caplog):
    from reinforce_ada.training.preflight import check_memory_seed

    prompts = addition_prompts(3, 1)
    rows = [{"key": prompt_key(prompts[0]), "pass_rate": 0.25, "num_samples": 4}, GOOD]
    (tmp_path / "rates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = TrainConfig(strategy="ada-est", output_dir=str(tmp_path / "run"),
                         sampler={"memory": {"seed": str(tmp_path / "rates.jsonl")}})
    with caplog.at_level(logging.INFO, logger="reinforce_ada.training.preflight"):
        check_memory_seed(config, prompts)
    assert caplog.messages == [f"--sampler.memory.seed {tmp_path / 'rates.jsonl'}: seeded 1 of 3 training prompts; "
                               f"the others start at the prior (1 of its rows are other prompts', not used)"]
    assert caplog.records[0].levelname == "WARNING"


@pytest.mark.fault("ada-est with an est.budget the training data cannot spend (--sampler.est.budget 100 on a 3-row "
                   "file with --batch-size 8)",
                   "exit 2 naming the data's 3 prompts, before the model loads and before any run folder exists "
                   "(found at step 1, after the model loaded, leaving a run folder)")
def test_a_step_budget_the_data_cannot_spend_is_refused_before_the_model_loads(no_model, tmp_path, capsys):
    (tmp_path / "three.jsonl").write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "answer": str(2 * i)}) + "\n"
                                                  for i in range(1, 4)))
    capsys.readouterr()
    assert cli.main(["train", "--strategy", "ada-est", "--data", "three.jsonl", "--model", "smollm2-135m",
                     "--batch-size", "8", "--sampler.est.budget", "100", "--output-dir", "run"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: est.budget = 100 is above 3 prompts x est.max_samples=32 = 96: a step draws every one of the "
        "training data's 3 prompts (batch_size 8)"]
    assert sorted(os.listdir(tmp_path)) == ["three.jsonl"]


def test_a_bad_seed_row_is_said_before_torch_is_imported(tmp_path):
    """As fast as a config error: the rows are checked with the settings, before torch's seconds of import."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "rates.jsonl").write_text('{"key": "k", "pass_rate": 0.5, "num_samples": -2}\n')
    code = ("import sys; from reinforce_ada.cli import main; "
            "code = main(['train', '--strategy', 'ada-est', '--sampler.memory.seed', 'rates.jsonl', '--output-dir', "
            "'run']); print(code, 'torch' in sys.modules)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.stdout.split() == ["2", "False"], done.stderr[-2000:]
    assert done.stderr.splitlines() == ["error: rates.jsonl:1: num_samples must be a positive finite number (got -2)"]
