"""The Est evidence in docs/benchmarks.md is what the committed compare reports say: its summary tables are
benchmarks/est_summary.py's output on them, and each cell is what today's compare statistics make of the reports'
own per-seed values -- the exact Student-t interval of the paired differences, the geometric mean of the per-seed
cost ratios -- so a report edited by hand, or a table pasted from another run, fails here."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BEDS = ("recurring", "filtered", "filtered-low", "addition", "mixed")
T_975_4 = 2.7764451  # Student t, 97.5% quantile, 4 degrees of freedom (5 seeds), from the published tables
T_975_4_THEN = 2.776  # the three-decimal table compare used when these reports were written


def load_summary():
    spec = importlib.util.spec_from_file_location("est_summary", ROOT / "benchmarks" / "est_summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def report(bed, tail=""):
    return json.loads((ROOT / "benchmarks" / "results" / f"compare_est_{bed}{tail}.json").read_text())


@pytest.mark.parametrize("table", ["accuracy", "cost"])
def test_the_docs_tables_are_the_summary_of_the_committed_reports(capsys, table):
    summary = load_summary()
    summary.main(["--table", table, *BEDS])
    printed = capsys.readouterr().out.strip()
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    assert printed in docs, f"docs/benchmarks.md's Est {table} table differs from `python benchmarks/est_summary.py " \
                            f"--table {table} " + " ".join(BEDS) + "`"


@pytest.mark.parametrize("bed", BEDS)
def test_each_summarised_interval_is_the_exact_t_interval_of_its_paired_differences(capsys, bed):
    summary = load_summary()
    summary.main([bed])
    row = capsys.readouterr().out.strip().splitlines()[-1].split(" | ")
    est = report(bed)["strategies"]["ada-est"]
    assert est["paired"]["seeds"] == [0, 1, 2, 3, 4]
    for column, budget in ((2, "at_tokens"), (4, "at_steps"), (5, "at_seconds")):
        diffs = est["paired"][budget]
        mean, half = statistics.fmean(diffs), T_975_4 * statistics.stdev(diffs) / math.sqrt(5)
        assert row[column].strip("*") == f"{mean:+.3f} ± {half:.3f}", (bed, budget)
        # the committed report itself holds the interval of the table its version used
        assert est["paired_mean_ci95"][budget][1] == pytest.approx(T_975_4_THEN * half / T_975_4, rel=1e-6)


@pytest.mark.parametrize("bed", BEDS)
def test_each_cost_ratio_is_the_geometric_mean_of_the_per_seed_ratios(capsys, bed):
    summary = load_summary()
    summary.main(["--table", "cost", bed])
    row = capsys.readouterr().out.strip().splitlines()[-1].split(" | ")
    data = report(bed)
    est, n8 = data["strategies"]["ada-est"], data["strategies"]["grpo-n8"]
    mine, theirs = est["per_lr"][repr(est["best_lr"])], n8["per_lr"][repr(n8["best_lr"])]
    assert mine["seeds"] == theirs["seeds"] == [0, 1, 2, 3, 4]
    for column, key in ((1, "tokens"), (2, "seconds")):
        logs = [math.log(a / b) for a, b in zip(mine[key], theirs[key])]
        mean, half = statistics.fmean(logs), T_975_4 * statistics.stdev(logs) / math.sqrt(5)
        assert row[column] == f"{math.exp(mean):.2f} [{math.exp(mean - half):.2f}, {math.exp(mean + half):.2f}]"


def _run(strategy, seed, hard, extremely_hard, easy, tokens_per_step=100):
    """A run with two evaluations (steps 0 and 8); accuracy per stratum at each, 2 / 1 / 4 prompts."""
    evals = {"eval/accuracy/hard": hard, "eval/num_prompts/hard": [2.0, 2.0],
             "eval/accuracy/extremely_hard": extremely_hard, "eval/num_prompts/extremely_hard": [1.0, 1.0],
             "eval/accuracy/easy": easy, "eval/num_prompts/easy": [4.0, 4.0]}
    return {"strategy": strategy, "lr": 1.0, "seed": seed, "evals": evals,
            "history": [[0, 0, 0.0, 0.3], [8, 8 * tokens_per_step, 8.0, 0.5]],
            "strata": {"counts": {"hard": 2, "extremely_hard": 1, "easy": 4}, "digest": "d"}}


def test_hard_minus_easy_by_hand():
    summary = load_summary()
    runs = []
    for seed, lift in ((0, 0.1), (1, 0.12), (2, 0.14)):
        runs.append(_run("base", seed, [0.1, 0.2], [0.0, 0.1], [0.6, 0.7]))
        runs.append(_run("est", seed, [0.1, 0.2 + lift], [0.0, 0.1 + 2 * lift], [0.6, 0.7]))
    report_ = {"baseline": "base", "budgets": {"tokens": 800.0}, "runs": runs,
               "strategies": {"base": {"best_lr": 1.0}, "est": {"best_lr": 1.0, "paired": {"seeds": [0, 1, 2]}}}}
    result = summary.hard_minus_easy(report_, "est")
    # hard + extremely hard, weighted 2 : 1, gains lift and 2 lift: (2 lift + 2 lift) / 3; easy gains 0
    gains = [4 * lift / 3 for lift in (0.1, 0.12, 0.14)]
    assert result["seeds"] == 3
    assert result["gap"]["mean"] == pytest.approx(statistics.fmean(gains))
    assert result["gap"]["half_width"] == pytest.approx(4.302653 * statistics.stdev(gains) / math.sqrt(3), rel=1e-6)
    assert result["gap"]["call"] == "ahead" and result["easy"][0] == pytest.approx(0.0)


def test_the_forty_seed_table_reads_every_interval_from_the_reports():
    """--table forty on a bed with Est, GRPO-n8 and GRPO-n4 (the recurring 5-seed reports stand in for the 40-seed
    ones): each cell is the re-analysed report's own interval, each comparison against its own baseline."""
    summary = load_summary()
    vs_n8, vs_n4 = summary.load("recurring")
    lines = summary.forty_table(vs_n8, vs_n4)
    first = lines[:lines.index("")]  # the intervals; the hard-minus-easy table follows
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in first if line.startswith("| ")}
    assert "ada-est-n4 vs grpo" not in rows  # these reports have no Est-n4
    for label, report, name in (("ada-est vs grpo-n8", vs_n8, "ada-est"), ("ada-est vs grpo", vs_n4, "ada-est"),
                                ("grpo-n8 vs grpo", vs_n4, "grpo-n8")):
        entry, row = report["strategies"][name], rows[label]
        assert row[1] == "5" and row[2] == f"**{summary.ci(entry['paired_mean_ci95']['at_tokens'])}**"
        assert row[4] == summary.ci(entry["paired_mean_ci95"]["at_steps"])
        hard = entry["breakdown"]["strata"]["by_stratum"]["hard"]["paired"]["ci95"]["at_tokens"]
        assert row[7] == summary.ci(hard)
        assert row[-2] == summary.ratio(entry["cost_ratios"]["tokens"])
    assert rows["ada-est vs grpo-n8"][3] == "35" and rows["ada-est vs grpo"][3] == "resolved"  # -0.095 ± 0.032
    gap = summary.hard_minus_easy(vs_n8, "ada-est")
    table5 = next(line for line in lines[lines.index(""):] if line.startswith("| ada-est vs grpo-n8 |")).split(" | ")
    assert table5[1] == "5" and table5[4].startswith(summary.ci((gap["gap"]["mean"], gap["gap"]["half_width"])))


def test_the_forty_seed_table_is_the_summary_of_its_reports(capsys):
    """docs/benchmarks.md's 40-seed table is what est_summary.py prints from the two committed reports, and its
    intervals are t-intervals at 39 degrees of freedom of the 40 paired differences."""

    summary = load_summary()
    summary.main(["--table", "forty", "recurring-40"])
    printed = capsys.readouterr().out.strip()
    assert printed in (ROOT / "docs" / "benchmarks.md").read_text()
    report = json.loads((ROOT / "benchmarks" / "results" / "compare_est_recurring-40.json").read_text())
    assert report["seeds"] == list(range(40)) and report["lrs"] == [0.001] and report["format"] == 3
    est = report["strategies"]["ada-est"]
    diffs = est["paired"]["at_tokens"]
    mean, half = est["paired_mean_ci95"]["at_tokens"]
    assert len(diffs) == 40 and half == pytest.approx(2.022691 * statistics.stdev(diffs) / math.sqrt(40), rel=1e-6)
