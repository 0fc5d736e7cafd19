"""The SmolLM2-135M grid (benchmarks/smollm2_compare.sh, docs/benchmarks.md "A real pretrained LM on the CPU"): all
40 runs, 10 seeds of each strategy, kept in benchmarks/results/smollm2_bed/grid_runs/; its reports in
benchmarks/results/smollm2_bed/grid/ (against grpo-n8, and vs-grpo/ against grpo) are what compare's analysis makes
of them -- none left out, none added, every paired figure the same -- and the figures docs/benchmarks.md and the
README quote are those reports'. A report edited by hand, a kept run changed after the report, or a number pasted
from another run fails here."""

from __future__ import annotations

import json
from pathlib import Path

from reinforce_ada.research.compare.report import analyse, jsonable
from reinforce_ada.research.compare.runs import read_run

ROOT = Path(__file__).resolve().parents[2]
BED = ROOT / "benchmarks" / "results" / "smollm2_bed"
STRATEGIES = ["grpo-n8", "ada-est", "grpo", "ada-est-n4"]


def manifest() -> dict:
    """The grid's compare.json as kept: its strategies, lr, seeds and the report's rules (baseline, best lr)."""
    grid = json.loads((BED / "grid_runs" / "compare.json").read_text())
    assert list(grid["strategies"]) == STRATEGIES and grid["lrs"] == [1e-5]
    return grid


def kept_runs() -> dict[tuple[str, float, int], dict]:
    runs, seeds = {}, manifest()["seeds"]
    for strategy in STRATEGIES:
        for seed in seeds:
            folder = BED / "grid_runs" / f"{strategy}-lr1e-05-seed{seed}"
            if (folder / "summary.json").is_file():
                runs[(strategy, 1e-5, seed)] = read_run(folder)
    return runs


def test_the_reports_are_compares_analysis_of_all_40_kept_runs():
    """Both reports the docs quote: against the grid's baseline (grid/) and, the same runs, against grpo
    (grid/vs-grpo/, which the script makes with the manifest's baseline set to grpo)."""
    grid, runs = manifest(), kept_runs()
    assert len(runs) == 40
    for strategy in STRATEGIES:
        assert sorted(seed for s, _, seed in runs if s == strategy) == list(range(10)), strategy
    for folder, baseline in ((BED / "grid", grid["baseline"]), (BED / "grid" / "vs-grpo", "grpo")):
        committed = json.loads((folder / "report.json").read_text())
        assert len(committed["runs"]) == 40, folder
        ours = jsonable(analyse(runs, STRATEGIES, grid["lrs"], baseline, grid["best_lr"], grid["lr_selection"]))
        assert json.loads(json.dumps(ours["strategies"])) == committed["strategies"], folder
        assert json.loads(json.dumps(ours["runs"])) == committed["runs"], folder


def figure(entry, key):
    mean, half = entry["paired_mean_ci95"][key]
    return f"{mean:+.3f} ± {half:.3f}"


def test_the_documented_figures_are_the_reports():
    report = json.loads((BED / "grid" / "report.json").read_text())
    versus_grpo = json.loads((BED / "grid" / "vs-grpo" / "report.json").read_text())
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| real LM (SmolLM2-135M"))
    assert "all 40 runs" in docs and "10 seeds" in row and "of 40 runs" not in readme
    for strategy in ("ada-est", "grpo", "ada-est-n4"):
        entry = report["strategies"][strategy]
        assert entry["paired"]["seeds"] == list(range(10)), strategy
        for key in ("at_steps", "at_tokens", "at_seconds"):
            assert figure(entry, key) in docs, (strategy, key)
    assert figure(report["strategies"]["ada-est"], "at_tokens") in row
    for key in ("at_steps", "at_tokens"):
        assert figure(versus_grpo["strategies"]["ada-est-n4"], key) in docs, key
    assert figure(versus_grpo["strategies"]["ada-est-n4"], "at_tokens") in row
