"""The ``simulate`` command: closed-form GRPO signal, the paper's Ada-balanced figures, file input and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.cli import main
from reinforce_ada.research.simulate import SimulatedGenerator, grpo_signal_closed_form, pass_rates_from


def run_cli(capsys, *args):
    code = main(["simulate", *args, "--json", "--plot", ""])
    captured = capsys.readouterr()
    return code, captured


def results_by_strategy(stdout):
    return {r["strategy"]: r for r in json.loads(stdout)}


@pytest.mark.slow  # 20000 prompts through every strategy: ~5 s
def test_beta_simulation_matches_closed_form_and_paper(capsys):
    code, out = run_cli(capsys, "--dist", "beta:0.4,2", "--prompts", "20000")
    assert code == 0
    results = results_by_strategy(out.out)
    assert list(results) == ["grpo-n4", "ada-positive", "ada-balanced", "dapo"]
    rates = pass_rates_from("beta:0.4,2", 20000, seed=0)  # the same rates the CLI drew (seed 0)
    closed = grpo_signal_closed_form(rates, 4)
    assert closed == pytest.approx(np.mean(1 - rates**4 - (1 - rates) ** 4))
    assert abs(results["grpo-n4"]["signal_fraction"] - closed) < 0.01
    assert results["grpo-n4"]["samples_per_prompt"] == 4.0
    ada = results["ada-balanced"]
    assert abs(ada["signal_fraction"] - 0.69) < 0.02
    assert abs(ada["samples_per_prompt"] - 22) < 1.5
    assert ada["rounds_max"] == 4
    assert results["ada-positive"]["signal_fraction"] > results["grpo-n4"]["signal_fraction"]


def test_pass_rate_file_gives_exact_budgets(capsys, tmp_path):
    # Rates 0 and 1 never give signal: Ada-balanced spends the whole budget M * N = 32 on each prompt; Ada-positive
    # stops the always-correct prompt after one round of 8.
    path = tmp_path / "rates.txt"
    path.write_text("0\n1\n0\n1\n")
    code, out = run_cli(capsys, "--dist", str(path), "--batch-size", "3")
    assert code == 0
    results = results_by_strategy(out.out)
    assert results["grpo-n4"]["samples_per_prompt"] == 4.0 and results["grpo-n4"]["signal_fraction"] == 0.0
    assert results["ada-balanced"]["samples_per_prompt"] == 32.0 and results["ada-balanced"]["signal_fraction"] == 0.0
    assert results["ada-positive"]["samples_per_prompt"] == (32 + 8) / 2
    assert results["dapo"]["signal_fraction"] == 0.0


def test_pass_rate_json_file_and_table_output(capsys, tmp_path):
    path = tmp_path / "rates.json"
    path.write_text(json.dumps([0.5] * 50))
    code = main(["simulate", "--dist", str(path), "-M", "4", "-N", "2", "-n", "4", "--plot", ""])
    out = capsys.readouterr().out
    assert code == 0
    assert "50 prompts" in out and "M=4 N=2 n=4" in out
    assert f"closed-form signal {100 * (1 - 2 * 0.5**4):.1f}%" in out
    assert "ada-balanced" in out


@pytest.mark.parametrize("args, message", [
    (["--dist", "gamma:1,2"], "neither beta:A,B nor an existing file"),
    (["--dist", "beta:0.4"], "expected beta:A,B"),
    (["--dist", "beta:-1,2"], "Beta parameters must be positive"),
    (["-M", "2", "-N", "1", "-n", "4"], "group_size=4 exceeds"),
])
def test_bad_arguments_exit_with_a_clear_error(capsys, args, message):
    code, out = run_cli(capsys, *args, "--prompts", "10")
    assert code == 2 and message in out.err and out.out == ""


def test_bad_rate_file(capsys, tmp_path):
    path = tmp_path / "rates.txt"
    path.write_text("0.5\n1.5\n")
    code, out = run_cli(capsys, "--dist", str(path))
    assert code == 2 and "pass rates must be numbers in [0, 1]" in out.err


def test_simulated_generator_draws_bernoulli_at_the_pass_rate():
    from reinforce_ada.sampling.protocols import GenerationRequest
    from reinforce_ada.types import Prompt

    generator = SimulatedGenerator(seed=3)
    requests = [GenerationRequest(Prompt(0, "", metadata={"pass_rate": 0.25}), 4000),
                GenerationRequest(Prompt(1, "", metadata={"pass_rate": 1.0}), 5)]
    first, second = generator.generate(requests)
    assert len(first) == 4000 and generator.num_generated == 4005
    assert abs(sum(c.text == "1" for c in first) / 4000 - 0.25) < 0.03
    assert [c.text for c in second] == ["1"] * 5
