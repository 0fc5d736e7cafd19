"""benchmarks/learning.py: the --json schema others recompute figures from, its statistics, and one-line errors."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("learning_benchmark", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, message", [
    (["--task", "no-such-task"], "unknown task 'no-such-task'"),
    (["--strategies", "grpo", "ada-nothing"], "unknown strategy 'ada-nothing'"),
    (["--strategies", "ada-budget", "--budget", "100", "--batch-size", "32"], "below one group per prompt"),
    (["--steps", "0"], "--steps must be a positive integer"),
])
def test_bad_input_is_a_one_line_error(argv, message, capsys):
    bench = load_benchmark()
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("usage: ") is False


def test_an_out_folder_that_is_not_a_comparison_is_refused_before_training(tmp_path, capsys):
    """Each task's runs are a reinforce-ada compare folder, OUT/TASK: a rerun continues it, anything else is refused."""
    bench = load_benchmark()
    (tmp_path / "arithmetic" / "old-run").mkdir(parents=True)
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", str(tmp_path)])
    assert "holds files but no compare.json" in capsys.readouterr().err.strip().splitlines()[-1]


def test_statistics_by_hand():
    bench = load_benchmark()
    mean, half = bench.t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 * 1.0 / math.sqrt(3))  # t_0.975 at 2 df: 4.302653
    history = [[0, 0, 0.2], [4, 100, 0.4], [8, 300, 0.5]]
    assert bench.accuracy_at_tokens(history, 50) == pytest.approx(0.3)
    assert bench.accuracy_at_tokens(history, 200) == pytest.approx(0.45)
    assert bench.accuracy_at_tokens(history, 1000) == 0.5  # a run short of the budget counts at its final accuracy
    assert bench.first_crossing([0, 4, 8], [0.2, 0.4, 0.5], 0.45) == pytest.approx(6.0)
    assert bench.first_crossing([0, 4, 8], [0.2, 0.4, 0.5], 0.6) == math.inf


def test_report_from_rows_by_hand():
    """Two seeds; GRPO's budget is its mean token count; a strategy twice as fast per token wins at that budget."""
    bench = load_benchmark()
    rows = []
    for seed in (0, 1):
        rows.append({"task": "t", "strategy": "grpo", "lr": 1.0, "seed": seed,
                     "history": [[0, 0, 0.2], [4, 100, 0.3], [8, 200, 0.4 + 0.02 * seed]]})
        rows.append({"task": "t", "strategy": "ada-balanced", "lr": 1.0, "seed": seed,
                     "history": [[0, 0, 0.2], [4, 100, 0.4], [8, 200, 0.5]]})
        rows.append({"task": "t", "strategy": "ada-balanced", "lr": 2.0, "seed": seed,
                     "history": [[0, 0, 0.2], [4, 100, 0.2], [8, 200, 0.2]]})
    report = bench.analyse("t", rows, {})
    assert report["grpo_token_budget"] == 200
    ada = report["strategies"]["ada-balanced"]
    assert ada["best_lr"] == 1.0
    assert ada["per_lr"][1.0]["at_budget"] == [0.5, 0.5]
    assert ada["gain_vs_grpo_at_budget"] == pytest.approx([0.1, 0.08])
    assert ada["gain_vs_grpo_final"] == pytest.approx([0.1, 0.08])  # per step: at GRPO's last step, paired by seed
    # GRPO's mean final accuracy 0.41 is reached by its mean curve at step 8 and by Ada's at 4 + 4 * 0.01 / 0.1
    assert ada["steps"]["grpo_steps"] == pytest.approx(8.0)
    assert ada["steps"]["steps"] == pytest.approx(4.4)
    assert ada["steps"]["ratio"] == pytest.approx(0.55)


def test_a_strategy_run_for_more_steps_than_grpo_is_paired_on_its_own_steps():
    """A cheaper strategy runs 12 steps against GRPO's 8: acc@B interpolates within its longer history, and the
    steps to GRPO's final accuracy are read on its own steps (beyond GRPO's last one)."""
    bench = load_benchmark()
    rows = []
    for seed in (0, 1):
        rows.append({"task": "t", "strategy": "grpo", "lr": 1.0, "seed": seed,
                     "history": [[0, 0, 0.2], [4, 100, 0.3], [8, 200, 0.4]]})
        rows.append({"task": "t", "strategy": "cheap", "lr": 1.0, "seed": seed,
                     "history": [[0, 0, 0.2], [4, 50, 0.25], [8, 100, 0.3], [12, 150, 0.35 + 0.15 * seed]]})
    report = bench.analyse("t", rows, {})
    cheap = report["strategies"]["cheap"]
    assert cheap["per_lr"][1.0]["at_budget"] == pytest.approx([0.35, 0.5])  # short of B: its final accuracy
    assert cheap["per_lr"][1.0]["short_of_budget"] == 2
    # mean curve 0.2, 0.25, 0.3, 0.425: GRPO's 0.4 at step 8 + 4 x 0.1 / 0.125, after GRPO's last step
    assert cheap["steps"]["steps"] == pytest.approx(11.2) and cheap["steps"]["grpo_steps"] == pytest.approx(8.0)
    assert cheap["steps"]["ratio"] == pytest.approx(1.4)
    # per step it is compared at GRPO's last step (8), not at its own longer end
    assert cheap["gain_vs_grpo_final"] == pytest.approx([-0.1, -0.1])


@pytest.mark.slow
def test_json_schema_from_a_tiny_run(tmp_path):
    bench = load_benchmark()
    out = tmp_path / "results.json"
    assert bench.main(["--task", "arithmetic", "--seeds", "0", "--steps", "2", "--eval-every", "1", "--lrs", "1e-3",
                       "--strategies", "grpo", "ada-balanced", "--eval-prompts", "4", "--bucket-prompts", "4",
                       "--bucket-samples", "2", "--out", str(tmp_path / "runs"), "--json", str(out),
                       "--no-write"]) == 0
    data = json.loads(out.read_text())
    assert list(data) == ["rows"]
    assert {(r["task"], r["strategy"], r["lr"], r["seed"]) for r in data["rows"]} == {
        ("arithmetic", "grpo", 1e-3, 0), ("arithmetic", "ada-balanced", 1e-3, 0)}
    for row in data["rows"]:
        assert list(row) == ["task", "strategy", "lr", "seed", "history", "seconds_per_step"]
        assert row["seconds_per_step"] > 0
        assert [h[0] for h in row["history"]] == [0, 1, 2]
        assert row["history"][0][1] == 0 and all(isinstance(h[1], int) for h in row["history"])
        assert row["history"][1][1] < row["history"][2][1]  # tokens only grow
        assert all(0.0 <= h[2] <= 1.0 for h in row["history"])
    assert bench.details_path(out).exists()
    assert bench.main(["--from-json", str(out), "--no-write"]) == 0


def test_from_json_merges_files_and_keeps_a_repeated_run_once(tmp_path, capsys):
    bench = load_benchmark()
    grpo = {"task": "t", "strategy": "grpo", "lr": 1.0, "seed": 0, "history": [[0, 0, 0.2], [4, 100, 0.4]]}
    ada = {"task": "t", "strategy": "ada-balanced", "lr": 1.0, "seed": 0, "history": [[0, 0, 0.2], [4, 300, 0.5]]}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    bench.write_results(first, [grpo], {"zero_variance": {"t": {"grpo": {"1.0": {"0": [0.5]}}}}})
    bench.write_results(second, [grpo, ada], {"zero_variance": {"t": {"ada-balanced": {"1.0": {"0": [0.1]}}}}})
    merged = tmp_path / "merged.json"
    assert bench.main(["--from-json", str(first), str(second), "--merge-json", str(merged), "--no-write"]) == 0
    rows = json.loads(merged.read_text())["rows"]
    assert [(r["strategy"], r["seed"]) for r in rows] == [("grpo", 0), ("ada-balanced", 0)]
    details = json.loads(bench.details_path(merged).read_text())
    assert set(details["zero_variance"]["t"]) == {"grpo", "ada-balanced"}
    assert "ada-balanced @ 1 *" in capsys.readouterr().out


def test_the_documented_overdraw_figures_come_from_the_committed_json():
    """README and docs/benchmarks.md quote these from benchmarks/results/learning_results_recurring.json (the over-draw run)."""
    bench = load_benchmark()
    docs = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = json.loads((docs / "learning_results_recurring.json").read_text())["rows"]
    details = json.loads((docs / "learning_results_recurring_details.json").read_text())
    assert details["args"]["train_prompts"] == 256 and details["args"]["seeds"] == [0, 1, 2, 3, 4]
    expected = {"arithmetic": {"ada-budget-od2-probe2": (-0.018, 0.042, 0.241), "ada-budget-od2": (-0.001, 0.038, 0.230),
                               "grpo": (0.0, 0.0, 0.262)},
                "arithmetic-mixed": {"ada-budget-od2-probe2": (0.000, 0.017, 0.501),
                                     "ada-budget-od2": (-0.014, 0.038, 0.500), "grpo": (0.0, 0.0, 0.603)}}
    for task, by_strategy in expected.items():
        report = bench.analyse(task, rows, details)
        for strategy, (gain, half, zero_variance) in by_strategy.items():
            entry = report["strategies"][strategy]
            mean, width = bench.t_interval(entry["gain_vs_grpo_at_budget"])
            assert (round(mean, 3), round(width, 3)) == (gain, half), (task, strategy)
            assert round(float(sum(entry["zero_variance_mean"]) / 5), 3) == zero_variance, (task, strategy)


def test_the_documented_price_figures_come_from_the_committed_json():
    """docs/benchmarks.md ("Price of signal") quotes these from benchmarks/results/learning_results_price_exploration.json."""
    bench = load_benchmark()
    docs = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = json.loads((docs / "learning_results_price_exploration.json").read_text())["rows"]
    details = json.loads((docs / "learning_results_price_exploration_details.json").read_text())
    expected = {"arithmetic": {"ada-budget-price0.12": (0.001, 0.004), "ada-budget-price0.14-hl8": (0.004, 0.043)},
                "arithmetic-mixed": {"ada-budget-price0.10": (-0.016, 0.010), "ada-budget-price0.11": (-0.020, 0.033),
                                     "ada-budget-price0.12": (-0.026, 0.015), "ada-budget-price0.13": (-0.019, 0.027),
                                     "ada-budget-price0.14": (-0.023, 0.020),
                                     "ada-budget-price0.12-hl8": (-0.015, 0.021),
                                     "ada-budget-price0.14-hl8": (-0.031, 0.028)}}
    budgets = {"arithmetic": 17966, "arithmetic-mixed": 16890}
    for task, by_strategy in expected.items():
        report = bench.analyse(task, rows, details)
        assert report["seeds"] == [100, 101, 102, 103] and round(report["grpo_token_budget"]) == budgets[task]
        for strategy, (gain, half) in by_strategy.items():
            entry = report["strategies"][strategy]
            mean, width = bench.t_interval(entry["gain_vs_grpo_at_budget"])
            assert (round(mean, 3), round(width, 3)) == (gain, half), (task, strategy)


def test_the_documented_whole_pool_figures_come_from_the_committed_json(capsys):
    """docs/benchmarks.md ("Training on the whole pool") quotes these from benchmarks/results/learning_results.json."""
    bench = load_benchmark()
    docs = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = json.loads((docs / "learning_results.json").read_text())["rows"]
    expected = {"arithmetic": {"stream-mixed-cap6-all": (0.006, 0.063), "stream-mixed-cap8-all": (0.004, 0.048)},
                "arithmetic-mixed": {"stream-mixed-cap6-all": (0.000, 0.011), "stream-mixed-cap8-all": (-0.000, 0.016)}}
    for task, by_strategy in expected.items():
        report = bench.analyse(task, rows, {})
        for strategy, (gain, half) in by_strategy.items():
            entry = report["strategies"][strategy]
            assert entry["best_lr"] == 5e-4 and report["seeds"] == [0, 1, 2, 3, 4]
            mean, width = bench.t_interval(entry["gain_vs_grpo_at_budget"])
            assert (round(mean, 3), round(width, 3)) == (gain, half), (task, strategy)
    # the same samplers keeping n per prompt, paired by seed (benchmarks/learning_paired.py)
    spec = importlib.util.spec_from_file_location("learning_paired", PATH.with_name("learning_paired.py"))
    paired = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(paired)
    assert paired.main([str(docs / "learning_results.json"), "--pair", "stream-mixed-cap8-all",
                        "stream-mixed-cap8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "arithmetic: stream-mixed-cap8-all - stream-mixed-cap8 (lr 0.0005, seeds [0, 1, 2, 3, 4], B = 17,932 " \
           "tokens): acc@B 0.004 ± 0.004" in out[0]
    assert out[1].startswith("arithmetic-mixed: stream-mixed-cap8-all - stream-mixed-cap8") and \
        "acc@B 0.004 ± 0.011" in out[1]


def assert_paired_gains(bench, report, strategy, at_budget, final, lr=5e-4) -> dict:
    """The strategy is at ``lr`` and its paired gains over GRPO, at GRPO's token budget and at its last step, are the
    documented (mean, half-width) pairs, to 3 decimals. Returns the strategy's report entry."""
    entry = report["strategies"][strategy]
    assert entry["best_lr"] == lr
    for key, (gain, half) in (("gain_vs_grpo_at_budget", at_budget), ("gain_vs_grpo_final", final)):
        mean, width = bench.t_interval(entry[key])
        assert (round(mean, 3), round(width, 3)) == (gain, half), (strategy, key)
    return entry


def test_the_documented_ten_seed_figures_come_from_the_committed_json():
    """README and docs/benchmarks.md ("Current model, seeds 0-9") quote these from
    benchmarks/results/learning_results_seeds10.json."""
    bench = load_benchmark()
    docs = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = json.loads((docs / "learning_results_seeds10.json").read_text())["rows"]
    report = bench.analyse("arithmetic", rows, {})
    assert report["seeds"] == list(range(10)) and report["grpo_lr"] == 5e-4
    expected = {"ada-balanced": ((-0.009, 0.024), (0.024, 0.022), 0.55, 0.35, 0.82),
                "stream-mixed": ((-0.000, 0.025), (0.024, 0.019), 0.61, 0.50, 0.93)}
    for strategy, (at_budget, final, ratio, low, high) in expected.items():
        entry = assert_paired_gains(bench, report, strategy, at_budget, final)
        steps = entry["steps"]
        assert (round(steps["ratio"], 2), round(steps["ratio_low"], 2), round(steps["ratio_high"], 2)) == \
            (ratio, low, high), strategy


def test_the_documented_mixed_ten_seed_figures_come_from_the_committed_json():
    """README and docs/benchmarks.md ("Mixed arithmetic, current model") quote these from
    benchmarks/results/learning_results_seeds10_mixed.json."""
    bench = load_benchmark()
    docs = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = json.loads((docs / "learning_results_seeds10_mixed.json").read_text())["rows"]
    report = bench.analyse("arithmetic-mixed", rows, {})
    assert report["seeds"] == list(range(10)) and report["grpo_lr"] == 5e-4
    grpo = [r["history"] for r in rows if r["strategy"] == "grpo" and r["lr"] == 5e-4]
    assert round(sum(h[0][2] for h in grpo) / 10, 3) == 0.147 and round(sum(h[-1][2] for h in grpo) / 10, 3) == 0.148
    expected = {"ada-balanced": ((0.003, 0.010), (0.017, 0.010), 5.7), "stream-mixed": ((0.009, 0.011), (0.013, 0.012), 4.1)}
    for strategy, (at_budget, final, tokens) in expected.items():
        assert_paired_gains(bench, report, strategy, at_budget, final)
        ratio = sum(r["history"][-1][1] for r in rows if r["strategy"] == strategy and r["lr"] == 5e-4) / \
            sum(h[-1][1] for h in grpo)
        assert round(ratio, 1) == tokens, strategy
    # the docs say: its GRPO runs of seeds 0-4 equal the tiny-arithmetic-mixed bed check's (another invocation)
    bed = {(r["lr"], r["seed"]): r["history"] for r in json.loads((docs / "bed_tiny_arithmetic_mixed.json").read_text())
           ["rows"] if r["strategy"] == "grpo"}
    ours = {(r["lr"], r["seed"]): r["history"] for r in rows if r["strategy"] == "grpo" and r["seed"] < 5}
    assert len(ours) == 10 and all(bed[key] == history for key, history in ours.items())


@pytest.mark.parametrize("compare_file, learning_file, expected", [
    ("compare_seeds10_arithmetic.json", "learning_results_seeds10.json",
     {"ada-balanced": ((0.024, 0.022), (-0.009, 0.024), (0.007, 0.035), 3.48, 1.60),
      "stream-mixed": ((0.024, 0.019), (-0.000, 0.025), (-0.017, 0.024), 1.95, 6.08)}),
    ("compare_seeds10_arithmetic_mixed.json", "learning_results_seeds10_mixed.json",
     {"ada-balanced": ((0.017, 0.010), (0.003, 0.010), (0.016, 0.010), 5.74, 2.39),
      "stream-mixed": ((0.013, 0.012), (0.009, 0.011), (0.015, 0.012), 4.10, 5.75)}),
])
def test_the_ten_seed_tables_from_compare_reproduce_the_learning_runs(compare_file, learning_file, expected):
    """docs/benchmarks.md's ten-seed tables come from reinforce-ada compare (benchmarks/results/compare_*.json): its
    60 runs are the learning.py runs of learning_results_seeds10*.json, evaluation for evaluation (steps, generated
    tokens, held-out accuracy), and the documented paired figures at equal steps, tokens and seconds are its JSON's."""
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    report = json.loads((results / compare_file).read_text())
    learning = {(r["strategy"], r["lr"], r["seed"]): r["history"]
                for r in json.loads((results / learning_file).read_text())["rows"]}
    ours = {(r["strategy"], r["lr"], r["seed"]): [[step, tokens, accuracy] for step, tokens, _, accuracy in r["history"]]
            for r in report["runs"]}
    assert len(ours) == 60 and ours == learning
    assert report["baseline"] == "grpo" and report["best_lr_rule"] == "tokens" and report["seeds"] == list(range(10))
    for strategy, (steps, tokens, seconds, tokens_x, seconds_x) in expected.items():
        entry = report["strategies"][strategy]
        assert entry["best_lr"] == 5e-4 and entry["best_lr_at_edge"] == "lowest"
        for key, documented in (("at_steps", steps), ("at_tokens", tokens), ("at_seconds", seconds)):
            assert tuple(round(x, 3) for x in entry["paired_mean_ci95"][key]) == documented, (strategy, key)
        assert (round(entry["tokens_ratio"], 2), round(entry["seconds_ratio"], 2)) == (tokens_x, seconds_x), strategy


def test_the_recurring_set_figures_come_from_the_committed_compare_json():
    """README and docs/benchmarks.md ("Recurring prompt set, current model") quote these from
    benchmarks/results/compare_recurring_512.json: 512 prompts, 320 steps, 5 seeds, the grid as declared."""
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    report = json.loads((results / "compare_recurring_512.json").read_text())
    assert report["grid"]["train"]["task_train_prompts"] == 512 and report["budgets"]["steps"] == 320
    assert report["lrs"] == [2.5e-4, 5e-4] and report["seeds"] == [0, 1, 2, 3, 4] and report["best_lr_rule"] == "tokens"
    assert report["grid"]["strategies"]["stream-mixed-memory"]["sampler.memory.enabled"] is True
    assert round(report["budgets"]["tokens"]) == 143937
    expected = {"ada-balanced": ((0.074, 0.041), (-0.146, 0.069), (-0.084, 0.079), (0.70, 0.64, 0.84)),
                "ada-budget": ((0.010, 0.028), (0.011, 0.028), (-0.078, 0.105), None),
                "stream-mixed-memory": ((0.036, 0.067), (-0.066, 0.040), (-0.168, 0.047), None)}
    for strategy, (steps, tokens, seconds, ratio) in expected.items():
        entry = report["strategies"][strategy]
        assert entry["best_lr"] == 5e-4 and entry["best_lr_at_edge"] == "highest"
        for key, documented in (("at_steps", steps), ("at_tokens", tokens), ("at_seconds", seconds)):
            assert tuple(round(x, 3) for x in entry["paired_mean_ci95"][key]) == documented, (strategy, key)
        if ratio:
            found = entry["steps_to_baseline_final"]
            assert tuple(round(found[k], 2) for k in ("ratio", "ratio_low", "ratio_high")) == ratio
    assert report["strategies"]["grpo"]["best_lr_at_edge"] == "highest"
