"""The SmolLM2-135M grid (benchmarks/smollm2_compare.sh, docs/benchmarks.md "A real pretrained LM on the CPU"): all
40 runs, 10 seeds of each strategy, kept in benchmarks/results/smollm2_bed/grid_runs/; its report in
benchmarks/results/smollm2_bed/grid/ is what compare's analysis makes of them -- none left out, none added, every
paired figure the same -- and the figures docs/benchmarks.md and the README quote are that report's. A report edited by hand, a
kept run changed after the report, or a number pasted from another run fails here."""

from __future__ import annotations

import json
from pathlib import Path

from reinforce_ada.research.compare.report import analyse, jsonable
from reinforce_ada.research.compare.runs import read_run

ROOT = Path(__file__).resolve().parents[2]
BED = ROOT / "benchmarks" / "results" / "smollm2_bed"
STRATEGIES = ["grpo-n8", "ada-est", "grpo", "ada-est-n4"]


def kept_runs() -> dict[tuple[str, float, int], dict]:
    manifest = json.loads((BED / "grid_runs" / "compare.json").read_text())
    assert list(manifest["strategies"]) == STRATEGIES and manifest["lrs"] == [1e-5]
    runs = {}
    for strategy in STRATEGIES:
        for seed in manifest["seeds"]:
            folder = BED / "grid_runs" / f"{strategy}-lr1e-05-seed{seed}"
            if (folder / "summary.json").is_file():
                runs[(strategy, 1e-5, seed)] = read_run(folder)
    return runs


def test_the_report_is_compares_analysis_of_all_40_kept_runs():
    committed = json.loads((BED / "grid" / "report.json").read_text())
    runs = kept_runs()
    assert len(committed["runs"]) == len(runs) == 40
    for strategy in STRATEGIES:
        assert sorted(seed for s, _, seed in runs if s == strategy) == list(range(10)), strategy
    ours = jsonable(analyse(runs, STRATEGIES, [1e-5], "grpo-n8", "tokens", "same"))
    assert json.loads(json.dumps(ours["strategies"])) == committed["strategies"]
    assert json.loads(json.dumps(ours["runs"])) == committed["runs"]


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
